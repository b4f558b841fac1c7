"""The store contract's cases of the graph (required of every store): documents, nodes,
edges, search with filters, deletion and replacement (memory carried to successors),
namespaces. A row of :data:`CASES` per check."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from ..core.errors import EmbeddingError, UnknownNodeError
from ..core.memory.write import update
from ..core.types import Edge, Node
from .contract_case import StoreUnderTest, cases, raises, write
from .contract_graph import LINK, contract_graph


def _rename(graph: dict, names: dict[str, str]) -> dict:
    """``graph`` with node and edge ids renamed (an edited chunk gets new ids)."""

    def n(x: str) -> str:
        return names.get(x, x)

    out = dict(graph)
    out["chunks"] = [replace(c, id=n(c.id), text=c.text + " edited") for c in graph["chunks"]]
    out["nodes"] = [
        replace(x, id=n(x.id), chunk_id=x.chunk_id and n(x.chunk_id)) for x in graph["nodes"]
    ]
    out["edges"] = [replace(e, id=n(e.id), u=n(e.u), v=n(e.v)) for e in graph["edges"]]
    return out


def empty_store(s: StoreUnderTest) -> None:
    store = s.empty()
    assert store.counts() == {
        "documents": 0,
        "chunks": 0,
        "anchors": 0,
        "entities": 0,
        "edges": 0,
        "touched_edges": 0,
    }
    assert store.document_ids() == [] and store.document_hash("d1") is None
    assert store.search(np.ones(s.dim, dtype=np.float32), 3, ("entity",)) == []
    assert store.touched_edges() == 0 and store.top_memory(None, 5) == []
    assert store.load_trace("nope") is None


def add_graph_round_trip(s: StoreUnderTest) -> None:
    g = contract_graph(dim=s.dim)
    store = s.filled()
    assert store.dim == s.dim
    assert store.counts() == {
        "documents": 2,
        "chunks": 4,
        "anchors": 4,
        "entities": 4,
        "edges": len(g["edges"]),
        "touched_edges": 0,
    }
    assert sorted(store.document_ids()) == ["d1", "d2"]
    assert store.document_hash("d2") == "hash-d2"
    ids = [n.id for n in g["nodes"]]
    assert store.get_nodes(ids[::-1]) == g["nodes"][::-1]
    assert store.get_node(ids[0]) == g["nodes"][0]
    assert all(store.get_chunk(c.id) == c for c in g["chunks"])
    assert all(store.get_edge(e.id) == e for e in g["edges"])
    got = store.node_embeddings(ids)
    assert np.allclose(got, g["embeddings"], atol=s.atol)


def add_graph_is_idempotent_and_extends_aliases(s: StoreUnderTest) -> None:
    store = s.filled()
    before = store.counts()
    g = contract_graph(dim=s.dim)
    store.add_graph(**{**g, "entity_aliases": {"e-1001": ["Person One", "P1"]}})
    assert store.counts() == before
    assert store.get_node("e-1001").aliases == ("Person One", "P1")
    assert store.find_entity_by_name("person one") == "e-1001"
    assert store.find_entity_by_name(" ".join(g["nodes"][-4].name.lower().split())) == "e-1001"
    assert store.find_entity_by_name("nobody") is None


def unknown_ids_and_bad_input_raise(s: StoreUnderTest) -> None:
    store = s.filled()
    for call in (
        lambda: store.get_node("e-ffff"),
        lambda: store.get_chunk("c-ffff"),
        lambda: store.get_edge("r-ffff"),
        lambda: store.neighbors("e-ffff"),
        lambda: store.node_embeddings(["e-1001", "e-ffff"]),
        lambda: store.get_nodes(["e-1001", "e-ffff"]),
    ):
        raises(UnknownNodeError, call)
    bad_edge = Edge("r-ffff", "e-1001", "e-ffff", "relation", "x")
    raises(
        UnknownNodeError,
        lambda: store.add_graph(
            documents=[],
            chunks=[],
            nodes=[],
            embeddings=np.zeros((0, s.dim)),
            edges=[bad_edge],
            entity_aliases={},
        ),
    )
    raises(
        EmbeddingError,
        lambda: store.add_graph(
            documents=[],
            chunks=[],
            nodes=[Node("e-eeee", "entity", "X")],
            embeddings=np.ones((1, s.dim + 1)),
            edges=[],
            entity_aliases={},
        ),
    )
    assert store.counts()["edges"] == len(contract_graph(dim=s.dim)["edges"])


def neighbors_are_sorted_and_undirected(s: StoreUnderTest) -> None:
    store = s.filled()
    got = store.neighbors("e-1002")
    assert [e.id for e in got] == ["m-1200", "m-2300", "r-1000", "r-1900"]
    assert {e.other("e-1002") for e in got} == {"a-1200", "a-2100", "e-1001", "e-2001"}


def search_ranks_by_cosine_within_kinds(s: StoreUnderTest) -> None:
    g = contract_graph(dim=s.dim)
    store = s.filled()
    kinds = {n.id: n.kind for n in g["nodes"]}
    for i, n in enumerate(g["nodes"]):
        if n.kind == "chunk":
            continue  # a chunk shares its anchor's embedding
        hits = store.search(g["embeddings"][i], 3, ("entity", "anchor"))
        assert hits[0][0] == n.id
        assert abs(hits[0][1] - 1.0) < max(1e-4, s.atol)
        assert [x for _, x in hits] == sorted((x for _, x in hits), reverse=True)
        assert all(kinds[h] in ("entity", "anchor") for h, _ in hits)
    only = store.search(g["embeddings"][0], 10, ("entity",))
    assert len(only) == 4 and all(kinds[h] == "entity" for h, _ in only)


def search_where_keeps_passing_documents_and_every_entity(s: StoreUnderTest) -> None:
    store, g = s.tagged()
    q = np.ones(s.dim, dtype=np.float32)
    docs = {n.id: n.doc_id for n in g["nodes"]}

    def found(where: dict | None) -> tuple[set, int]:
        hits = [h for h, _ in store.search(q, 100, ("entity", "anchor", "chunk"), where)]
        return {docs[h] for h in hits if docs[h]}, sum(docs[h] is None for h in hits)

    assert found(None) == ({"d1", "d2", "d3"}, 6)
    assert found({"dept": "x"}) == ({"d1", "d3"}, 6)
    assert found({"year": {"$gte": 2021}})[0] == {"d2"}
    assert found({"year": {"$lt": 2021}})[0] == {"d1"}
    assert found({"tag": {"$in": ["b", "c"]}})[0] == {"d2"}
    assert found({"tag": {"$nin": ["a"]}})[0] == {"d2", "d3"}  # no key: $nin passes
    assert found({"tag": {"$ne": "a"}})[0] == {"d2", "d3"}
    either = {"$or": [{"dept": "y"}, {"year": "2024"}]}
    assert found(either)[0] == {"d2", "d3"}
    assert found({"dept": "x", "tag": "a"})[0] == {"d1"}
    assert found({"dept": "none"}) == (set(), 6)
    top = store.search(q, 2, ("anchor",), {"dept": "y"})
    assert len(top) == 2 and {docs[h] for h, _ in top} == {"d2"}  # k filled after filtering


def whole_graph_holds_every_node_and_edge(s: StoreUnderTest) -> None:
    store, g = s.tagged()
    nodes, edges = store.whole_graph()
    assert sorted(n.id for n in nodes) == sorted(n.id for n in g["nodes"])
    assert sorted(e.id for e in edges) == sorted(e.id for e in g["edges"])
    assert {e.id: e for e in edges}["r-1000"] == store.get_edge("r-1000")


def document_chunks_in_order(s: StoreUnderTest) -> None:
    store = s.filled()
    assert [c.id for c in store.document_chunks("d2")] == ["c-2100", "c-2200"]
    assert store.document_chunks("nope") == []


def delete_documents_leaves_no_orphans(s: StoreUnderTest) -> None:
    store = s.filled()
    q = np.eye(s.dim, dtype=np.float32)[3]
    write(store, ["r-1000", "r-1900", "r-2000", "m-2100"], [], q)
    kept = store.memory(["r-1900", "r-2000", "m-2100"])
    removed = store.delete_documents(["d1", "not-a-doc"])
    assert removed == {"documents": 1, "chunks": 2, "nodes": 5, "edges": 6}
    assert store.document_ids() == ["d2"]
    # e-1002 is still mentioned in d2: it stays, with its edges into d2 only
    assert [e.id for e in store.neighbors("e-1002")] == ["m-2300", "r-1900"]
    for gone in ("c-1100", "a-1200", "e-1001"):
        raises(UnknownNodeError, partial(store.get_node, gone))
    for gone in ("r-1000", "m-1200", "k-1100", "x-1000"):
        raises(UnknownNodeError, partial(store.get_edge, gone))
    raises(UnknownNodeError, lambda: store.get_chunk("c-1200"))
    assert store.find_entity_by_name("person1") is None
    assert np.array_equal(store.memory(["r-1900", "r-2000", "m-2100"]), kept)
    assert store.touched_edges() == 3
    assert store.counts() == {
        "documents": 1,
        "chunks": 2,
        "anchors": 2,
        "entities": 3,
        "edges": 8,
        "touched_edges": 3,
    }
    assert store.delete_documents(["d1"]) == {
        "documents": 0,
        "chunks": 0,
        "nodes": 0,
        "edges": 0,
    }


def update_is_delete_then_insert(s: StoreUnderTest) -> None:
    store = s.filled()
    write(store, ["r-2000"], [], np.ones(s.dim, dtype=np.float32))
    g = contract_graph(("d1",), dim=s.dim, salt="v2")
    store.delete_documents(["d1"])
    store.add_graph(**{**g, "documents": [("d1", "hash-d1-v2", {})]})
    assert store.document_hash("d1") == "hash-d1-v2"
    assert store.get_chunk("c-1100").text.endswith("v2")
    assert store.touched_edges() == 1 and np.any(store.memory(["r-2000"]))


def replacing_a_document_carries_memory(s: StoreUnderTest) -> None:
    """d1's second chunk is edited (new ids), its first is not: the first keeps its memory,
    the second's edges pass theirs to their successors, a learned edge is made anew."""

    store = s.filled()
    q = np.eye(s.dim, dtype=np.float32)[5]
    olds = ["k-1100", "k-1200", "m-1200", "x-1000", LINK.id]
    update(store, olds, [], q, [LINK])
    before = store.memory(olds)
    names = {"c-1200": "c-1201", "a-1200": "a-1201", "k-1200": "k-1201"}
    names |= {"x-1000": "x-1001", "m-1200": "m-1201"}
    v2 = _rename(contract_graph(("d1",), dim=s.dim), names)
    new_link = Edge("l-2001a1201", "e-2001", "a-1201", "learned", LINK.text)
    moves = {"k-1200": "k-1201", "m-1200": "m-1201", "x-1000": "x-1001", LINK.id: new_link.id}
    report = store.add_graph(
        **{**v2, "edges": [*v2["edges"], new_link], "documents": [("d1", "hash-v2", {})]},
        replace=["d1"],
        memory_moves=moves,
    )
    assert report == {"kept": 1, "moved": 4, "dropped": 0}
    after = store.memory(["k-1100", "k-1201", "m-1201", "x-1001", new_link.id])
    assert np.allclose(after, before, atol=1e-5)
    for gone in ("k-1200", "m-1200", "x-1000", LINK.id):
        try:
            store.get_edge(gone)
        except UnknownNodeError:
            continue
        raise AssertionError(f"{gone} should be gone")
    assert store.touched_edges() == 5
    # a replace with no moves drops what it removes, and says so
    v3 = _rename(contract_graph(("d1",), dim=s.dim), {"c-1201": "c-1202"})
    report = store.add_graph(**{**v3, "documents": [("d1", "hash-v3", {})]}, replace=["d1"])
    assert report["kept"] + report["dropped"] == 5 and report["moved"] == 0


