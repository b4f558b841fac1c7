"""The score calibration (docs/retriever.md#scores): a returned passage's ``score`` in [0, 1],
absolute, so one cutoff means the same on every question and corpus. A passage's own relevance
(:func:`own`: cosine, the question's names it holds, memory's vouching), the best of it among
the first pass's candidates (:func:`meaning`), the share of the question's words the best
passages hold (:func:`coverage`), the two combined (:func:`combined`), then falling with the
rank score down the returned list (:func:`relevance`). The ranking itself (the order) is
:mod:`.ranking`'s."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .ids import is_anchor
from .memory.grounding import content_words
from .memory.replay import vouched
from .text import word_list
from .walk import Walk

FALL_OFF = 0.5
"""How fast relevance falls below the first passage's: with the square root of the share of
its rank score (benchmarks/score_calibration.py)."""
NAME_WEIGHT = 0.2
"""What a passage that holds every name the question mentions adds to its cosine (the
share of the names it holds, times this): a name written out is evidence a cosine over a
long passage blurs, and unlike the best cosine it does not grow with the corpus
(benchmarks/score_calibration.py)."""


def _words(text: str) -> str:
    return " " + " ".join(word_list(text.lower())) + " "


def name_share(names: Sequence[str], text: str) -> float:
    """The share of ``names`` that ``text`` holds as whole words (case-insensitive); 0 with
    no name."""
    if not names:
        return 0.0
    words = _words(text)
    return sum(_words(n) in words for n in names) / len(names)


def own(parts: dict, names: Sequence[str] = (), text: str | None = None) -> float:
    """A passage's own relevance in [0, 1]: its cosine to the question plus
    :data:`NAME_WEIGHT` times the share of the question's names it holds (when its
    ``text`` is given), or memory's vouching for it (``q̂ · v`` of the remembered edge that
    leads to it), whichever is higher."""
    cos = float(parts.get("cosine", 0.0))
    if text is not None:
        cos += NAME_WEIGHT * name_share(names, text)
    return min(1.0, max(0.0, cos, float(parts.get("memory", 0.0))))


COVER_TOP = 10
"""How many of the first pass's best candidates :func:`coverage` reads the question's words in."""


def coverage(words: set[str] | frozenset[str], texts: Sequence[str]) -> float | None:
    """The share of the question's content ``words`` (:func:`.memory.grounding.content_words`)
    that ``texts`` hold, with one word's grace: ``(held + 1) / (words + 1)``, so a short
    question is not taken off the corpus for one word no passage uses ("How do I *make*
    carbonara?": 2/3, not 1/2); ``None`` when the question has no content word. An
    off-corpus question shares its meaning loosely with many passages but its own words
    with few: a name, a title, a rare term it asks about stands in none of them."""
    if not words:
        return None
    held: set[str] = set()
    for text in texts:
        held |= content_words(text) & words
        if len(held) == len(words):
            break
    return (len(held) + 1) / (len(words) + 1)


def combined(meaning: float, share: float | None) -> float:
    """The question's relevance in [0, 1]: the geometric mean of the best passage's
    relevance in meaning (:func:`meaning`) and the share of the question's words the best
    passages hold (:func:`coverage`); the meaning alone when the question has no content
    word. Either being low makes it low: a passage near in meaning to a question whose
    names no passage holds, or passages that share the words but not the meaning
    (benchmarks/score_calibration.py)."""
    if share is None:
        return meaning
    return float(np.sqrt(max(0.0, meaning) * share))


def meaning(walk: Walk, names: Sequence[str] = ()) -> tuple[float, dict[str, str]]:
    """The best own relevance (:func:`own`) among the first pass's candidates (the
    prior's; the chunks the seeds read without one), with the names counted in its best
    :data:`COVER_TOP` passages, and memory's vouching; and those passages' texts by id."""
    if walk.prior is not None:
        parts = walk.prior.parts
        cands = [own(p) for p in parts.values()]
        best = walk.prior.ranked()[:COVER_TOP]
        texts = {c: ch.text for c, ch in zip(best, walk.reads.chunks(best))}
        cands += [own(parts[c], names, t) for c, t in texts.items()]
    else:
        read = [*(n for n in walk.seeds if is_anchor(n)), *walk.chunk_ids]
        cands = [max(0.0, s) for s in walk.reads.sims(read)]
        ids = list(dict.fromkeys(walk.chunk_ids))[:COVER_TOP]
        texts = {c: ch.text for c, ch in zip(ids, walk.reads.chunks(ids))}
        cands += [
            own({"cosine": x}, names, t) for x, t in zip(walk.reads.sims(ids), texts.values())
        ]
    mem = vouched(walk)
    return min(1.0, max([0.0, *cands, *mem.values()])), texts


def question_relevance(
    walk: Walk, names: Sequence[str] = (), words: set[str] | frozenset[str] = frozenset()
) -> float:
    """How relevant the graph is to the question, in [0, 1] (:func:`combined`): its best
    passage's relevance in meaning (:func:`meaning`) with the share of the question's
    content ``words`` that the first pass's best :data:`COVER_TOP` passages hold. Absolute,
    not scaled to the best hit: an off-corpus question scores low on any corpus."""
    best, texts = meaning(walk, names)
    return combined(best, coverage(words, list(texts.values())))


def relevance(best: float, rank_scores: list[float]) -> list[float]:
    """The relevance in [0, 1] of each returned passage, in the returned order: the
    question's relevance ``best`` (the best own relevance the graph holds for it) for the
    first, times ``sqrt(rank score / the first's rank score)`` for the others (the fused rank
    score says how far below the first the method puts it), never above a passage returned
    before it. So the scores fall as the ranking does, and an off-corpus question scores low
    on every passage."""
    out: list[float] = []
    first = rank_scores[0] if rank_scores else 0.0
    for i, s in enumerate(rank_scores):
        share = 1.0 if i == 0 else (min(1.0, max(0.0, s / first)) if first > 0 else 0.0)
        r = best * share**FALL_OFF
        out.append(min(r, out[-1]) if out else r)
    return out
