"""Memory replay, the read side of memory (docs/method.md §2.3): from every seed, depth-first, follow an
edge to a new node when its replay score exceeds λ."""

from __future__ import annotations

import itertools

import numpy as np

from ..frontier import Follow
from ..ids import anchor_of
from ..walk import Walk
from .math import memory_evidence, replay_bound, replay_scores


def starts(walk: Walk) -> list[str]:
    """Where replay starts: the seeds, then the anchors of the first pass's next best
    passages, ``memory.replay_starts`` in all (the seeds alone without a prior)."""
    out = list(walk.seeds)
    if walk.prior is not None:
        ranked = (anchor_of(c) for c in walk.prior.ranked())
        more = [a for a in itertools.islice(ranked, walk.cfg.memory.replay_starts) if a not in out]
        out += more[: max(0, walk.cfg.memory.replay_starts - len(out))]
    return out


def replay(walk: Walk) -> None:
    """Grow ``walk`` along remembered edges, adding at most ``memory.max_replay_nodes`` nodes however
    saturated the memory is. A start that is not a seed joins the subgraph (as a seed) only
    when an edge of it replays."""
    cfg = walk.cfg
    need = replay_bound(cfg.memory.alpha, cfg.memory.lam)
    stack = list(reversed(starts(walk)))
    added = 0
    # the starts and all that memory may lead to from them (edges with q̂ · v > need): one read
    walk.reads.prefetch(stack, Follow(walk.q_hat, need, cfg.memory.max_replay_nodes))
    while stack and added < cfg.memory.max_replay_nodes:
        u = stack.pop()
        edges = walk.frontier(u, learned=True)
        if not edges:
            continue
        memory = walk.reads.memory([e.id for e in edges])
        live = [i for i, m in enumerate(memory @ walk.q_hat) if m > need]
        if not live:
            continue
        cands = [edges[i] for i in live]
        scores = replay_scores(
            walk.q_hat,
            walk.reads.embeddings([u])[0],
            walk.reads.embeddings([e.other(u) for e in cands]),
            memory[live],
            cfg.memory.alpha,
        )
        order = [i for i in np.argsort(-scores) if scores[i] > cfg.memory.lam]
        if order and u not in walk.parents:  # a further start that memory leads on from
            walk.add(u, None, None, "replay")
        walk.reads.prefetch([cands[i].other(u) for i in order])  # read ahead above: usually cached
        for i in order:
            e, w = cands[i], cands[i].other(u)
            if w not in walk.parents and added < cfg.memory.max_replay_nodes:
                walk.add(w, u, e, "replay")
                walk.replayed_edges.append(e.id)
                added += 1
                stack.append(w)


def vouched(walk: Walk, chunk_ids: list[str] | None = None) -> dict[str, float]:
    """Memory evidence (:func:`.math.memory_evidence`) of the walk's chunks: the ``q̂ · v`` of
    the contains edge that read each chunk, or, when replay entered the chunk's anchor, of
    the edge it replayed (whichever is higher), for the chunks where it passes replay."""
    ids = [c for c in (walk.chunk_ids if chunk_ids is None else chunk_ids) if walk.parents[c][1]]
    if not ids:
        return {}
    edges = [walk.parents[c][1] for c in ids]
    replayed = set(walk.replayed_edges)
    into = [walk.parents.get(walk.parents[c][0] or "", (None, None))[1] for c in ids]
    into = [e if e in replayed else edges[i] for i, e in enumerate(into)]
    align = np.maximum(walk.reads.memory(edges) @ walk.q_hat, walk.reads.memory(into) @ walk.q_hat)  # type: ignore[arg-type]
    ev = memory_evidence(align, walk.cfg.memory.alpha, walk.cfg.memory.lam)
    return {c: float(e) for c, e in zip(ids, ev) if e > 0}
