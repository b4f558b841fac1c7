"""The write semantics of every store, written once: what an ``add_graph`` puts, replaces and
carries, what a ``delete_documents`` removes, what an ``update_memory`` writes.

Each write is decided here from a few batch reads (:class:`WriteReads`) and comes out as one
:class:`Change` plus the call's report; the store then applies the change (its *storage*
step: dicts for the embedded store, bulk SQL for PostgreSQL, ``apply`` for a store built on
:class:`~.base.BaseGraphStore`). Every shipped store and every third-party store runs these
same functions: a rule changed here changes for all of them, and the store contract
(``tests/test_store_contract.py``) checks that they leave identical stores.

The reads run inside the writer's lock or transaction, so a check and the write it allows
are one step. Every check runs before the change is made: a bad call raises a typed error and
nothing is written.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..core.errors import UnknownNodeError
from ..core.memory import math as mem
from ..core.store import MemoryFn
from ..core.types import Chunk, Edge, Node
from . import validate


@dataclass(frozen=True)
class Change:
    """One atomic write: first the removals, then what is put (an id that exists is
    overwritten). A store applies all of it or nothing."""

    drop_documents: frozenset[str] = frozenset()  # with their chunk records
    drop_nodes: frozenset[str] = frozenset()  # with their chunk records and vectors
    drop_edges: frozenset[str] = frozenset()  # with their memory
    documents: tuple[tuple[str, str, dict], ...] = ()  # (id, content hash, metadata)
    chunks: tuple[Chunk, ...] = ()
    nodes: tuple[Node, ...] = ()  # new nodes, or a new record of one (its aliases grew)
    vectors: Mapping[str, np.ndarray] = field(default_factory=dict)  # node id -> embedding
    edges: tuple[Edge, ...] = ()
    memory: Mapping[str, np.ndarray | None] = field(default_factory=dict)  # None: forget
    # replaced edge -> the edge that took its place (a racing memory write lands there; a
    # store with ``edge_successors`` keeps them, others may ignore them)
    successors: Mapping[str, str] = field(default_factory=dict)
    # (alias, entity id): names to look the entity up by, where no entity has them yet (a
    # store with a name index keeps them; one that scans nodes may ignore them)
    names: tuple[tuple[str, str], ...] = ()

    @property
    def graph(self) -> bool:
        """Whether the change touches the graph (not only memory and learned links)."""
        return bool(
            self.drop_documents
            or self.drop_nodes
            or self.drop_edges
            or self.documents
            or self.chunks
            or self.nodes
            or any(e.kind != "learned" for e in self.edges)
        )


class WriteReads(Protocol):
    """What the write decisions read, each a batch (one statement on PostgreSQL)."""

    @property
    def dim(self) -> int | None: ...

    def held_documents(self, doc_ids: Collection[str]) -> set[str]:
        """The ids among ``doc_ids`` of documents the store holds."""
        ...

    def held_nodes(self, node_ids: Collection[str]) -> set[str]: ...

    def held_edges(self, edge_ids: Collection[str]) -> set[str]: ...

    def document_nodes(self, doc_ids: Collection[str]) -> list[Node]:
        """The chunk and anchor nodes of the documents."""
        ...

    def edges_at(self, node_ids: Collection[str]) -> dict[str, list[Edge]]:
        """Each node's edges (every kind); a node the store lacks maps to []."""
        ...

    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]: ...

    def held_memory(self, edge_ids: Collection[str]) -> dict[str, np.ndarray]:
        """The memory rows the store holds among ``edge_ids`` (a store that shares them
        between writers locks them until its write ends)."""
        ...

    def successors(self, edge_ids: list[str]) -> dict[str, str]:
        """The replaced edges among ``edge_ids``, each with its successor (one step)."""
        ...


