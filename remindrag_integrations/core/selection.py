"""The two top-n picks the query and memory share: where a walk starts (its seeds) and which
chunks support an answer when no one judges them (zero-token mode's filter). Both rank by
what is known before any move; the query stages (:mod:`.pipeline`) and the memory writes
(:mod:`.memory.filter`) import them from here, neither from the other.
"""

from __future__ import annotations

import numpy as np

from .ids import anchor_of
from .walk import Walk, find_seeds


def seed(walk: Walk, query_vecs: np.ndarray) -> None:
    """Start the walk at the top ``cfg.seeds`` nodes of each (sub)query: by the prior's fused
    score for the question (their anchors) when there is one, by cosine otherwise."""
    n = walk.cfg.seeds
    if not len(query_vecs):
        return
    if walk.prior is not None:
        start = [anchor_of(c) for c in walk.prior.ranked()[:n]]
        more = find_seeds(walk.reads, list(query_vecs[1:]), n)
    else:
        start, more = [], find_seeds(walk.reads, list(query_vecs), n)
    walk.reads.nodes([*start, *more])  # one read
    for s in dict.fromkeys([*start, *more]):
        walk.add(s, None, None, "seed")


def top_support(chunk_scores: dict[str, float], top: int) -> list[str]:
    """Zero-token filter: the ``top`` chunks most similar to the query."""
    return sorted(chunk_scores, key=lambda c: -chunk_scores[c])[:top]
