"""Token counting, sentence splitting and sentence-aligned token chunking."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SENT_RE = re.compile(r"[^.!?\n]*(?:[.!?]+[\"')\]]*|\n+|$)")
_WORD_RE = re.compile(r"\w+|[^\w\s]")


def storable(text: str) -> bool:
    """True when every store can keep ``text``: no NUL character, no lone surrogate."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def count_tokens(text: str) -> int:
    """Tokens of ``text`` when the model reports no usage: a deterministic word-piece and
    punctuation count (about 1.1x the word count of English prose, close to BPE tokenizers)."""
    return len(_WORD_RE.findall(text))


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (whitespace-only spans dropped)."""
    spans = []
    for m in _SENT_RE.finditer(text):
        start, end = m.span()
        if end <= start:
            continue
        seg = text[start:end]
        if seg.strip():
            lead = len(seg) - len(seg.lstrip())
            trail = len(seg) - len(seg.rstrip())
            spans.append((start + lead, end - trail))
    return spans


@dataclass(frozen=True)
class TextSpan:
    start: int
    end: int


def chunk_text(text: str, max_tokens: int, overlap_tokens: int = 0) -> list[TextSpan]:
    """Sentence-aligned chunks of at most ``max_tokens`` tokens (a single longer sentence is
    cut at word boundaries). ``overlap_tokens`` of trailing sentences are repeated."""
    pieces: list[tuple[int, int, int]] = []  # (start, end, tokens)
    for s, e in split_sentences(text):
        n = count_tokens(text[s:e])
        if n <= max_tokens:
            pieces.append((s, e, n))
        else:
            pieces.extend(_split_long(text, s, e, max_tokens))
    chunks: list[TextSpan] = []
    i = 0
    while i < len(pieces):
        j, total = i, 0
        while j < len(pieces) and total + pieces[j][2] <= max_tokens:
            total += pieces[j][2]
            j += 1
        j = max(j, i + 1)
        chunks.append(TextSpan(pieces[i][0], pieces[j - 1][1]))
        if j >= len(pieces):
            break
        back, k = 0, j
        while overlap_tokens and k - 1 > i and back + pieces[k - 1][2] <= overlap_tokens:
            back += pieces[k - 1][2]
            k -= 1
        i = k
    return chunks


def _split_long(text: str, start: int, end: int, max_tokens: int) -> list[tuple[int, int, int]]:
    """Cut one over-long sentence into runs of at most ``max_tokens`` tokens."""
    toks = [(m.start() + start, m.end() + start) for m in _WORD_RE.finditer(text[start:end])]
    return [
        (toks[i][0], toks[min(i + max_tokens, len(toks)) - 1][1], min(max_tokens, len(toks) - i))
        for i in range(0, len(toks), max_tokens)
    ]


def first_sentence(text: str, max_chars: int = 120) -> str:
    spans = split_sentences(text)
    s = text[spans[0][0] : spans[0][1]] if spans else text
    s = " ".join(s.split())
    return s if len(s) <= max_chars else s[: max_chars - 1].rsplit(" ", 1)[0] + "…"


_WORD = re.compile(r"\w+")


def word_list(text: str) -> list[str]:
    """The words of ``text`` in order, as written: the one word tokenizer that names, the
    question's content words and passage overlap are read with (runs of letters, digits and
    ``_``)."""
    return _WORD.findall(text)


def words(text: str) -> frozenset[str]:
    """The distinct words of ``text``, lower-cased (what passage overlap compares)."""
    return frozenset(w.lower() for w in word_list(text))


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two word sets (1.0 for two empty ones)."""
    return len(a & b) / len(a | b) if a or b else 1.0


_LETTER = re.compile(r"[^\W\d_]")
# letters of the Latin script (ASCII, Latin-1, Latin Extended-A/B, Latin Extended Additional)
_NON_LATIN = re.compile(r"[^\W\d_A-Za-z\u00aa\u00b5\u00ba\u00c0-\u024f\u1e00-\u1eff]")
LANGUAGE_SAMPLE = 2000  # characters of a text the language check reads


def foreign_share(text: str) -> float:
    """The share of the letters of ``text`` (its first :data:`LANGUAGE_SAMPLE` characters)
    outside the Latin script: Chinese, Cyrillic, Arabic, ... letters, which an English
    embedder's vocabulary splits into unknown pieces."""
    sample = text[:LANGUAGE_SAMPLE]
    letters = len(_LETTER.findall(sample))
    return len(_NON_LATIN.findall(sample)) / letters if letters else 0.0
