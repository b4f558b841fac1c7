"""What the embedded store keeps for the first pass's prior (core/prior.py): a BM25 index of
the chunk texts (built by a load, else on first use) and the graph as a sparse matrix (for
the power iteration, ``prior.push_epsilon`` 0), each built on first use after a change
(each write gives the store a new, empty ``_first_pass``; a snapshot fills the one of its
version, which is the store's own until the next write)."""

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
    _first_pass: dict[str, Any]  # "lexical", "matrix": built for this version
    _passing: Callable[[list[str], filters.Filter | None], np.ndarray]  # the store's filter

    def lexical_search(
        self, text: str, k: int, where: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The top-``k`` chunks by BM25 over their texts, with their scores."""
        index = self.lexical_index()
        filt = filters.parse(where) if where else None
        allowed = (lambda ids: self._passing(ids, filt)) if filt is not None else None
        return index.search(text, k, allowed)

    def lexical_index(self) -> LexicalIndex:
        """The BM25 index of this version's chunk texts (built now if it is not yet): a load
        builds it, so that the first query after a load does not."""
        index: LexicalIndex = self._built(
            "lexical", lambda: LexicalIndex((c.id, c.text) for c in self._chunks.values())
        )
        return index

    def graph_matrix(self) -> GraphMatrix:
        """Entities, anchors and the edges between them as a sparse matrix (PageRank)."""
        matrix: GraphMatrix = self._built(
            "matrix", lambda: GraphMatrix.build(self._nodes.values(), self._edges.values())
        )
        return matrix

    def _built(self, key: str, build: Callable[[], Any]) -> Any:
        """This version's index ``key``, built once (under the store's lock)."""
        with self._lock:
            if key not in self._first_pass:
                self._first_pass[key] = build()
            return self._first_pass[key]
