"""The offline extractor as it was before issue #14 (commit 676c423), kept verbatim for the
side-by-side comparison in ``benchmarks/extractor.py`` and to rebuild the graphs a recorded
real-model run saw (``tests/harness/test_recorded_qwen.py``); the library does not index with it."""

from __future__ import annotations

import re

from remindrag_integrations.core.prompts import Extraction
from remindrag_integrations.core.text import first_sentence, split_sentences

_CAP = r"[A-Z0-9][\w'’.&-]*"
_ENTITY_RE = re.compile(rf"{_CAP}(?:\s+(?:(?:of|the|de|du|la|le|von|van|der|and|&)\s+)*{_CAP})*")
_STOP = {
    "a",
    "an",
    "the",
    "in",
    "on",
    "at",
    "it",
    "its",
    "he",
    "she",
    "they",
    "his",
    "her",
    "their",
    "this",
    "that",
    "these",
    "those",
    "there",
    "when",
    "while",
    "after",
    "before",
    "during",
    "however",
    "but",
    "and",
    "or",
    "as",
    "by",
    "for",
    "from",
    "with",
    "of",
    "to",
    "is",
    "was",
    "we",
    "i",
    "you",
    "if",
    "then",
    "also",
    "both",
    "since",
    "although",
    "though",
    "one",
    "two",
}


def _entities_in(sentence: str) -> list[str]:
    out = []
    for m in _ENTITY_RE.finditer(sentence):
        words = m.group(0).split()
        while words and words[0].lower() in _STOP:
            words = words[1:]
        while words and words[-1].lower() in _STOP | {"&"}:
            words = words[:-1]
        name = " ".join(words).strip(".,;:'’-")
        if len(name) < 2 or name.isdigit() and len(name) != 4:
            continue
        out.append(name)
    return out


def legacy_extraction(text: str, max_entities: int = 40) -> Extraction:
    entities: dict[str, str] = {}
    triples: list[tuple[str, str, str]] = []
    for s, e in split_sentences(text):
        sentence = " ".join(text[s:e].split())
        names = list(dict.fromkeys(_entities_in(sentence)))
        for n in names:
            entities.setdefault(n.lower(), n)
        rel = sentence if len(sentence) <= 300 else sentence[:299] + "…"
        for a, b in zip(names, names[1:]):
            if a.lower() != b.lower():
                triples.append((a, rel, b))
    kept = list(entities.values())[:max_entities]
    keep = {k.lower() for k in kept}
    triples = [t for t in triples if t[0].lower() in keep and t[2].lower() in keep]
    return Extraction(title=first_sentence(text), entities=kept, triples=triples)
