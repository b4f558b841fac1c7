"""Zero-token mode: the LLM's four jobs done without an LLM.

- extraction: capitalised-phrase entities, and one relation per pair of entities that are
  adjacent in a sentence (the sentence is the relation text);
- navigation: greedy best-first over the query similarity of unexplored neighbours;
- filter: the chunks most similar to the query support the answer;
- pre-query: always retrieve, no decomposition.

The decider answers the engine's asks with JSON in the same format an LLM would, so the same
parsers and validation apply. It records no cost: it spends no tokens.
"""

from __future__ import annotations

import json
import re

from .llms import Ask
from .prompts import Extraction
from .text import first_sentence, split_sentences
from .types import CostLedger

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


def rule_based_extraction(text: str, max_entities: int = 40) -> Extraction:
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


def navigate(ctx: dict) -> dict:
    """One traversal decision from the structured context (see ``traversal._context``)."""
    if ctx["chunks_read"] >= ctx["enough_chunks"]:
        return {"enough": True}
    fwd = max(ctx["candidates"], key=lambda t: t[1], default=(None, -2.0))
    back = max(ctx["frontier"], key=lambda t: t[1], default=(None, -2.0))
    if max(fwd[1], back[1]) < ctx["min_similarity"]:
        return {"enough": True}
    if fwd[0] is not None and fwd[1] >= back[1]:
        return {"enough": False, "action": "forward", "node": fwd[0]}
    return {"enough": False, "action": "backward", "node": back[0]}


def select_support(ctx: dict, top: int) -> dict:
    scores: dict[str, float] = ctx["chunk_scores"]
    best = sorted(scores, key=lambda c: -scores[c])[:top]
    return {"chunks": best, "edges": []}


class ZeroTokenDecider:
    """Answers the engine's asks without an LLM (see module docstring)."""

    def __init__(self, filter_top: int = 2) -> None:
        self.filter_top = filter_top

    def resolve(self, ask: Ask, ledger: CostLedger) -> str:
        ctx = ask.context
        if ask.stage == "extraction":
            x = rule_based_extraction(ctx["text"], ctx.get("max_entities", 40))
            return json.dumps(
                {"title": x.title, "entities": x.entities, "triples": [list(t) for t in x.triples]}
            )
        if ask.stage == "traversal":
            return json.dumps(navigate(ctx))
        if ask.stage == "memorize":
            return json.dumps(select_support(ctx, self.filter_top))
        if ask.stage == "pre_query":
            return json.dumps({"need_retrieval": True, "subquestions": [ctx["query"]]})
        raise ValueError(f"the zero-token decider cannot answer stage {ask.stage!r}")

    async def aresolve(self, ask: Ask, ledger: CostLedger) -> str:
        return self.resolve(ask, ledger)