def doomed(
    reads: WriteReads, docs: Collection[str], keep: Collection[str]
) -> tuple[list[Node], set[str], set[str]]:
    """What removing ``docs`` removes: their chunk and anchor nodes, the entities left with
    no mention; none of ``keep``; and every edge that touched a removed node. Returns the
    documents' chunk and anchor nodes (kept ones too), the removed nodes and edges."""
    at_docs = reads.document_nodes(docs)
    gone = {n.id for n in at_docs if n.id not in keep}
    adj = reads.edges_at(gone)
    mentioned = {e.other(a) for a in gone for e in adj.get(a, ()) if e.kind == "mention"}
    mentioned -= gone
    mentioned.difference_update(keep)
    if mentioned:  # a mention joins an anchor and an entity
        more = reads.edges_at(mentioned)
        for ent in sorted(mentioned):
            ends = [e.other(ent) for e in more.get(ent, ()) if e.kind == "mention"]
            if all(x in gone for x in ends):
                gone.add(ent)
                adj[ent] = more.get(ent, [])
    edges = {e.id for n in gone for e in adj.get(n, ())}
    return at_docs, gone, edges


def add_graph(
    reads: WriteReads,
    *,
    documents: Sequence[tuple[str, str, dict]],
    chunks: Sequence[Chunk],
    nodes: Sequence[Node],
    embeddings: np.ndarray,
    edges: Sequence[Edge],
    entity_aliases: Mapping[str, Sequence[str]],
    replace: Sequence[str] = (),
    memory_moves: Mapping[str, str] | None = None,
) -> tuple[Change, dict[str, int]]:
    """The change of :meth:`~..core.store.GraphStore.add_graph` and its report ``{"kept",
    "moved", "dropped"}`` (see there): nodes and edges whose id exists are kept (aliases
    extend an entity instead); the replaced documents go as :func:`delete_documents` takes
    them, except the nodes the batch's edges and aliases use; each removed edge named in
    ``memory_moves`` passes its memory to its successor (added to what the successor
    holds) and is recorded as replaced by it."""
    emb = validate.graph_embeddings(nodes, embeddings, reads.dim)
    batch = {n.id: i for i, n in enumerate(nodes)}
    validate.edge_endpoints(edges, nodes, lambda ids: reads.held_nodes(ids))
    held_nodes = reads.held_nodes(set(batch) | set(entity_aliases))
    for node_id in entity_aliases:
        if node_id not in batch and node_id not in held_nodes:
            raise UnknownNodeError(f"unknown entity {node_id}")
    moves = dict(memory_moves or {})
    docs = reads.held_documents(set(replace))
    gone_nodes: set[str] = set()
    gone_edges: set[str] = set()
    at_docs: list[Node] = []
    if docs:  # the old versions go, but not the nodes the new batch links to
        keep = {x for e in edges for x in (e.u, e.v)} | set(entity_aliases)
        at_docs, gone_nodes, gone_edges = doomed(reads, docs, keep)
    near = sorted({e.id for es in reads.edges_at([n.id for n in at_docs]).values() for e in es})
    held_edges = reads.held_edges({e.id for e in edges} | set(moves.values()))
    new_edges: dict[str, Edge] = {}
    for e in edges:  # the first of an id wins
        if e.id not in new_edges and (e.id in gone_edges or e.id not in held_edges):
            new_edges[e.id] = e
    rows = reads.held_memory({*near, *moves, *moves.values()})
    near = [e for e in near if e in rows]  # the edges with memory at the replaced documents
    have = held_nodes - gone_nodes
    put = {n.id: n for n in nodes if n.id not in have}
    vectors = {i: emb[batch[i]] for i in put}
    olds = [i for i in entity_aliases if i not in put]
    records = dict(put)
    records.update((n.id, n) for n in reads.get_nodes(olds))
    names: list[tuple[str, str]] = []
    for node_id, aliases in entity_aliases.items():
        node = records[node_id]
        new = tuple(a for a in dict.fromkeys(aliases) if a not in node.aliases and a != node.name)
        if new:
            put[node_id] = records[node_id] = Node(
                **{**node.to_dict(), "aliases": node.aliases + new}
            )
        names.extend((a, node_id) for a in aliases)
    # removed edges (not made again) with a successor that is there after the write
    after = lambda x: x in new_edges or (x in held_edges and x not in gone_edges)  # noqa: E731
    passed = [(o, n) for o, n in moves.items() if o in gone_edges and o not in new_edges]
    passed = [(o, n) for o, n in passed if after(n)]
    memory: dict[str, np.ndarray | None] = {}
    moved = 0
    for old, succ in passed:
        if old in rows:
            base = memory.get(succ)
            if base is None and succ not in gone_edges:
                base = rows.get(succ)
            memory[succ] = mem.merge(base, rows[old])
            moved += 1
    kept = sum(1 for e in near if e not in gone_edges or e in memory)
    change = Change(
        drop_documents=frozenset(docs),
        drop_nodes=frozenset(gone_nodes),
        drop_edges=frozenset(gone_edges),
        documents=tuple((d, h, dict(m)) for d, h, m in documents),
        chunks=tuple(chunks),
        nodes=tuple(put.values()),
        vectors=vectors,
        edges=tuple(new_edges.values()),
        memory=memory,
        successors=dict(passed),
        names=tuple(names),
    )
    return change, {"kept": kept, "moved": moved, "dropped": len(near) - kept - moved}


