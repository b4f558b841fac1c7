"""The prior's personalised PageRank as a forward push: local and bounded on every store.

The mass starts as *residual* on the restart nodes. A round pushes every node whose residual
exceeds ``prior.push_epsilon`` × its degree: it keeps ``1 - damping`` of it as its PageRank
mass and hands ``damping`` of it, in equal shares, to its neighbours' residuals. What is left
when no node qualifies (or after ``prior.iterations`` rounds) is below the threshold
everywhere. This converges to the same fixed point as the power iteration over the whole
graph (``x = (1 - d) p + d A D⁻¹ x``), but reads the edges only where mass still flows: the
nodes a round would push whose edges are not read yet are read in one store call (one round
trip on PostgreSQL), at most ``prior.push_max_nodes`` nodes in all (the largest residuals
first), so a query reads a few thousand edge rows whatever the graph's size, and both stores
compute the same numbers from the same reads.

The spread's graph is the one the whole-graph matrix holds: entities and anchors and the
corpus's edges between them (no chunk ends, no learned edges); an entity with more than
``prior.max_degree`` such edges (a hub) keeps what reaches it and spreads nothing, and a
node a metadata filter shuts out takes no mass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .ids import is_anchor, is_chunk, is_entity
from .store import SpreadStore
from .walk import Walk


class Local:
    """The part of the graph the push has seen: node positions by first sight, and for each
    node whose edges are read its neighbours in the spread as a slice of one flat array."""

    def __init__(self) -> None:
        self.pos: dict[str, int] = {}
        self.flat = np.zeros(0, np.int64)
        self.start = np.zeros(0, np.int64)  # -1 until a node's edges are read
        self.count = np.zeros(0, np.int64)
        self.shut = np.zeros(0, bool)  # shut out by the metadata filter

    def see(self, nodes: list[str]) -> None:
        """Give ``nodes`` positions (their edges not read yet)."""
        self.add({}, [], nodes)

    def ids(self) -> list[str]:
        return list(self.pos)

    def add(self, links: dict[str, list[str]], shut: list[str], nodes: Sequence[str] = ()) -> None:
        """Record the neighbours of newly read nodes, the nodes shut out (read, no
        neighbours) and new ``nodes`` (not read)."""
        pos = self.pos
        at = pos.setdefault
        for node in nodes:
            at(node, len(pos))
        flat: list[int] = []
        rows: list[tuple[int, int, int]] = []
        for u, others in links.items():
            rows.append((at(u, len(pos)), len(flat), len(others)))
            flat += [at(w, len(pos)) for w in others]
        grow = len(pos) - len(self.start)
        self.start = np.pad(self.start, (0, grow), constant_values=-1)
        self.count, self.shut = np.pad(self.count, (0, grow)), np.pad(self.shut, (0, grow))
        base = len(self.flat)
        for i, first, n in rows:
            self.start[i], self.count[i] = base + first, n
        for u in shut:
            self.start[pos[u]] = base
            self.shut[pos[u]] = True
        self.flat = np.concatenate([self.flat, np.asarray(flat, np.int64)])


def push(walk: Walk, restart: dict[str, float], seen: Local | None = None) -> dict[str, float]:
    """PageRank mass of the nodes the push reached from ``restart`` (normalised to 1);
    ``seen`` keeps what earlier pushes of the same query read (the feedback round's)."""
    cfg = walk.cfg
    eps, d, room = cfg.prior.push_epsilon, cfg.prior.damping, cfg.prior.push_max_nodes
    total = sum(v for v in restart.values() if v > 0)
    if total <= 0:
        return {}
    g = seen if seen is not None else Local()
    g.see(list(restart))
    residual = np.zeros(len(g.pos))
    for n, v in restart.items():
        residual[g.pos[n]] = max(v, 0.0) / total
    mass = np.zeros(len(residual))
    for _ in range(cfg.prior.iterations):
        new = np.flatnonzero((residual > eps) & (g.start < 0))
        if len(new) and room > 0:
            new = new[np.lexsort((new, -residual[new]))][:room]  # largest residual first
            room -= len(new)
            ids = g.ids()
            g.add(*_read(walk, [ids[i] for i in new], cfg.prior.max_degree))
            grow = len(g.start) - len(residual)
            residual, mass = np.pad(residual, (0, grow)), np.pad(mass, (0, grow))
        due = np.flatnonzero((residual > eps * np.maximum(g.count, 1)) & (g.start >= 0) & ~g.shut)
        if not len(due):
            break
        r = residual[due]
        residual[due] = 0.0
        mass[due] += (1.0 - d) * r
        count = g.count[due]
        spreads = count > 0
        due, r, count = due[spreads], r[spreads], count[spreads]
        if len(due):
            # the flat positions of every pushed node's neighbours, in one gather
            offsets = np.repeat(g.start[due] - np.cumsum(count) + count, count)
            targets = g.flat[offsets + np.arange(count.sum())]
            shares = np.repeat(d * r / count, count)
            residual += np.bincount(targets, weights=shares, minlength=len(residual))
    ids = g.ids()
    return {ids[i]: float(mass[i]) for i in np.flatnonzero(mass > 0)}


def _read(walk: Walk, nodes: list[str], max_degree: int) -> tuple[dict[str, list[str]], list[str]]:
    """The neighbours in the spread of ``nodes`` (their edges read in one store call; a hub
    entity's: none), and the nodes the metadata filter shuts out (their edges not read)."""
    shut: list[str] = []
    if walk.filter is not None:
        ok = walk.allowed(nodes)
        shut = [n for n, passes in zip(nodes, ok) if not passes]
        nodes = [n for n, passes in zip(nodes, ok) if passes]
    if isinstance(walk.store, SpreadStore):  # one statement, other ends only (PostgreSQL)
        links = walk.store.spread_links(nodes)
    else:  # the walk's cached reads (the embedded store: no round trip)
        walk.prefetch_edges(nodes)
        links = {
            u: [w for e in walk.neighbors(u) if not is_chunk(w := e.v if u == e.u else e.u)]
            for u in nodes
        }
    for u, out in links.items():
        if is_entity(u) and len(out) > max_degree:
            links[u] = []
    return links, shut


def top_anchors(mass: dict[str, float], n: int) -> dict[str, float]:
    """The ``n`` anchors with the most mass (ties by id), and every entity's mass."""
    anchors = sorted((a for a in mass if is_anchor(a)), key=lambda a: (-mass[a], a))[:n]
    out = {a: mass[a] for a in anchors}
    out.update((e, v) for e, v in mass.items() if is_entity(e))
    return out
