"""The graph as a sparse matrix for the first pass's PageRank (core/prior.py): entities and
anchors, and the mention, relation and context edges between them (chunks stay out: an anchor
stands for its chunk). Built once after a change by the embedded store; SciPy's CSR does the
matrix-vector products."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..core.types import Edge, Node


@dataclass(frozen=True)
class GraphMatrix:
    ids: list[str]
    pos: dict[str, int]
    adjacency: object  # scipy.sparse.csr_matrix, symmetric, 1 per edge
    degree: np.ndarray  # edges per node (within the matrix)
    anchors: np.ndarray  # rows that are anchors
    entities: np.ndarray  # True on entity rows
    _spread: dict[int, np.ndarray] = field(default_factory=dict, compare=False)

    @classmethod
    def build(cls, nodes: Iterable[Node], edges: Iterable[Edge]) -> GraphMatrix:
        import scipy.sparse as sp

        ids = [n.id for n in nodes if n.kind != "chunk"]
        pos = {n: i for i, n in enumerate(ids)}
        # the corpus's links: no chunk ends (not in ``pos``: -1), no learned edges (memory,
        # not knowledge); one pass, no per-edge Python call
        get = pos.get
        flat = [x for e in edges if e.kind != "learned" for x in (get(e.u, -1), get(e.v, -1))]
        ends = np.asarray(flat, np.int64).reshape(-1, 2)
        ends = ends[(ends >= 0).all(axis=1)]
        u, v = ends[:, 0], ends[:, 1]
        rows, cols = np.concatenate([u, v]), np.concatenate([v, u])
        adj = sp.csr_matrix(
            (np.ones(len(rows), np.float32), (rows, cols)), shape=(len(ids), len(ids))
        )
        degree = np.asarray(adj.sum(axis=1), np.float32).ravel()
        anchors = np.array([i for i, n in enumerate(ids) if n.startswith("a-")], np.int64)
        entities = np.array([n.startswith("e-") for n in ids], bool)
        return cls(ids, pos, adj, degree, anchors, entities)

    def spread_weights(self, max_degree: int) -> np.ndarray:
        """1 / degree per row, 0 for hub entities (more than ``max_degree`` edges); computed
        once per ``max_degree``."""
        if max_degree not in self._spread:
            inv = np.where(self.degree > 0, 1.0 / np.maximum(self.degree, 1.0), 0.0)
            hubs = self.entities & (self.degree > max_degree)
            self._spread[max_degree] = np.where(hubs, 0.0, inv).astype(np.float32)
        return self._spread[max_degree]

    def pagerank(
        self, restart: dict[str, float], damping: float, iterations: int, max_degree: int
    ) -> np.ndarray:
        """Personalised PageRank mass of every row; entities with more than ``max_degree``
        edges spread nothing (what reaches a hub is lost)."""
        p = np.zeros(len(self.ids), np.float32)
        for node, mass in restart.items():
            if node in self.pos:
                p[self.pos[node]] += mass
        if p.sum() <= 0:
            return p
        p /= p.sum()
        inv = self.spread_weights(max_degree)
        x = p.copy()
        for _ in range(iterations):
            x = (1.0 - damping) * p + damping * (self.adjacency @ (x * inv))  # type: ignore[operator]
        return x

    def push(
        self,
        restart: dict[str, float],
        damping: float,
        epsilon: float,
        rounds: int,
        max_degree: int,
        max_nodes: int,
    ) -> dict[str, float]:
        """The forward push of ``core/push.py`` over the matrix's rows: the same rounds,
        thresholds and read cap (a row counts as read the first time its residual passes
        ``epsilon``), with the reads as slices of the sparse rows instead of store calls.
        The mass of every row it reached, by node id."""
        p = np.zeros(len(self.ids))
        for node, share in restart.items():
            if node in self.pos and share > 0:
                p[self.pos[node]] += share
        if p.sum() <= 0:
            return {}
        residual: np.ndarray = p / p.sum()
        mass: np.ndarray = np.zeros(len(self.ids))
        indptr, indices = self.adjacency.indptr, self.adjacency.indices  # type: ignore[attr-defined]
        weight = self.adjacency.data  # type: ignore[attr-defined]
        # edges a row spreads over (0 for a hub), the read rows and the rows mass reached
        links = np.where(self.spread_weights(max_degree) > 0, self.degree, 0.0)
        read, reached = np.zeros(len(self.ids), bool), residual > 0
        touched = np.flatnonzero(reached)
        for _ in range(rounds):
            new = touched[(residual[touched] > epsilon) & ~read[touched]]
            if len(new) and max_nodes > 0:
                new = new[np.lexsort((new, -residual[new]))][:max_nodes]
                max_nodes -= len(new)
                read[new] = True
            due = touched[read[touched]]
            due = due[residual[due] > epsilon * np.maximum(links[due], 1.0)]
            if not len(due):
                break
            r = residual[due]
            residual[due] = 0.0
            mass[due] += (1.0 - damping) * r
            keep = links[due] > 0
            due, r = due[keep], r[keep]
            if len(due):
                count = indptr[due + 1] - indptr[due]
                at = np.repeat(indptr[due] - np.cumsum(count) + count, count)
                at += np.arange(count.sum())
                targets = indices[at]
                shares = np.repeat(damping * r / links[due], count) * weight[at]
                residual += np.bincount(targets, weights=shares, minlength=len(residual))
                reached[targets] = True
                touched = np.flatnonzero(reached)
        return {self.ids[i]: float(mass[i]) for i in touched[mass[touched] > 0]}