def delete_documents(reads: WriteReads, doc_ids: Iterable[str]) -> tuple[Change, dict[str, int]]:
    """The change of :meth:`~..core.store.GraphStore.delete_documents` and its counts: the
    documents, their chunks and anchors, the entities left with no mention, and every edge
    (with its memory) that touched a removed node."""
    docs = reads.held_documents(set(doc_ids))
    if not docs:
        return Change(), {"documents": 0, "chunks": 0, "nodes": 0, "edges": 0}
    at_docs, gone_nodes, gone_edges = doomed(reads, docs, ())
    change = Change(frozenset(docs), frozenset(gone_nodes), frozenset(gone_edges))
    return change, {
        "documents": len(docs),
        "chunks": sum(1 for n in at_docs if n.kind == "chunk"),
        "nodes": len(gone_nodes),
        "edges": len(gone_edges),
    }


def update_memory(
    reads: WriteReads, edge_ids: Sequence[str], fn: MemoryFn, links: Sequence[Edge] = ()
) -> tuple[Change, np.ndarray, list[str], MemoryFn]:
    """The change of :meth:`~..core.store.GraphStore.update_memory`, its new rows, and the
    edge ids and function it wrote (an edge a document update replaced is written at its
    successor): the ``learned`` links not there yet are added; each edge gets ``fn`` of its
    current row; a row of zeros is kept where the edge had a row (it was touched)."""
    ids = validate.memory_ids(edge_ids)
    wanted = validate.learned_links(links)
    ids, fn = validate.redirected(ids, reads.successors, fn)
    there = reads.held_edges({*ids, *(e.id for e in wanted)})
    fresh: dict[str, Edge] = {}
    for e in wanted:
        if e.id not in there and e.id not in fresh:
            fresh[e.id] = e
    validate.edge_endpoints(list(fresh.values()), [], lambda ns: reads.held_nodes(ns))
    for eid in ids:
        if eid not in there and eid not in fresh:
            raise UnknownNodeError(f"unknown edge id {eid!r}")
    dim = reads.dim or 0
    rows = reads.held_memory(ids)
    current = np.zeros((len(ids), dim), dtype=np.float32)
    for i, eid in enumerate(ids):
        if eid in rows:
            current[i] = rows[eid]
    new = validate.memory_rows(fn(current), len(ids), dim)
    touched = np.any(new, axis=1).tolist()  # one pass over the rows
    memory: dict[str, np.ndarray | None] = {
        e: v for e, v, t in zip(ids, new, touched) if t or e in rows
    }
    return Change(edges=tuple(fresh.values()), memory=memory), new, ids, fn
