"""The prior's personalised PageRank as a forward push: local and bounded on every store.

The mass starts as *residual* on the restart nodes. A round pushes every node whose residual
exceeds ``prior.push_epsilon`` × its degree: it keeps ``1 - damping`` of it as its PageRank
mass and hands ``damping`` of it, in equal shares, to its neighbours' residuals. What is left
when no node qualifies (or after ``prior.iterations`` rounds) is below the threshold
everywhere. This converges to the same fixed point as the power iteration over the whole
graph (``x = (1 - d) p + d A D⁻¹ x``, :func:`.pagerank.pagerank`), but reads the edges only
where mass still flows: the nodes a round would push whose edges are not read yet are read
at once, at most ``prior.push_max_nodes`` nodes in all (the largest residuals first).

One push, over the rows of :class:`.pagerank.Links`: a store's whole-graph matrix (the
embedded store: a read is a slice of its rows) or :class:`Local`, the graph as the walk reads
it (one store call a round, one round trip on PostgreSQL), so a query reads a few thousand
edge rows whatever the graph's size, and both compute the same numbers from the same reads.
The spread's graph is the one the whole-graph matrix holds (see :mod:`.pagerank`); a node a
metadata filter shuts out takes no mass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .config import PriorConfig
from .ids import is_anchor, is_chunk, is_entity
from .pagerank import Links, restart_vector
from .store import SpreadStore
from .walk import Walk

_NONE = np.zeros(0, np.int64)


class Local(Links):
    """The part of the graph the walk has read for the push: rows by first sight, each read
    row's neighbours in the spread a slice of one flat array (a hub's: none). It grows as the
    push reads and keeps what it read for the next push of the same query (the feedback
    rounds')."""

    ids: list[str]
    pos: dict[str, int]

    def __init__(self, walk: Walk) -> None:
        super().__init__([], {}, _NONE, _NONE, _NONE, _NONE)
        self.walk = walk

    def see(self, nodes: Sequence[str]) -> None:
        self.add({}, [], nodes)

    def fetch(self, rows: np.ndarray) -> None:
        """Read the edges of ``rows`` in one store call."""
        ids = self.ids
        self.add(*_read(self.walk, [ids[i] for i in rows], self.walk.cfg.prior.max_degree))

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
        self.ids += list(pos)[len(self.ids) :]
        grow = len(pos) - len(self.start)
        self.start, self.end = _grow(self.start, grow), _grow(self.end, grow)
        self.spread, self.read = _grow(self.spread, grow), _grow(self.read, grow)
        if self.shut is not None:
            self.shut = _grow(self.shut, grow)
        elif shut:
            self.shut = np.zeros(len(pos), bool)
        base = len(self.flat)
        for i, first, n in rows:
            self.start[i], self.end[i] = base + first, base + first + n
            self.spread[i] = n
            self.read[i] = True
        for u in shut:
            self.read[pos[u]] = self.shut[pos[u]] = True  # type: ignore[index]
        self.flat = np.concatenate([self.flat, np.asarray(flat, np.int64)])


def _grow(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` with ``n`` zeros (False) more."""
    return np.concatenate([a, np.zeros(n, a.dtype)]) if n else a


def push(links: Links, restart: Mapping[str, float], cfg: PriorConfig) -> dict[str, float]:
    """PageRank mass of the nodes the push reached from ``restart`` (normalised to 1; nodes
    ``links`` has no row for left out: a :class:`Local` makes them rows). A row counts as
    read the first time its residual passes ``cfg.push_epsilon``, or when an earlier push
    over the same ``links`` read it (:class:`Local`)."""
    eps, d, room = cfg.push_epsilon, cfg.damping, cfg.push_max_nodes
    links.see(list(restart))
    residual = restart_vector(links, restart)
    reached = residual > 0
    touched = np.flatnonzero(reached)  # the rows mass reached: each round looks at these only
    if not len(touched):
        return {}
    mass = np.zeros(len(residual))
    for _ in range(cfg.iterations):
        new = touched[(residual[touched] > eps) & ~links.read[touched]]
        if len(new) and room > 0:
            new = new[np.lexsort((new, -residual[new]))][:room]  # largest residual first
            room -= len(new)
            links.fetch(new)
            grow = len(links.ids) - len(residual)  # a local read meets new nodes
            residual, mass, reached = _grow(residual, grow), _grow(mass, grow), _grow(reached, grow)
        due = touched[links.read[touched]]
        if links.shut is not None:  # a metadata filter shut some out
            due = due[~links.shut[due]]
        spreads = links.spread[due]
        over = residual[due] > eps * np.maximum(spreads, 1)
        due, spreads = due[over], spreads[over]
        if not len(due):
            break
        r = residual[due]
        residual[due] = 0.0
        mass[due] += (1.0 - d) * r
        keep = spreads > 0
        due, r, spreads = due[keep], r[keep], spreads[keep]
        if len(due):
            count, at = links.entries(due)  # every pushed row's entries, in one gather
            targets = links.flat[at]
            shares = np.repeat(d * r / spreads, count)
            if links.weight is not None:
                shares = shares * links.weight[at]
            residual += np.bincount(targets, weights=shares, minlength=len(residual))
            reached[targets] = True
            touched = np.flatnonzero(reached)
    ids = links.ids
    return {ids[i]: float(mass[i]) for i in touched[mass[touched] > 0]}


def _read(walk: Walk, nodes: list[str], max_degree: int) -> tuple[dict[str, list[str]], list[str]]:
    """The neighbours in the spread of ``nodes`` (their edges read in one store call; a hub
    entity's: none), and the nodes the metadata filter shuts out (their edges not read)."""
    shut: list[str] = []
    if walk.reads.filter is not None:
        ok = walk.reads.allowed(nodes)
        shut = [n for n, passes in zip(nodes, ok) if not passes]
        nodes = [n for n, passes in zip(nodes, ok) if passes]
    if isinstance(walk.store, SpreadStore):  # one statement, other ends only (PostgreSQL)
        links = walk.store.spread_links(nodes)
    else:  # the walk's cached reads (the embedded store: no round trip)
        walk.reads.prefetch_edges(nodes)
        links = {
            u: [w for e in walk.reads.neighbors(u) if not is_chunk(w := e.v if u == e.u else e.u)]
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
