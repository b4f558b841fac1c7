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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core import arguments, filters
from ..core.errors import EmbeddingError, InvalidArgumentError, StoreError, UnknownNodeError
from ..core.ids import norm_name
from ..core.memory import math as mem
from ..core.store import MemoryFn
from ..core.types import Chunk, Edge, Node, NodeKind
from . import lexical, validate
from .base import BaseGraphStore
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
        ann_threshold: int = 20_000,
        ann_ef: int = 256,
        ann_overfetch: int = 8,
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
    def _writing(self) -> Iterator[None]:
        """Hold the lock for a graph write; the version kept aside goes with it."""
        with self._lock:
            try:
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
        if self._shared:
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

    # --- writes ---------------------------------------------------------------------------
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
        if chunks:  # the first query's lexical half needs bm25s: imported here, not there
            lexical.warm()
        moves = dict(memory_moves or {})
        near: set[str] = set()
        carried: dict[str, np.ndarray] = {}
        with self._writing():  # every check first: a failed call changes nothing
            embeddings = validate.graph_embeddings(nodes, embeddings, self._dim)
            validate.storable(embeddings, self._vectors.table.dtype)
            validate.edge_endpoints(edges, nodes, lambda ids: [i for i in ids if i in self._nodes])
            for node_id in entity_aliases:
                if node_id not in self._nodes and node_id not in {n.id for n in nodes}:
                    raise UnknownNodeError(f"unknown entity {node_id}")
            held = self._graph_write()
            if replace:  # the old versions go, but not the nodes the new batch links to
                keep = {x for e in edges for x in (e.u, e.v)} | set(entity_aliases)
                near = self._memory_at(set(replace))
                carried = {old: self._memory[old] for old in moves if old in self._memory}
                self._delete(set(replace), keep, held)
            if len(nodes) and self._dim is None:
                self._dim = int(embeddings.shape[1])
            for doc_id, digest, meta in documents:
                self._docs[doc_id] = (digest, dict(meta))
            for c in chunks:
                self._chunks[c.id] = c
            fresh = [i for i, n in enumerate(nodes) if n.id not in self._nodes]
            for i in fresh:
                self._add_node(nodes[i])
            self._vectors.put([nodes[i] for i in fresh], embeddings[fresh])
            for node_id, aliases in entity_aliases.items():
                self._add_aliases(node_id, aliases)
            grown: dict[str, list[str]] = {}  # adjacency lists are replaced, never appended to
            for e in edges:
                if e.id not in self._edges:
                    self._edges[e.id] = e
                    grown.setdefault(e.u, []).append(e.id)
                    if e.v != e.u:
                        grown.setdefault(e.v, []).append(e.id)
            for node_id, added in grown.items():
                self._adj[node_id] = self._adj[node_id] + added
            moved = 0
            for old, new in moves.items():
                if old in self._edges or new not in self._edges:
                    continue
                self._successor[old] = new
                if old in carried:
                    self._memory[new] = mem.merge(self._memory.get(new), carried[old])
                    moved += 1
            while len(self._successor) > MAX_SUCCESSORS:
                del self._successor[next(iter(self._successor))]
            kept = sum(1 for e in near if e in self._memory)
            return {"kept": kept, "moved": moved, "dropped": len(near) - kept - moved}

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

    def _memory_at(self, doc_ids: set[str]) -> set[str]:
        """Edges with memory at the documents' chunks and anchors."""
        nodes = [n for n in self._nodes.values() if n.doc_id in doc_ids]
        return {e for n in nodes for e in self._adj.get(n.id, ()) if e in self._memory}

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

    def _add_aliases(self, node_id: str, aliases: Sequence[str]) -> None:
        node = self._nodes[node_id]
        new = tuple(a for a in aliases if a not in node.aliases and a != node.name)
        if new:
            self._nodes[node_id] = Node(**{**node.to_dict(), "aliases": node.aliases + new})
        for a in aliases:
            self._entity_names.setdefault(norm_name(a), node_id)

    def delete_documents(self, doc_ids: Iterable[str]) -> dict[str, int]:
        with self._writing():
            return self._delete(set(doc_ids), set(), self._graph_write())

    def _doomed(self, doc_set: set[str], keep: set[str]) -> set[str]:
        """Chunks and anchors of the documents, and entities left with no mention."""
        doomed = {
            n.id
            for n in self._nodes.values()
            if n.kind in ("chunk", "anchor") and n.doc_id in doc_set and n.id not in keep
        }
        mentioned = {  # only entities a doomed anchor mentions can be left with none
            self._edges[e].other(a)
            for a in doomed
            for e in self._adj[a]
            if self._edges[e].kind == "mention"
        }
        for ent in mentioned - keep:
            anchors = [
                self._edges[e].other(ent)
                for e in self._adj[ent]
                if self._edges[e].kind == "mention"
            ]
            if all(a in doomed for a in anchors):
                doomed.add(ent)
        return doomed

    def _delete(self, doc_ids: set[str], keep: set[str], held: int | None) -> dict[str, int]:
        doc_set = {d for d in doc_ids if d in self._docs}
        doomed = self._doomed(doc_set, keep)
        dead_edges = {e for nid in doomed for e in self._adj.get(nid, ())}
        touched: set[str] = set()
        for eid in dead_edges:
            e = self._edges.pop(eid)
            touched.update((e.u, e.v))
            self._memory.pop(eid, None)
        for nid in touched - doomed:
            self._adj[nid] = [x for x in self._adj[nid] if x not in dead_edges]
        self._vectors.drop([self._nodes[nid] for nid in doomed], held)
        for nid in doomed:
            self._nodes.pop(nid)
            self._adj.pop(nid, None)
        self._entity_names = {k: v for k, v in self._entity_names.items() if v not in doomed}
        chunks = [c for c in self._chunks.values() if c.doc_id in doc_set]
        for c in chunks:
            del self._chunks[c.id]
        for d in doc_set:
            del self._docs[d]
        return {
            "documents": len(doc_set),
            "chunks": len(chunks),
            "nodes": len(doomed),
            "edges": len(dead_edges),
        }

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

    def update_memory(
        self, edge_ids: Sequence[str], fn: MemoryFn, links: Sequence[Edge] = ()
    ) -> np.ndarray:
        ids = validate.memory_ids(edge_ids)
        wanted = validate.learned_links(links)
        with self._lock:  # read, apply, write under one lock: no lost update
            succ = self._successor
            ids, fn = validate.redirected(ids, lambda xs: {x: succ[x] for x in xs if x in succ}, fn)
            fresh = [e for e in wanted if e.id not in self._edges]
            validate.edge_endpoints(fresh, [], lambda ns: [n for n in ns if n in self._nodes])
            made = {e.id for e in fresh}
            for eid in ids:
                if eid not in self._edges and eid not in made:
                    raise UnknownNodeError(f"unknown edge id {eid!r}")
            dim = self._dim or 0
            new = validate.memory_rows(fn(self.memory(ids)), len(ids), dim)
            self._add_links(fresh)
            self._own("_memory")
            for eid, v in zip(ids, new):
                if np.any(v) or eid in self._memory:
                    self._memory[eid] = v
            return new

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
