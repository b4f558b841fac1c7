"""The embedded default store: in RAM, persisted to a directory without pickle.

The files on disk (checksummed generations, the ``CURRENT`` switch, the directory lock) are
:mod:`.generations`; the conversion of the graph to and from those files is :mod:`.snapshot`.

Concurrency: any number of threads may read and write one store object (one lock guards
every read-modify-write). The reads of a whole query go through one :meth:`snapshot`: one
version of the store, copy-on-write. Taking a snapshot shares every container with the
store; the next write copies the containers it changes instead of changing them in place,
and rows of deleted nodes wait until no older snapshot is alive. Readers of a snapshot take
no lock and writers never wait for them. A snapshot taken while a graph write is applied is
the version before that write: the write keeps it aside when a reader read since the
previous write (otherwise the first reader waits for the write); a memory write of a few
rows may make a new snapshot wait for it.

One directory has one writer at a time: :meth:`save` holds the
directory's OS lock while it writes, a store opened with :meth:`open` holds it until
:meth:`close`, and a save into a directory another writer saved since this store was loaded
from it raises :class:`StoreConflictError` instead of overwriting those changes.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import weakref
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core import arguments, filters
from ..core.errors import EmbeddingError, InvalidArgumentError, StoreError, UnknownNodeError
from ..core.ids import norm_name
from ..core.memory import math as mem
from ..core.types import Chunk, Edge, Node, NodeKind
from . import ann as ann_mod
from . import lexical, validate
from .base import BaseGraphStore, Change, DerivedReads
from .directory import Persisted
from .first_pass import FirstPassIndexes
from .node_index import NodeIndex
from .vectors import VectorDtype

MAX_SUCCESSORS = 100_000  # replaced edges remembered for racing memory writes
# the containers a snapshot shares with its store (values are never changed in place)
_VERSIONED = ("_docs", "_chunks", "_nodes", "_edges", "_adj", "_memory", "_entity_names")


class InMemoryGraphStore(FirstPassIndexes, Persisted, BaseGraphStore):
    """A graph store in RAM; ``save(dir)`` / ``load(dir)`` round-trip everything.

    Node vectors are kept in one ``vectors`` matrix (``"float16"``, the default, or
    ``"float32"``). Seed search scans exactly, or, for a node kind of at least
    ``ann_threshold`` nodes, asks an HNSW index (extra ``ann``; ``ann=None``: when installed,
    ``True``: always and at any size, ``False``: never) searched with beam width ``ann_ef``;
    it returns ``k × ann_overfetch`` candidates, re-scored exactly against the stored vectors
    (and filtered). See :mod:`.node_index`.
    """

    def __init__(
        self,
        namespace: str = "default",
        max_traces: int = 10_000,
        lock_wait: float = 30.0,
        *,
        vectors: VectorDtype = "float16",
        ann: bool | None = None,
        ann_threshold: int = ann_mod.THRESHOLD,
        ann_ef: int = ann_mod.EF,
        ann_overfetch: int = ann_mod.OVERFETCH,
    ) -> None:
        self.namespace = namespace
        self.max_traces = max_traces
        self.lock_wait = lock_wait  # seconds a save waits for another writer's lock
        self._lock = threading.RLock()
        self._save_lock = threading.Lock()
        self._trace_lock = threading.Lock()  # traces are not part of a graph version
        self._docs: dict[str, tuple[str, dict]] = {}
        self._chunks: dict[str, Chunk] = {}
        self._nodes: dict[str, Node] = {}
        self._edges: dict[str, Edge] = {}
        self._adj: dict[str, list[str]] = {}  # node -> its edge ids (lists: a third of sets)
        self._vectors = NodeIndex(vectors, ann, ann_threshold, ann_ef, ann_overfetch)
        self._memory: dict[str, np.ndarray] = {}
        # replaced edge -> its successor (document updates), so a racing memory write lands
        self._successor: dict[str, str] = {}
        self._traces: dict[str, dict] = {}
        self._entity_names: dict[str, str] = {}
        self._dim: int | None = None
        self._first_pass: dict[str, Any] = {}  # the prior's indexes of this version
        self._version = 0  # graph writes so far
        self._shared: set[str] = set()  # containers a snapshot shares: copy before writing
        self._snapshots: weakref.WeakSet[InMemoryGraphStore] = weakref.WeakSet()
        self._read_only = False
        self._before: InMemoryGraphStore | None = None  # the version a graph write replaces
        self._bases: dict[Path, str | None] = {}  # directory -> generation this store knows
        self._held: dict[Path, Any] = {}  # directories whose writer lock this store holds

    # --- snapshots -------------------------------------------------------------------------
    @contextlib.contextmanager
    def snapshot(self) -> Iterator[InMemoryGraphStore]:
        """A read-only view of the store as it is now (see the module): reads through it see
        this version whatever is written meanwhile. Writing through it raises."""
        yield self.pin()

    def pin(self) -> InMemoryGraphStore:
        """The view of :meth:`snapshot`, released when no longer referenced."""
        if not self._lock.acquire(blocking=False):  # a write is being applied
            before = self._before
            if before is not None:
                return before
            self._lock.acquire()
        try:
            return self._view()
        finally:
            self._lock.release()

    def _view(self) -> InMemoryGraphStore:
        view = copy.copy(self)  # shares every container, never copies one
        view._vectors = self._vectors.pin()
        view._lock = contextlib.nullcontext()  # type: ignore[assignment]
        view._read_only, view._before = True, None
        self._shared = set(_VERSIONED)
        self._snapshots.add(view)
        return view

    @contextlib.contextmanager
    def _writing(self, graph: bool = False) -> Iterator[None]:
        """Hold the lock for a write; the version kept aside goes with it. A graph write
        keeps the version before it aside from the start (its decisions read first), when a
        reader read since the previous write."""
        if self._read_only:
            raise StoreError("a snapshot of a store is read only: write to the store itself")
        with self._lock:
            try:
                if graph and self._shared:
                    self._before = self._view()
                yield
            finally:
                self._before = None

    def _own(self, *names: str) -> None:
        """Make the named containers this store's own before changing them in place."""
        if self._read_only:
            raise StoreError("a snapshot of a store is read only: write to the store itself")
        for name in names:
            if name in self._shared:
                self._shared.discard(name)
                setattr(self, name, dict(getattr(self, name)))

    def _graph_write(self) -> int | None:
        """Start a write of the graph (under the lock): own every container, a new version;
        returns the version that held rows are tagged with (None: no snapshot alive). When a
        reader read since the previous write, the version before this one is kept aside for
        readers that arrive while it is applied (it shares what this write will copy)."""
        if self._shared and (self._before is None or self._before._version != self._version):
            self._before = self._view()
        self._own(*_VERSIONED)
        self._version += 1
        self._first_pass = {}
        alive = [v._version for v in list(self._snapshots)]
        self._vectors.release(min(alive) if alive else None)
        return self._version if alive else None

    # --- size and documents ---------------------------------------------------------------
    @property
    def dim(self) -> int | None:
        return self._dim

    def counts(self) -> dict[str, int]:
        with self._lock:
            kinds = {"chunk": 0, "anchor": 0, "entity": 0}
            for n in self._nodes.values():
                kinds[n.kind] += 1
            return {
                "documents": len(self._docs),
                "chunks": kinds["chunk"],
                "anchors": kinds["anchor"],
                "entities": kinds["entity"],
                "edges": len(self._edges),
                "touched_edges": len(self._memory),
            }

    def document_hash(self, doc_id: str) -> str | None:
        entry = self._docs.get(doc_id)
        return entry[0] if entry else None

    def document_ids(self) -> list[str]:
        with self._lock:
            return list(self._docs)

    def documents(self) -> dict[str, tuple[str, dict]]:
        with self._lock:
            return {d: (h, dict(m)) for d, (h, m) in self._docs.items()}

    def document_chunks(self, doc_id: str) -> list[Chunk]:
        with self._lock:
            found = [c for c in self._chunks.values() if c.doc_id == doc_id]
        return sorted(found, key=lambda c: (c.index, c.id))

    # --- writes: decided by .writes (as every store's), applied here -----------------------
    def _write_step(self, what: str, graph: bool = False) -> contextlib.AbstractContextManager[Any]:
        return self._writing(graph)

    def _write_reads(self) -> _Reads:
        return _Reads(self)

    def apply(self, change: Change) -> None:
        """Apply a write's change (:mod:`.writes` decided it; the caller holds the write
        lock): a change of the graph is a new version (snapshots keep the one they read), a
        change of memory and learned links only is not."""
        if change.chunks:  # the first query's lexical half needs bm25s: imported here, not there
            lexical.warm()
        fresh = [n for n in change.nodes if n.id not in self._nodes or n.id in change.drop_nodes]
        rows = np.zeros((len(fresh), self._dim or 0), dtype=np.float32)
        if fresh:
            rows = np.stack([change.vectors[n.id] for n in fresh]).astype(np.float32)
            validate.storable(rows, self._vectors.table.dtype)  # before anything changes
        with self._lock:  # held already by a write of the store's own
            if change.graph:
                self._apply_graph(change, fresh, rows)
            else:
                self._add_links(change.edges)
            if change.memory:
                self._own("_memory")
                for eid, row in change.memory.items():
                    if row is None:
                        self._memory.pop(eid, None)
                    else:
                        self._memory[eid] = row
            for old, new in change.successors.items():
                self._successor[old] = new
            while len(self._successor) > MAX_SUCCESSORS:
                del self._successor[next(iter(self._successor))]

    def _apply_graph(self, change: Change, fresh: list[Node], rows: np.ndarray) -> None:
        held = self._graph_write()
        if change.drop_documents or change.drop_nodes or change.drop_edges:
            self._drop(change, held)
        if fresh and self._dim is None:
            self._dim = int(rows.shape[1])
        for doc_id, digest, meta in change.documents:
            self._docs[doc_id] = (digest, dict(meta))
        for c in change.chunks:
            self._chunks[c.id] = c
        for node in change.nodes:
            if node.id in self._nodes:  # a new record (its aliases grew)
                self._nodes[node.id] = node
            else:
                self._add_node(node)
        self._vectors.put(fresh, rows)
        for alias, node_id in change.names:
            self._entity_names.setdefault(norm_name(alias), node_id)
        grown: dict[str, list[str]] = {}  # adjacency lists are replaced, never appended to
        for e in change.edges:
            if e.id not in self._edges:
                self._edges[e.id] = e
                grown.setdefault(e.u, []).append(e.id)
                if e.v != e.u:
                    grown.setdefault(e.v, []).append(e.id)
        for node_id, added in grown.items():
            self._adj[node_id] = self._adj[node_id] + added

    def _drop(self, change: Change, held: int | None) -> None:
        """The removals of a change: edges with their memory, nodes with their vectors,
        the documents with their chunk records."""
        dead = change.drop_edges
        touched: set[str] = set()
        for eid in dead:
            e = self._edges.pop(eid)
            touched.update((e.u, e.v))
            self._memory.pop(eid, None)
        doomed = change.drop_nodes
        for nid in touched - doomed:
            if nid in self._adj:
                self._adj[nid] = [x for x in self._adj[nid] if x not in dead]
        self._vectors.drop([self._nodes[nid] for nid in doomed], held)
        for nid in doomed:
            self._nodes.pop(nid)
            self._adj.pop(nid, None)
        if doomed:
            self._entity_names = {k: v for k, v in self._entity_names.items() if v not in doomed}
        docs = change.drop_documents
        for c in [c for c in self._chunks.values() if c.doc_id in docs or c.id in doomed]:
            del self._chunks[c.id]
        for d in docs:
            del self._docs[d]

    def _fill(
        self,
        documents: Iterable[tuple[str, str, dict]],
        chunks: Iterable[Chunk],
        nodes: Sequence[Node],
        vectors: np.ndarray,
        edges: Iterable[Edge],
    ) -> None:
        """Make this new, empty store hold these rows, which a store wrote after checking
        them (a load): what :meth:`add_graph` would build from them, without its checks and
        one container at a time (node order kept: the entity names and row order are the
        inserts')."""
        self._docs = {d: (h, m) for d, h, m in documents}
        self._chunks = {c.id: c for c in chunks}
        self._nodes = {n.id: n for n in nodes}
        names: dict[str, str] = {}
        for n in nodes:
            if n.kind == "entity":
                names[norm_name(n.name)] = n.id
                for a in n.aliases:
                    names.setdefault(norm_name(a), n.id)
        self._entity_names = names
        adj: dict[str, list[str]] = {n.id: [] for n in nodes}
        table: dict[str, Edge] = {}
        for e in edges:
            if e.id in table:
                continue
            table[e.id] = e
            adj.setdefault(e.u, []).append(e.id)
            if e.v != e.u:
                adj.setdefault(e.v, []).append(e.id)
        self._edges, self._adj = table, adj
        if len(nodes):
            self._dim = int(vectors.shape[1])
            self._vectors.fill(nodes, vectors)
        self._version += 1
        self._first_pass = {}

    def _add_links(self, links: Sequence[Edge]) -> None:
        """Learned edges (a memory write's): snapshots keep the graph they had."""
        if not links:
            return
        self._own("_edges", "_adj")
        for e in links:
            self._edges[e.id] = e
            for end in dict.fromkeys((e.u, e.v)):
                self._adj[end] = self._adj[end] + [e.id]  # replaced, never appended to

    def _add_node(self, node: Node) -> None:
        self._nodes[node.id] = node
        self._adj.setdefault(node.id, [])
        if node.kind == "entity":
            self._entity_names[norm_name(node.name)] = node.id
            for a in node.aliases:
                self._entity_names.setdefault(norm_name(a), node.id)

    # --- reads ----------------------------------------------------------------------------
    def get_node(self, node_id: str) -> Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise UnknownNodeError(f"unknown node id {node_id!r}") from None

    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]:
        with self._lock:
            return [self.get_node(n) for n in node_ids]

    def get_chunk(self, chunk_id: str) -> Chunk:
        try:
            return self._chunks[chunk_id]
        except KeyError:
            raise UnknownNodeError(f"unknown chunk id {chunk_id!r}") from None

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks in the order asked, in one call (the prior's title hop reads every
        candidate's title)."""
        return [self.get_chunk(c) for c in chunk_ids]

    def get_edge(self, edge_id: str) -> Edge:
        try:
            return self._edges[edge_id]
        except KeyError:
            raise UnknownNodeError(f"unknown edge id {edge_id!r}") from None

    def node_embeddings(self, node_ids: Sequence[str]) -> np.ndarray:
        if not node_ids:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        with self._lock:
            return self._vectors.get(node_ids)

    def neighbors(self, node_id: str) -> list[Edge]:
        with self._lock:  # check and use under one lock: a concurrent delete cannot split them
            if node_id not in self._adj:
                raise UnknownNodeError(f"unknown node id {node_id!r}")
            return [self._edges[e] for e in sorted(self._adj[node_id])]

    def search(
        self,
        query: np.ndarray,
        k: int,
        kinds: Sequence[NodeKind],
        where: Mapping[str, Any] | None = None,
    ) -> list[tuple[str, float]]:
        return self.search_many(np.asarray([query]), k, kinds, where)[0]

    def search_many(
        self,
        queries: np.ndarray,
        k: int,
        kinds: Sequence[NodeKind],
        where: Mapping[str, Any] | None = None,
    ) -> list[list[tuple[str, float]]]:
        """:meth:`search` for each row of ``queries`` at once (one matrix product or one
        batched ANN search)."""
        qs = np.asarray(queries, dtype=np.float32)
        if qs.ndim != 2:
            raise InvalidArgumentError(f"queries must be a 2-D array, got shape {qs.shape}")
        if not len(qs):
            return []
        if self._dim is None:
            return [[] for _ in qs]
        if qs.shape[1] != self._dim:
            raise EmbeddingError(f"query dimension {qs.shape[1]} != store dimension {self._dim}")
        qs = np.stack([mem.unit(q) for q in qs])
        passing = None
        if where:  # chunks and anchors of documents failing the filter drop out
            filt = filters.parse(where)
            passing = lambda ids: self._passing(ids, filt)  # noqa: E731
        with self._lock:
            return self._vectors.search(qs, k, kinds, passing)

    def _passing(self, ids: list[str], f: filters.Filter | None) -> np.ndarray:
        with self._lock:
            ok = {d: f is None or f.test(meta) for d, (_, meta) in self._docs.items()}
            docs = [self._nodes[i].doc_id for i in ids]
        return np.array([d is None or ok.get(d, False) for d in docs])

    def whole_graph(self) -> tuple[list[Node], list[Edge]]:
        with self._lock:
            return list(self._nodes.values()), list(self._edges.values())

    def find_entity_by_name(self, normalized_name: str) -> str | None:
        return self._entity_names.get(normalized_name)

    def find_entities_by_name(self, normalized_names: Sequence[str]) -> dict[str, str]:
        names = self._entity_names
        return {k: v for k in normalized_names if (v := names.get(k)) is not None}

    # --- memory ---------------------------------------------------------------------------
    def memory(self, edge_ids: Sequence[str]) -> np.ndarray:
        dim = self._dim or 0
        out = np.zeros((len(edge_ids), dim), dtype=np.float32)
        with self._lock:
            for i, eid in enumerate(edge_ids):
                v = self._memory.get(eid)
                if v is not None:
                    out[i] = v
        return out

    def edge_successors(self, edge_ids: Sequence[str]) -> dict[str, str]:
        """The edges a document update replaced, among ``edge_ids``, each with the edge that
        took its place (chains of updates followed)."""
        with self._lock:
            succ = dict(self._successor)
        return validate.successors(list(edge_ids), lambda xs: {x: succ[x] for x in xs if x in succ})

    def touched_edges(self) -> int:
        return len(self._memory)

    def top_memory(self, query: np.ndarray | None, k: int) -> list[tuple[str, float]]:
        with self._lock:
            if not self._memory or k <= 0:
                return []
            ids = list(self._memory)
            mat = np.stack([self._memory[i] for i in ids])
        scores = mat @ mem.unit(query) if query is not None else np.linalg.norm(mat, axis=1)
        order = np.argsort(-scores)[:k]
        return [(ids[i], float(scores[i])) for i in order]

    def reset_memory(self) -> int:
        with self._lock:
            self._own("_memory")
            n = len(self._memory)
            self._memory.clear()
            return n

    def decay_memory(self, factor: float) -> int:
        factor = arguments.fraction(factor, "the decay factor")
        with self._lock:
            self._own("_memory")
            for eid in list(self._memory):
                self._memory[eid] = self._memory[eid] * np.float32(factor)
            return len(self._memory)

    def export_memory(self) -> dict[str, list[float]]:
        with self._lock:
            return {k: v.astype(float).tolist() for k, v in self._memory.items()}

    def import_memory(self, vectors: dict[str, list[float]]) -> int:
        with self._lock:
            rows = {}
            for eid, v in vectors.items():
                if eid not in self._edges:
                    raise UnknownNodeError(f"unknown edge id {eid!r}")
                rows[eid] = validate.memory_vector(eid, v, self._dim)
            self._own("_memory")
            self._memory.update(rows)
            return len(rows)

    # --- traces ---------------------------------------------------------------------------
    def save_trace(self, trace: dict) -> None:
        with self._trace_lock:  # not the graph's lock: a retrieve never waits for a write
            self._traces[trace["trace_id"]] = trace
            while len(self._traces) > self.max_traces:
                self._traces.pop(next(iter(self._traces)))

    def load_trace(self, trace_id: str) -> dict | None:
        return self._traces.get(trace_id)

    def recent_traces(self, limit: int) -> list[dict]:
        with self._trace_lock:
            return list(reversed(self._traces.values()))[: max(limit, 0)]


class _Reads(DerivedReads):
    """The write decisions' reads (:class:`.writes.WriteReads`) from the store's dicts (the
    caller holds its write lock)."""

    s: InMemoryGraphStore

    def __init__(self, store: InMemoryGraphStore) -> None:
        super().__init__(store)
        self.s = store

    def held_documents(self, doc_ids: Collection[str]) -> set[str]:
        return {d for d in doc_ids if d in self.s._docs}

    def held_nodes(self, node_ids: Collection[str]) -> set[str]:
        return {n for n in node_ids if n in self.s._nodes}

    def held_edges(self, edge_ids: Collection[str]) -> set[str]:
        return {e for e in edge_ids if e in self.s._edges}

    def document_nodes(self, doc_ids: Collection[str]) -> list[Node]:
        if not doc_ids:
            return []
        return [
            n
            for n in self.s._nodes.values()
            if n.doc_id in doc_ids and n.kind in ("chunk", "anchor")
        ]

    def edges_at(self, node_ids: Collection[str]) -> dict[str, list[Edge]]:
        adj, edges = self.s._adj, self.s._edges
        return {n: [edges[e] for e in adj.get(n, ())] for n in node_ids}

    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]:
        return [self.s._nodes[n] for n in node_ids]

    def held_memory(self, edge_ids: Collection[str]) -> dict[str, np.ndarray]:
        memory = self.s._memory
        return {e: memory[e] for e in edge_ids if e in memory}

    def successors(self, edge_ids: list[str]) -> dict[str, str]:
        succ = self.s._successor
        return {x: succ[x] for x in edge_ids if x in succ}