def namespaces_are_isolated(s: StoreUnderTest) -> None:
    a = s.filled("tenant-a")
    b = s.empty("tenant-b")
    gb = contract_graph(("d1", "d2", "d3"), dim=s.dim, salt="b")
    b.add_graph(**gb)
    q = np.ones(s.dim, dtype=np.float32)
    write(b, ["r-3000"], [], q)
    snap = (b.counts(), b.export_memory(), sorted(b.document_ids()))
    write(a, ["r-1000", "r-2000"], ["m-1100"], q)
    a.decay_memory(0.5)
    a.delete_documents(["d1"])
    a.reset_memory()
    a.save_trace({"trace_id": "t-a"})
    assert (b.counts(), b.export_memory(), sorted(b.document_ids())) == snap
    assert b.load_trace("t-a") is None and a.load_trace("t-a") == {"trace_id": "t-a"}
    # a's searches only ever see a's nodes, even with b's embeddings as the query
    a_ids = {n.id for n in contract_graph(dim=s.dim)["nodes"]}
    for row in gb["embeddings"]:
        assert {h for h, _ in a.search(row, 5, ("entity", "anchor"))} <= a_ids
    raises(KeyError, lambda: a.get_node("e-3001"))
    assert "e-3001" in {n.id for n in b.get_nodes(["e-3001"])}


CASES = cases(
    "graph",
    empty_store,
    add_graph_round_trip,
    add_graph_is_idempotent_and_extends_aliases,
    unknown_ids_and_bad_input_raise,
    neighbors_are_sorted_and_undirected,
    search_ranks_by_cosine_within_kinds,
    search_where_keeps_passing_documents_and_every_entity,
    whole_graph_holds_every_node_and_edge,
    document_chunks_in_order,
    delete_documents_leaves_no_orphans,
    update_is_delete_then_insert,
    replacing_a_document_carries_memory,
    namespaces_are_isolated,
)
