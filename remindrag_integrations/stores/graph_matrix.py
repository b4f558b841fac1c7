"""The graph as a sparse matrix for the first pass's PageRank (core/prior.py): entities and
anchors, and the mention, relation and context edges between them (chunks stay out: an anchor
stands for its chunk). Built once after a change by the embedded store; SciPy's CSR does the
matrix-vector products."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..core.ids import is_chunk
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
        pairs = [  # the corpus's links: no chunk ends, no learned edges (memory, not knowledge)
            (pos[e.u], pos[e.v])
            for e in edges
            if not (is_chunk(e.u) or is_chunk(e.v)) and e.kind != "learned"
        ]
        u = np.fromiter((a for a, _ in pairs), np.int64, len(pairs))
        v = np.fromiter((b for _, b in pairs), np.int64, len(pairs))
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
