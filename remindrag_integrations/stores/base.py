"""A base class for graph stores: implement a dozen essentials, get the rest of
:class:`~..core.store.GraphStore` derived from them.

The essentials (each raises :class:`NotImplementedError` until a subclass implements it):

- reads: :meth:`~BaseGraphStore.documents`, ``get_node``, ``get_chunk``, ``get_edge``,
  ``node_embeddings``, ``neighbors``, ``whole_graph``, ``memory``;
- the one write: :meth:`~BaseGraphStore.apply` (a :class:`Change`, applied atomically);
- traces: ``save_trace``, ``load_trace``, ``recent_traces``.

Everything else (sizes, batch reads, exact search with filters, entity names, ``add_graph``
with document replacement and memory moves, ``delete_documents``, ``update_memory`` and the
memory admin) is derived here. The three graph and memory writes are decided by
:mod:`.writes`, the one implementation of their semantics every store runs, shipped ones
included: it reads what it needs (:class:`DerivedReads`, from the essentials; a store
overrides ``_write_reads`` with faster reads), checks it (a bad call raises a typed error
before anything changes) and returns one :class:`Change`, which ``apply`` stores; all of it
under ``_write_step`` (one lock of this object, so one process loses no update; a store
shared by several processes holds its transaction there, so the read-check-write happens
inside the database). The derived reads scan the whole graph where a store would use an
index: override any of them for speed. Optional capabilities
(:data:`~..core.store.CAPABILITIES`) are absent until a subclass defines them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from ..core import arguments, filters
from ..core.errors import EmbeddingError, UnknownNodeError
from ..core.ids import norm_name
from ..core.memory import math as mem
from ..core.store import MemoryFn
from ..core.types import Chunk, Edge, Node, NodeKind
from . import validate, writes
from .writes import Change

__all__ = ["BaseGraphStore", "Change", "DerivedReads"]


class BaseGraphStore:
    """Derives :class:`~..core.store.GraphStore` from the essentials (see the module)."""

    namespace: str = "default"

    def __init__(self, namespace: str = "default") -> None:
        self.namespace = namespace

    @property
    def _door_lock(self) -> threading.RLock:
        """The lock every derived write holds (made on first use)."""
        lock: threading.RLock = self.__dict__.setdefault("_base_lock", threading.RLock())
        return lock

    # --- the essentials -------------------------------------------------------------------
    def documents(self) -> Mapping[str, tuple[str, dict]]:
        """Every document: id -> (content hash, metadata)."""
        raise self._missing("documents")

    def get_node(self, node_id: str) -> Node:
        raise self._missing("get_node")

    def get_chunk(self, chunk_id: str) -> Chunk:
        raise self._missing("get_chunk")

    def get_edge(self, edge_id: str) -> Edge:
        raise self._missing("get_edge")

    def node_embeddings(self, node_ids: Sequence[str]) -> np.ndarray:
        raise self._missing("node_embeddings")

    def neighbors(self, node_id: str) -> list[Edge]:
        raise self._missing("neighbors")

    def whole_graph(self) -> tuple[list[Node], list[Edge]]:
        raise self._missing("whole_graph")

    def memory(self, edge_ids: Sequence[str]) -> np.ndarray:
        """One row per edge id, zeros for an edge without memory (known or not)."""
        raise self._missing("memory")

    def apply(self, change: Change) -> None:
        """Apply ``change`` atomically (see :class:`Change`)."""
        raise self._missing("apply")

    def save_trace(self, trace: dict) -> None:
        raise self._missing("save_trace")

    def load_trace(self, trace_id: str) -> dict | None:
        raise self._missing("load_trace")

    def recent_traces(self, limit: int) -> list[dict]:
        raise self._missing("recent_traces")

    def _missing(self, name: str) -> NotImplementedError:
        return NotImplementedError(
            f"{type(self).__name__} must implement {name}() (an essential of BaseGraphStore, "
            "see docs/stores.md)"
        )

    # --- derived: sizes and documents -----------------------------------------------------
    @property
    def dim(self) -> int | None:
        nodes, _ = self.whole_graph()
        return int(self.node_embeddings([nodes[0].id]).shape[1]) if nodes else None

    def counts(self) -> dict[str, int]:
        nodes, edges = self.whole_graph()
        kinds = Counter(n.kind for n in nodes)
        return {
            "documents": len(self.documents()),
            "chunks": kinds["chunk"],
            "anchors": kinds["anchor"],
            "entities": kinds["entity"],
            "edges": len(edges),
            "touched_edges": self.touched_edges(),
        }

    def document_hash(self, doc_id: str) -> str | None:
        entry = self.documents().get(doc_id)
        return entry[0] if entry else None

    def document_ids(self) -> list[str]:
        return list(self.documents())

    def document_chunks(self, doc_id: str) -> list[Chunk]:
        nodes, _ = self.whole_graph()
        found = [self.get_chunk(n.id) for n in nodes if n.kind == "chunk" and n.doc_id == doc_id]
        return sorted(found, key=lambda c: (c.index, c.id))

    # --- derived: reads -------------------------------------------------------------------
    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]:
        return [self.get_node(n) for n in node_ids]

    def search(
        self,
        query: np.ndarray,
        k: int,
        kinds: Sequence[NodeKind],
        where: Mapping[str, Any] | None = None,
    ) -> list[tuple[str, float]]:
        """Exact cosine over every node of ``kinds`` (see :meth:`GraphStore.search`)."""
        q = np.asarray(query, dtype=np.float32)
        dim = self.dim
        if dim is None:
            return []
        if q.shape != (dim,):
            raise EmbeddingError(f"query shape {q.shape} != store dimension ({dim},)")
        nodes = [n for n in self.whole_graph()[0] if n.kind in kinds]
        filt = filters.parse(where) if where else None
        if filt is not None:
            meta = {d: m for d, (_, m) in self.documents().items()}
            nodes = [n for n in nodes if n.doc_id is None or filt.test(meta.get(n.doc_id, {}))]
        if not nodes or k <= 0:
            return []
        sims = self.node_embeddings([n.id for n in nodes]) @ mem.unit(q)
        order = np.argsort(-sims, kind="stable")[:k]
        return [(nodes[i].id, float(sims[i])) for i in order]

    def find_entity_by_name(self, normalized_name: str) -> str | None:
        for n in self.whole_graph()[0]:
            if n.kind == "entity" and normalized_name in map(norm_name, (n.name, *n.aliases)):
                return n.id
        return None

    # --- derived: the writes (their semantics are :mod:`.writes`, the same for every store) --
    def _write_step(self, what: str, graph: bool = False) -> AbstractContextManager[Any]:
        """What a write runs inside (its reads, checks and ``apply``): this object's lock; a
        store sharing its data between processes holds its transaction here. ``what`` names
        the write for an error message; ``graph``: it may change the graph (not only
        memory)."""
        return self._door_lock

    def _write_reads(self) -> writes.WriteReads:
        """What the write decisions read: derived from the essentials (override for speed)."""
        return DerivedReads(self)

    def add_graph(
        self,
        *,
        documents: Sequence[tuple[str, str, dict]],
        chunks: Sequence[Chunk],
        nodes: Sequence[Node],
        embeddings: np.ndarray,
        edges: Sequence[Edge],
        entity_aliases: Mapping[str, Sequence[str]],
        replace: Sequence[str] = (),
        memory_moves: Mapping[str, str] | None = None,
    ) -> dict[str, int]:
        with self._write_step("write the batch", graph=True):
            change, report = writes.add_graph(
                self._write_reads(),
                documents=documents,
                chunks=chunks,
                nodes=nodes,
                embeddings=embeddings,
                edges=edges,
                entity_aliases=entity_aliases,
                replace=replace,
                memory_moves=memory_moves,
            )
            self.apply(change)
            return report

    def delete_documents(self, doc_ids: Iterable[str]) -> dict[str, int]:
        with self._write_step("delete the documents", graph=True):
            change, counts = writes.delete_documents(self._write_reads(), doc_ids)
            if counts["documents"]:
                self.apply(change)
            return counts

    # --- derived: memory ------------------------------------------------------------------
    def update_memory(
        self, edge_ids: Sequence[str], fn: MemoryFn, links: Sequence[Edge] = ()
    ) -> np.ndarray:
        with self._write_step("write memory"):  # read, apply, write in one step: no lost update
            change, new, _, _ = writes.update_memory(self._write_reads(), edge_ids, fn, links)
            self.apply(change)
            return new

    def export_memory(self) -> dict[str, list[float]]:
        ids = [e.id for e in self.whole_graph()[1]]
        rows = self.memory(ids) if ids else np.zeros((0, 0), np.float32)
        return {e: v.astype(float).tolist() for e, v in zip(ids, rows) if np.any(v)}

    def touched_edges(self) -> int:
        return len(self.export_memory())

    def top_memory(self, query: np.ndarray | None, k: int) -> list[tuple[str, float]]:
        dump = self.export_memory()
        if not dump or k <= 0:
            return []
        ids = list(dump)
        mat = np.asarray([dump[i] for i in ids], dtype=np.float32)
        scores = mat @ mem.unit(query) if query is not None else np.linalg.norm(mat, axis=1)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(ids[i], float(scores[i])) for i in order]

    def reset_memory(self) -> int:
        with self._write_step("reset memory"):
            touched = self.export_memory()
            self.apply(Change(memory=dict.fromkeys(touched)))
            return len(touched)

    def decay_memory(self, factor: float) -> int:
        factor = arguments.fraction(factor, "the decay factor")
        with self._write_step("decay memory"):
            touched = self.export_memory()
            scale = np.float32(factor)
            rows = {e: np.asarray(v, np.float32) * scale for e, v in touched.items()}
            self.apply(Change(memory=rows))
            return len(rows)

    def import_memory(self, vectors: dict[str, list[float]]) -> int:
        with self._write_step("import memory"):
            rows: dict[str, np.ndarray | None] = {}
            for eid, v in vectors.items():
                if not DerivedReads(self).held_edges([eid]):
                    raise UnknownNodeError(f"unknown edge id {eid!r}")
                rows[eid] = validate.memory_vector(eid, v, self.dim)
            self.apply(Change(memory=rows))
            return len(rows)

    def flush(self) -> None:
        """Nothing to do for a store that writes through."""
        return None


class DerivedReads:
    """The reads of the write decisions (:class:`.writes.WriteReads`) derived from a
    :class:`BaseGraphStore`'s essentials: ``get_node`` / ``get_edge`` per id, the whole graph
    for a document's nodes, ``neighbors`` for a node's edges."""

    def __init__(self, store: BaseGraphStore) -> None:
        self.store = store

    @property
    def dim(self) -> int | None:
        return self.store.dim

    def held_documents(self, doc_ids: Collection[str]) -> set[str]:
        docs = self.store.documents()
        return {d for d in doc_ids if d in docs}

    def held_nodes(self, node_ids: Collection[str]) -> set[str]:
        return _held(self.store.get_node, node_ids)

    def held_edges(self, edge_ids: Collection[str]) -> set[str]:
        return _held(self.store.get_edge, edge_ids)

    def document_nodes(self, doc_ids: Collection[str]) -> list[Node]:
        if not doc_ids:
            return []
        return [
            n
            for n in self.store.whole_graph()[0]
            if n.kind in ("chunk", "anchor") and n.doc_id in doc_ids
        ]

    def edges_at(self, node_ids: Collection[str]) -> dict[str, list[Edge]]:
        held = self.held_nodes(node_ids)
        return {n: (self.store.neighbors(n) if n in held else []) for n in node_ids}

    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]:
        return self.store.get_nodes(node_ids)

    def held_memory(self, edge_ids: Collection[str]) -> dict[str, np.ndarray]:
        ids = list(edge_ids)
        if not ids:
            return {}
        return {e: row for e, row in zip(ids, self.store.memory(ids)) if np.any(row)}

    def successors(self, edge_ids: list[str]) -> dict[str, str]:
        return {}


def _held(get: Callable[[str], object], ids: Collection[str]) -> set[str]:
    """The ids ``get`` finds (it raises :class:`UnknownNodeError` for the others)."""
    out = set()
    for i in ids:
        try:
            get(i)
        except UnknownNodeError:
            continue
        out.add(i)
    return out
