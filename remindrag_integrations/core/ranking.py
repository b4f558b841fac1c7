"""The ranking policy (docs/method.md §2.5) as named rules, each reading what it is given and
returning scores, never writing what another rule reads: :data:`RULES` lists them in the order
:func:`.pipeline.rank` applies them, each with the config field it reads (its knob). How sure
the method is of a passage, in [0, 1] (its ``score``), is :mod:`.calibration`'s.

1. ``first_pass`` (:func:`first_pass_scores`): each read chunk's first-pass score.
2. ``memory`` (:func:`memory_scores`): plus the memory evidence of each, weighed.
3. ``title_hop`` (:func:`title_hop_gains`): the pages the best candidate names by title gain.
4. ``fill`` (:func:`fill`): the next best unread candidates fill the result up to ``k``.
5. ``dense_seat`` (:func:`dense_seat`): the candidate nearest the question keeps a seat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import prior
from .memory.math import rank_scores
from .types import RetrievedChunk
from .walk import Prior, Walk


@dataclass(frozen=True)
class Ranked:
    """The rank stage's result: the returned chunks, best first, and every candidate's score
    parts (the trace's ``rank_evidence``: cosine, memory, the prior's parts, score, and
    ``title`` / ``seat`` / ``relevance`` where a rule or the calibration gave one)."""

    chunks: list[RetrievedChunk] = field(default_factory=list)
    evidence: dict[str, dict[str, float]] = field(default_factory=dict)


Scored = tuple[str, float, str]
"""A ranked candidate: (chunk id, rank score, how it was found)."""


@dataclass(frozen=True)
class Rule:
    """A named ranking rule and the config fields it reads (``RetrievalConfig`` paths, its
    own knob first; each has its row in docs/config.md)."""

    name: str
    knobs: tuple[str, ...]
    apply: Callable[..., object]
    doc: str


def first_pass_scores(walk: Walk, ids: Sequence[str], cosines: Sequence[float]) -> np.ndarray:
    """The first-pass score of each chunk (:func:`.prior.first_pass`: fused when the prior
    holds it, else cosine plus its anchor's graph mass; the cosine alone without a prior)."""
    return np.asarray(prior.first_pass(walk, ids, cosines), dtype=np.float32)


def score_span(p: Prior | None, lexical_weight: float, graph_weight: float) -> float:
    """How far first-pass scores reach above cosine: 1 + the prior's lexical and graph
    weights (1 without a prior). Memory evidence is weighed on that scale, so a remembered
    path outranks the prior as it outranks cosine alone."""
    return 1.0 if p is None else 1.0 + lexical_weight + graph_weight


def memory_scores(base: np.ndarray, memory: np.ndarray, weight: float) -> np.ndarray:
    """``base`` plus ``weight`` × each chunk's memory evidence (how strongly a remembered edge
    vouches for it): ``memory.rank_weight`` × :func:`score_span` in :func:`.pipeline.rank`."""
    return rank_scores(base, memory, weight)


def title_hop_gains(walk: Walk, ids: Sequence[str], scores: Sequence[float]) -> dict[str, float]:
    """The title hop's gains (:func:`.prior.title_hop`) over every candidate: the chunks read,
    at their rank scores, and the prior's unread ones, at their first-pass scores (none
    without a prior)."""
    if walk.prior is None:
        return {}
    pool = dict(walk.prior.score)
    pool.update(zip(ids, scores))
    return prior.title_hop(walk, pool)


def fill(
    walk: Walk, have: set[str], n: int, hop: Mapping[str, float] | None = None
) -> list[tuple[str, float]]:
    """Up to ``n`` unread chunks to fill the result: the prior's next best (with their title
    hop, ``hop``), or the nearest by dense search without a prior."""
    if walk.prior is not None:
        score, gains = walk.prior.score, hop or {}
        unread = [(c, score[c] + gains.get(c, 0.0)) for c in score if c not in have]
        return sorted(unread, key=lambda t: (-t[1], t[0]))[:n]
    out: list[tuple[str, float]] = []
    for anchor, sim in walk.reads.search(walk.q_hat, n + len(have), ("anchor",)):
        cid = walk.reads.nodes([anchor])[0].chunk_id
        if cid and cid not in have and len(out) < n:
            have = have | {cid}
            out.append((cid, sim))
    return out


@dataclass(frozen=True)
class Seat:
    """What :func:`dense_seat` did: the chunk it seated, its score before and after the lift,
    and whether it came from outside the ranking (then its score parts are new)."""

    chunk: str
    before: float
    lifted: float
    added: bool


def dense_seat(
    place: int,
    p: Prior | None,
    scored: list[Scored],
    hop: Mapping[str, float],
    vouched: bool,
) -> tuple[list[Scored], Seat | None]:
    """The zero-token ranking with the candidate nearest the question (the best cosine, what
    a plain vector search returns first) at ``place`` (``prior.dense_seat``) or better: when
    the fused score ranks it lower, it is lifted to the score of the passage at that place
    and ranks right before it (the lift is the ``seat`` part). 0 = off. Memory outranks this
    safety net of the first pass: when memory ``vouched`` for any candidate, there is no seat
    (it would move a taught passage down a place, out of the first five when it was fifth)."""
    if place <= 0 or p is None or not p.parts or vouched:
        return scored, None
    best = max(p.parts, key=lambda c: (p.parts[c]["cosine"], c))
    pos = next((i for i, t in enumerate(scored) if t[0] == best), None)
    if pos is not None and pos < place:
        return scored, None
    rest = list(scored)
    if pos is None:
        entry: Scored = (best, p.score[best] + hop.get(best, 0.0), "dense_fill")
    else:
        entry = rest.pop(pos)
    i = min(place, len(rest) + 1) - 1
    lifted = max(entry[1], rest[i][1]) if i < len(rest) else entry[1]
    seat = Seat(best, entry[1], lifted, pos is None)
    return [*rest[:i], (best, lifted, entry[2]), *rest[i:]], seat


RULES: tuple[Rule, ...] = (
    Rule(
        "first_pass",
        ("prior.enabled", "prior.lexical_weight", "prior.graph_weight"),
        first_pass_scores,
        "the first pass's fused score (the cosine without a prior)",
    ),
    Rule(
        "memory",
        ("memory.rank_weight", "prior.lexical_weight", "prior.graph_weight"),
        memory_scores,
        "plus rank_weight x score_span x the memory evidence",
    ),
    Rule("title_hop", ("prior.title_hop",), title_hop_gains, "pages the best passage names gain"),
    Rule("fill", ("fill_to_k", "k"), fill, "the next best unread candidates fill up to k"),
    Rule("dense_seat", ("prior.dense_seat",), dense_seat, "the nearest candidate keeps a seat"),
)
"""The ranking rules in the order :func:`.pipeline.rank` applies them (``title_hop`` and
``dense_seat`` only when the read and unread candidates compete on one score: a zero-token
walk with a first pass)."""
