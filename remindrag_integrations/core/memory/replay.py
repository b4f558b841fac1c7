"""Memory replay, the read side of memory (SPEC §2.3): from every seed, depth-first, follow an
edge to a new node when its replay score exceeds λ."""

from __future__ import annotations

import numpy as np

from ..ids import is_chunk
from ..walk import Walk
from .math import replay_bound, replay_scores


def replay(walk: Walk) -> None:
    """Grow ``walk`` along remembered edges, adding at most ``max_replay_nodes`` nodes however
    saturated the memory is."""
    cfg = walk.cfg
    need = replay_bound(cfg.alpha, cfg.lam)
    stack = list(reversed(walk.seeds))
    added = 0
    while stack and added < cfg.max_replay_nodes:
        u = stack.pop()
        edges = walk.frontier(u)
        if not edges:
            continue
        memory = walk.store.memory([e.id for e in edges])
        live = [i for i, m in enumerate(memory @ walk.q_hat) if m > need]
        if not live:
            continue
        cands = [edges[i] for i in live]
        scores = replay_scores(
            walk.q_hat,
            walk.store.node_embeddings([u])[0],
            walk.store.node_embeddings([e.other(u) for e in cands]),
            memory[live],
            cfg.alpha,
        )
        for i in np.argsort(-scores):
            e, w = cands[i], cands[i].other(u)
            if scores[i] > cfg.lam and w not in walk.parents and added < cfg.max_replay_nodes:
                walk.add(w, u, e, "replay")
                walk.replayed_edges.append(e.id)
                added += 1
                stack.append(w)


def remembered_inside(walk: Walk) -> bool:
    """Memory already points into the subgraph: an edge inside it that reads a chunk (a seed
    anchor's ``contains`` edge) would pass replay for this query. That happens when a seed's
    own passage supported an earlier answer to this (or a similar) question: replay has
    nothing new to add, yet memory says the answer is in hand."""
    inside = [(p, n, e) for n, (p, e) in walk.parents.items() if e and p and is_chunk(n)]
    if not inside:
        return False
    memory = walk.store.memory([e for _, _, e in inside])
    need = replay_bound(walk.cfg.alpha, walk.cfg.lam)
    for i in np.flatnonzero(memory @ walk.q_hat > need):
        u, w, _ = inside[i]
        score = replay_scores(
            walk.q_hat,
            walk.store.node_embeddings([u])[0],
            walk.store.node_embeddings([w]),
            memory[i : i + 1],
            walk.cfg.alpha,
        )[0]
        if score > walk.cfg.lam:
            return True
    return False
