"""What the embedded store keeps for the first pass's prior (core/prior.py): a BM25 index of
the chunk texts and the graph as a sparse matrix, each built on first use after a change
(the store sets both to None whenever it changes)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..core import filters
from ..core.types import Chunk, Edge, Node
from .graph_matrix import GraphMatrix
from .lexical import LexicalIndex


class FirstPassIndexes:
    """Mixed into :class:`~.memory_store.InMemoryGraphStore`."""

    _lock: threading.RLock
    _chunks: dict[str, Chunk]
    _nodes: dict[str, Node]
    _edges: dict[str, Edge]
    _lexical: LexicalIndex | None
    _matrix: GraphMatrix | None
    _passing: Callable[[list[str], filters.Filter | None], np.ndarray]  # the store's filter

    def lexical_search(
        self, text: str, k: int, where: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The top-``k`` chunks by BM25 over their texts, with their scores."""
        with self._lock:
            if self._lexical is None:
                self._lexical = LexicalIndex((c.id, c.text) for c in self._chunks.values())
            index = self._lexical
        filt = filters.parse(where) if where else None
        allowed = (lambda ids: self._passing(ids, filt)) if filt is not None else None
        return index.search(text, k, allowed)

    def graph_matrix(self) -> GraphMatrix:
        """Entities, anchors and the edges between them as a sparse matrix (PageRank)."""
        with self._lock:
            if self._matrix is None:
                self._matrix = GraphMatrix.build(self._nodes.values(), self._edges.values())
            return self._matrix
