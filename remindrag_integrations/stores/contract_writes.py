"""The store contract's proof that a store's writes mean what every store's mean: one
sequence of writes (inserts with aliases, memory writes with a learned link, a document
replaced with its memory carried, deletes) run on the store under test and on
:class:`ReferenceStore`, a store of dicts built only on :class:`~.base.BaseGraphStore`'s
essentials (the derived path of :mod:`.writes` every third-party store gets). The two must
answer each write alike and end up holding the same graph, chunks, vectors and memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import UnknownNodeError
from ..core.memory.write import update
from ..core.types import Chunk, Edge, Node
from .base import BaseGraphStore
from .contract_case import StoreUnderTest, cases
from .contract_graph import LINK, contract_graph
from .contract_store import _rename
from .writes import Change


def _get(table: dict, key: str) -> Any:
    if key not in table:
        raise UnknownNodeError(f"unknown id {key!r}")
    return table[key]


class ReferenceStore(BaseGraphStore):
    """Every table a dict, nothing but the essentials: every write decided and checked by
    the derived path (:mod:`.writes`), stored by :meth:`apply`."""

    def __init__(self, namespace: str = "default") -> None:
        super().__init__(namespace)
        self.docs: dict[str, tuple[str, dict]] = {}
        self.chunks: dict[str, Chunk] = {}
        self.nodes: dict[str, Node] = {}
        self.vectors: dict[str, np.ndarray] = {}
        self.edges: dict[str, Edge] = {}
        self.rows: dict[str, np.ndarray] = {}
        self.traces: dict[str, dict] = {}

    def documents(self) -> dict[str, tuple[str, dict]]:
        return dict(self.docs)

    def get_node(self, node_id: str) -> Node:
        return _get(self.nodes, node_id)  # type: ignore[no-any-return]

    def get_chunk(self, chunk_id: str) -> Chunk:
        return _get(self.chunks, chunk_id)  # type: ignore[no-any-return]

    def get_edge(self, edge_id: str) -> Edge:
        return _get(self.edges, edge_id)  # type: ignore[no-any-return]

    def node_embeddings(self, node_ids: Sequence[str]) -> np.ndarray:
        rows = [_get(self.vectors, n) for n in node_ids]
        return np.stack(rows) if rows else np.zeros((0, self.dim or 0), np.float32)

    def neighbors(self, node_id: str) -> list[Edge]:
        self.get_node(node_id)
        return sorted((e for e in self.edges.values() if node_id in (e.u, e.v)), key=lambda e: e.id)

    def whole_graph(self) -> tuple[list[Node], list[Edge]]:
        return list(self.nodes.values()), list(self.edges.values())

    def memory(self, edge_ids: Sequence[str]) -> np.ndarray:
        dim = self.dim or 0
        out = np.zeros((len(edge_ids), dim), np.float32)
        for i, e in enumerate(edge_ids):
            if e in self.rows:
                out[i] = self.rows[e]
        return out

    def apply(self, change: Change) -> None:
        for d in change.drop_documents:
            del self.docs[d]
        self.chunks = {
            k: c
            for k, c in self.chunks.items()
            if c.doc_id not in change.drop_documents and k not in change.drop_nodes
        }
        for n in change.drop_nodes:
            self.nodes.pop(n)
            self.vectors.pop(n, None)
        for e in change.drop_edges:
            del self.edges[e]
            self.rows.pop(e, None)
        self.docs.update((d, (h, dict(m))) for d, h, m in change.documents)
        self.chunks.update((c.id, c) for c in change.chunks)
        self.nodes.update((n.id, n) for n in change.nodes)
        self.vectors.update((k, np.asarray(v, np.float32)) for k, v in change.vectors.items())
        self.edges.update((e.id, e) for e in change.edges)
        for e, row in change.memory.items():
            if row is None:
                self.rows.pop(e, None)
            else:
                self.rows[e] = np.asarray(row, np.float32)

    def save_trace(self, trace: dict) -> None:
        self.traces[trace["trace_id"]] = trace

    def load_trace(self, trace_id: str) -> dict | None:
        return self.traces.get(trace_id)

    def recent_traces(self, limit: int) -> list[dict]:
        return list(reversed(self.traces.values()))[: max(limit, 0)]


def _writes(store: Any, dim: int) -> list[Any]:
    """The sequence of writes; what each returned."""
    out: list[Any] = []
    g = contract_graph(("d1", "d2", "d3"), dim=dim)
    out.append(store.add_graph(**g))
    q = np.eye(dim, dtype=np.float32)[3] + np.eye(dim, dtype=np.float32)[7]
    edges = ["r-1000", "k-1200", "x-1000", "m-1200", LINK.id]
    out.append(update(store, edges, ["m-2300", "r-2900"], q, [LINK]).tolist())
    out.append(store.add_graph(**g))  # the same batch again: nothing new
    aliases = {"e-1001": ["P. One", "Person1 "], "e-2002": ["Town Two"]}
    empty = np.zeros((0, dim), np.float32)
    no_rows: dict[str, Any] = {"documents": [], "chunks": [], "nodes": [], "edges": []}
    out.append(store.add_graph(**no_rows, embeddings=empty, entity_aliases=aliases))
    names = {"c-1200": "c-1201", "a-1200": "a-1201", "k-1200": "k-1201"}
    names |= {"x-1000": "x-1001", "m-1200": "m-1201"}
    v2 = _rename(contract_graph(("d1",), dim=dim, salt="v2"), names)
    link = Edge("l-2001a1201", "e-2001", "a-1201", "learned", LINK.text)
    moves = {"k-1200": "k-1201", "m-1200": "m-1201", "x-1000": "x-1001", LINK.id: link.id}
    out.append(
        store.add_graph(
            **{
                **v2,
                "edges": [*v2["edges"], link],
                "documents": [("d1", "hash-v2", {"v": 2})],
                "entity_aliases": {"e-1002": ["Capital One"]},
            },
            replace=["d1"],
            memory_moves=moves,
        )
    )
    out.append(update(store, ["r-1000", "k-1201"], ["m-3100"], -q).tolist())
    out.append(store.delete_documents(["d2", "nope"]))
    out.append(store.delete_documents(["nope"]))
    return out


def _state(store: Any) -> dict[str, Any]:
    nodes, edges = store.whole_graph()
    ids = sorted(n.id for n in nodes)
    chunks = [n.id for n in nodes if n.kind == "chunk"]
    return {
        "documents": store.documents(),
        "nodes": sorted((n.to_dict() for n in nodes), key=lambda n: n["id"]),
        "edges": sorted(edges, key=lambda e: e.id),
        "chunks": sorted((store.get_chunk(c) for c in chunks), key=lambda c: c.id),
        "vectors": (ids, store.node_embeddings(ids)),
        "memory": store.export_memory(),
        "counts": store.counts(),
        "names": {k: store.find_entity_by_name(k) for k in ("p. one", "town two", "person1")},
    }


def writes_match_the_reference_store(s: StoreUnderTest) -> None:
    """the same writes leave the same store as the derived path (one write semantics)"""
    store, ref = s.empty(), ReferenceStore("contract")
    got, want = _writes(store, s.dim), _writes(ref, s.dim)
    for i, (a, b) in enumerate(zip(got, want)):
        if isinstance(a, list):
            assert np.allclose(a, b, atol=1e-5), f"write {i} returned other memory rows"
        else:
            assert a == b, f"write {i} returned {a}, the reference {b}"
    mine, theirs = _state(store), _state(ref)
    for key in ("documents", "nodes", "edges", "chunks", "counts", "names"):
        assert mine[key] == theirs[key], f"{key} differ: {mine[key]} != {theirs[key]}"
    assert mine["vectors"][0] == theirs["vectors"][0]
    assert np.allclose(mine["vectors"][1], theirs["vectors"][1], atol=s.atol)
    assert sorted(mine["memory"]) == sorted(theirs["memory"]), "other edges hold memory"
    for e, row in theirs["memory"].items():
        assert np.allclose(mine["memory"][e], row, atol=1e-5), f"the memory of {e} differs"


CASES = cases("graph", writes_match_the_reference_store)
