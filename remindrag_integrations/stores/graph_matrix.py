"""The graph as a sparse matrix for the first pass's PageRank: entities and anchors, and the
mention, relation and context edges between them (chunks stay out: an anchor stands for its
chunk; no learned edges). Built once after a change by the embedded store. Data only
(``core.store.GraphMatrixView``): core's push and power iteration (``core/push.py``,
``core/pagerank.py``) run over its rows; SciPy's CSR does the power iteration's
matrix-vector products."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.ids import is_anchor, is_entity
from ..core.types import Edge, Node


@dataclass(frozen=True)
class GraphMatrix:
    ids: list[str]
    pos: dict[str, int]
    adjacency: Any  # scipy.sparse.csr_matrix, symmetric, float32: the edges per pair
    degree: np.ndarray  # edges per node (within the matrix), float32
    anchors: np.ndarray  # rows that are anchors
    entities: np.ndarray  # True on entity rows

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
        anchors = np.array([i for i, n in enumerate(ids) if is_anchor(n)], np.int64)
        entities = np.array([is_entity(n) for n in ids], bool)
        return cls(ids, pos, adj, degree, anchors, entities)
