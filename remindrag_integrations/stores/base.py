"""A base class for graph stores: implement a dozen essentials, get the rest of
:class:`~..core.store.GraphStore` derived from them.

The essentials (each raises :class:`NotImplementedError` until a subclass implements it):

- reads: :meth:`~BaseGraphStore.documents`, ``get_node``, ``get_chunk``, ``get_edge``,
  ``node_embeddings``, ``neighbors``, ``whole_graph``, ``memory``;
- the one write: :meth:`~BaseGraphStore.apply` (a :class:`Change`, applied atomically);
- traces: ``save_trace``, ``load_trace``, ``recent_traces``.

Everything else (sizes, batch reads, exact search with filters, entity names, ``add_graph``
with document replacement and memory moves, ``delete_documents``, ``update_memory`` and the
memory admin) is derived here: each derived write reads what it needs, checks it (a bad call
raises a typed error before anything changes) and hands one :class:`Change` to ``apply``,
under one lock of this object, so one process loses no update. The derivations read the
whole graph where a store would use an index: override any of them for speed (both shipped
stores override nearly all), and override the writes of a store shared by several processes
so that the read-check-write happens inside the database. Optional capabilities
(:data:`~..core.store.CAPABILITIES`) are absent until a subclass defines them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import arguments, filters
from ..core.errors import EmbeddingError, UnknownNodeError
from ..core.ids import norm_name
from ..core.memory import math as mem
from ..core.store import MemoryFn
from ..core.types import Chunk, Edge, Node, NodeKind
from . import validate


@dataclass(frozen=True)
class Change:
    """One atomic write: first the removals, then what is put (an id that exists is
    overwritten). A store applies all of it or nothing."""

    drop_documents: frozenset[str] = frozenset()
    drop_nodes: frozenset[str] = frozenset()  # with their chunk records and vectors
    drop_edges: frozenset[str] = frozenset()  # with their memory
    documents: tuple[tuple[str, str, dict], ...] = ()  # (id, content hash, metadata)
    chunks: tuple[Chunk, ...] = ()
    nodes: tuple[Node, ...] = ()  # new nodes, or a new record of one (its aliases grew)
    vectors: Mapping[str, np.ndarray] = field(default_factory=dict)  # node id -> embedding
    edges: tuple[Edge, ...] = ()
    memory: Mapping[str, np.ndarray | None] = field(default_factory=dict)  # None: forget


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

    def _existing_nodes(self, ids: Iterable[str]) -> list[str]:
        """The ids of ``ids`` that name a node of the store."""
        out = []
        for i in ids:
            try:
                self.get_node(i)
            except UnknownNodeError:
                continue
            out.append(i)
        return out

    def _edge_exists(self, edge_id: str) -> bool:
        try:
            self.get_edge(edge_id)
        except UnknownNodeError:
            return False
        return True

    # --- derived: graph writes ------------------------------------------------------------
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
        with self._door_lock:
            emb = validate.graph_embeddings(nodes, embeddings, self.dim)
            validate.edge_endpoints(edges, nodes, self._existing_nodes)
            batch = {n.id: i for i, n in enumerate(nodes)}
            for node_id in entity_aliases:
                if node_id not in batch and not self._existing_nodes([node_id]):
                    raise UnknownNodeError(f"unknown entity {node_id}")
            gone_nodes: set[str] = set()
            gone_edges: set[str] = set()
            near: list[str] = []
            docs = set(replace) & set(self.documents())
            if docs:  # the old versions go, but not the nodes the new batch links to
                keep = {x for e in edges for x in (e.u, e.v)} | set(entity_aliases)
                all_nodes, all_edges = self.whole_graph()
                gone_nodes, gone_edges = _doomed(docs, keep, all_nodes, all_edges)
                at = {n.id for n in all_nodes if n.doc_id in docs}
                near = [e.id for e in all_edges if e.u in at or e.v in at]
                near = [e for e, row in zip(near, self.memory(near)) if np.any(row)]
            have = set(self._existing_nodes(batch)) - gone_nodes
            put = {n.id: n for n in nodes if n.id not in have}
            for node_id, aliases in entity_aliases.items():
                node = put.get(node_id) or self.get_node(node_id)
                new = tuple(a for a in aliases if a not in node.aliases and a != node.name)
                if new:
                    put[node_id] = Node(**{**node.to_dict(), "aliases": node.aliases + new})
            new_edges = {
                e.id: e for e in edges if e.id in gone_edges or not self._edge_exists(e.id)
            }
            moved, n_moved = self._moved_memory(dict(memory_moves or {}), gone_edges, new_edges)
            self.apply(
                Change(
                    drop_documents=frozenset(docs),
                    drop_nodes=frozenset(gone_nodes),
                    drop_edges=frozenset(gone_edges),
                    documents=tuple((d, h, dict(m)) for d, h, m in documents),
                    chunks=tuple(chunks),
                    nodes=tuple(put.values()),
                    vectors={i: emb[batch[i]] for i in put if i in batch and i not in have},
                    edges=tuple(new_edges.values()),
                    memory=moved,
                )
            )
            kept = sum(1 for e in near if e not in gone_edges)
            return {"kept": kept, "moved": n_moved, "dropped": len(near) - kept - n_moved}

    def _moved_memory(
        self, moves: dict[str, str], gone: set[str], made: Mapping[str, Edge]
    ) -> tuple[dict[str, np.ndarray | None], int]:
        """The memory rows of the successors of the removed edges that had memory, and how
        many removed edges passed theirs on."""
        pairs = [(o, n) for o, n in moves.items() if o in gone and (n in made or n not in gone)]
        pairs = [(o, n) for o, n in pairs if n in made or self._edge_exists(n)]
        if not pairs:
            return {}, 0
        old = self.memory([o for o, _ in pairs])
        cur = self.memory([n for _, n in pairs])
        out: dict[str, np.ndarray | None] = {}
        passed = 0
        for (_, n), v, c in zip(pairs, old, cur):
            if np.any(v):
                base = out.get(n)
                out[n] = mem.merge(base if base is not None else c, v)
                passed += 1
        return out, passed

    def delete_documents(self, doc_ids: Iterable[str]) -> dict[str, int]:
        with self._door_lock:
            docs = set(doc_ids) & set(self.documents())
            nodes, edges = self.whole_graph()
            gone_nodes, gone_edges = _doomed(docs, set(), nodes, edges)
            chunks = sum(1 for n in nodes if n.kind == "chunk" and n.doc_id in docs)
            change = Change(frozenset(docs), frozenset(gone_nodes), frozenset(gone_edges))
            self.apply(change)
            return {
                "documents": len(docs),
                "chunks": chunks,
                "nodes": len(gone_nodes),
                "edges": len(gone_edges),
            }

    # --- derived: memory ------------------------------------------------------------------
    def update_memory(
        self, edge_ids: Sequence[str], fn: MemoryFn, links: Sequence[Edge] = ()
    ) -> np.ndarray:
        ids = validate.memory_ids(edge_ids)
        wanted = validate.learned_links(links)
        with self._door_lock:  # read, apply, write under one lock: no lost update
            fresh = [e for e in wanted if not self._edge_exists(e.id)]
            validate.edge_endpoints(fresh, [], self._existing_nodes)
            made = {e.id for e in fresh}
            for eid in ids:
                if eid not in made and not self._edge_exists(eid):
                    raise UnknownNodeError(f"unknown edge id {eid!r}")
            current = self.memory(ids)
            new = validate.memory_rows(fn(current), len(ids), self.dim or 0)
            rows = {
                e: (v if np.any(v) else None)
                for e, v, c in zip(ids, new, current)
                if np.any(v) or np.any(c)
            }
            self.apply(Change(edges=tuple(fresh), memory=rows))
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
        with self._door_lock:
            touched = self.export_memory()
            self.apply(Change(memory=dict.fromkeys(touched)))
            return len(touched)

    def decay_memory(self, factor: float) -> int:
        factor = arguments.fraction(factor, "the decay factor")
        with self._door_lock:
            touched = self.export_memory()
            scale = np.float32(factor)
            rows = {e: np.asarray(v, np.float32) * scale for e, v in touched.items()}
            self.apply(Change(memory=rows))
            return len(rows)

    def import_memory(self, vectors: dict[str, list[float]]) -> int:
        with self._door_lock:
            rows: dict[str, np.ndarray | None] = {}
            for eid, v in vectors.items():
                if not self._edge_exists(eid):
                    raise UnknownNodeError(f"unknown edge id {eid!r}")
                rows[eid] = validate.memory_vector(eid, v, self.dim)
            self.apply(Change(memory=rows))
            return len(rows)

    def flush(self) -> None:
        """Nothing to do for a store that writes through."""
        return None


def _doomed(
    docs: set[str], keep: set[str], nodes: Sequence[Node], edges: Sequence[Edge]
) -> tuple[set[str], set[str]]:
    """The nodes a deletion of ``docs`` removes (their chunks and anchors, entities left with
    no mention; none of ``keep``) and the edges that touched them."""
    doomed = {
        n.id
        for n in nodes
        if n.kind in ("chunk", "anchor") and n.doc_id in docs and n.id not in keep
    }
    kinds = {n.id: n.kind for n in nodes}
    mentions: dict[str, list[str]] = {}
    for e in edges:
        if e.kind == "mention":
            ent = e.u if kinds.get(e.u) == "entity" else e.v
            mentions.setdefault(ent, []).append(e.other(ent))
    for ent, anchors in mentions.items():
        if ent not in keep and any(a in doomed for a in anchors):
            if all(a in doomed for a in anchors):
                doomed.add(ent)
    return doomed, {e.id for e in edges if e.u in doomed or e.v in doomed}
