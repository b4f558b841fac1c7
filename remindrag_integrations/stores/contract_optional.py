"""The store contract's cases of the optional capabilities (:data:`~..core.store.CAPABILITIES`):
each runs only on a store that has the capability, and checks it against what the plain
reads say."""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..core.config import PriorConfig
from ..core.errors import UnknownNodeError
from ..core.frontier import read_neighborhoods
from ..core.ids import is_anchor, is_chunk, is_entity, norm_name
from ..core.memory.write import update
from ..core.pagerank import Links, pagerank
from ..core.push import push
from ..core.store import Follow, GraphMatrixView
from .contract_case import StoreUnderTest, cases, raises, write
from .contract_graph import LINK, contract_graph


def lexical_search_ranks_words_filters_and_forgets(s: StoreUnderTest) -> None:
    store, _ = s.tagged()
    hits = store.lexical_search("d2 part", 10)
    assert [h for h, _ in hits[:2]] in (["c-2100", "c-2200"], ["c-2200", "c-2100"])
    assert len(hits) == 6 and all(x > 0 for _, x in hits)  # "part" matches every chunk
    assert hits[0][1] > hits[2][1]
    assert {h for h, _ in store.lexical_search("part", 10, {"dept": "x"})} == {
        "c-1100",
        "c-1200",
        "c-3100",
        "c-3200",
    }
    assert store.lexical_search("the of and", 10) == []  # stop words only
    assert store.lexical_search("zebra", 10) == []
    assert len(store.lexical_search("part", 1)) == 1
    store.delete_documents(["d2"])
    assert store.lexical_search("d2", 10) == []


def snapshot_sees_one_version_while_others_write(s: StoreUnderTest) -> None:
    store = s.filled()
    q = np.eye(s.dim, dtype=np.float32)[3]
    update(store, ["r-2000", "r-1000"], [], q)
    ids = ["c-1100", "a-1100", "e-1001", "e-2001"]
    before = (
        store.counts(),
        store.get_nodes(ids),
        store.node_embeddings(ids),
        store.memory(["r-1000", "r-2000"]),
        [e.id for e in store.neighbors("e-1002")],
        store.search(store.node_embeddings(["c-1100"])[0], 1, ("chunk",))[0][0],
    )
    with store.snapshot() as view:
        # others: delete d1, insert it again (same ids: new texts and vectors), and
        # write memory, all after the snapshot was taken
        store.delete_documents(["d1"])
        g = contract_graph(("d1",), dim=s.dim, salt="v2")
        store.add_graph(**{**g, "documents": [("d1", "hash-d1-v2", {})]})
        update(store, ["r-2000"], [], q)
        seen = (
            view.counts(),
            view.get_nodes(ids),
            view.node_embeddings(ids),
            view.memory(["r-1000", "r-2000"]),
            [e.id for e in view.neighbors("e-1002")],
            view.search(before[2][0], 1, ("chunk",))[0][0],
        )
        assert view.get_chunk("c-1100").text == "d1 part 1 "
        assert view.document_hash("d1") == "hash-d1"
        nodes, edges = view.whole_graph()
    assert seen[0] == before[0] and seen[1] == before[1]
    assert np.array_equal(seen[2], before[2]) and np.array_equal(seen[3], before[3])
    assert seen[4] == before[4] and seen[5] == before[5] == "c-1100"
    assert len(nodes) == sum(before[0][k] for k in ("chunks", "anchors", "entities"))
    assert len(edges) == before[0]["edges"]
    # the store itself has the writes
    assert store.get_chunk("c-1100").text.endswith("v2")
    assert store.document_hash("d1") == "hash-d1-v2"
    assert not np.any(store.memory(["r-1000"]))  # its edge was deleted with d1
    assert not np.array_equal(store.memory(["r-2000"]), before[3][1:])


def neighborhoods_match_the_plain_reads(s: StoreUnderTest) -> None:
    """neighborhoods() says what the plain reads say, and follows remembered edges"""
    store = s.filled()
    q = np.eye(s.dim, dtype=np.float32)[4]
    write(store, ["m-1100", "r-1000", "m-1200"], [], q)
    ids = ["e-1001", "a-1100", "c-2100", "e-1001"]
    for follow in (None, Follow(q, 0.5, max_nodes=10)):
        got, want = store.neighborhoods(ids, follow), read_neighborhoods(store, ids, follow)
        assert sorted(got) == sorted(want)
        for n, h in want.items():
            assert got[n].node == h.node and got[n].edges == h.edges
            assert np.allclose(got[n].memory, h.memory, atol=1e-6)
            assert np.allclose(got[n].embedding, h.embedding, atol=s.atol)
            assert set(h.remembered) <= set(got[n].remembered)
    reached = store.neighborhoods(["e-1001"], Follow(q, 0.5, max_nodes=10))
    assert {"e-1001", "a-1100", "e-1002", "a-1200"} <= set(reached)  # through memory only
    raises(UnknownNodeError, lambda: store.neighborhoods(["e-1001", "e-ffff"]))


def adjacency_matches_neighbors(s: StoreUnderTest) -> None:
    """adjacency() gives each distinct node's edges as neighbors() does"""
    store = s.filled()
    ids = ["e-1002", "a-1100", "c-2200", "e-1002"]
    got = store.adjacency(ids)
    assert list(got) == ["e-1002", "a-1100", "c-2200"]
    assert all(got[n] == store.neighbors(n) for n in got)
    assert store.adjacency([]) == {}
    raises(UnknownNodeError, lambda: store.adjacency(["e-1001", "e-ffff"]))


def spread_links_are_the_other_ends_of_corpus_edges(s: StoreUnderTest) -> None:
    """spread_links() gives each distinct node the other ends of its edges to entities and
    anchors (no chunk ends, no learned edges), in edge id order"""
    store = s.filled()
    got = store.spread_links(["e-1002", "a-1100", "e-1002"])
    assert sorted(got) == ["a-1100", "e-1002"]
    for n, ends in got.items():
        edges = sorted(store.neighbors(n), key=lambda e: e.id)
        want = [e.other(n) for e in edges if e.kind != "learned" and not is_chunk(e.other(n))]
        assert ends == want and ends, n
    assert store.spread_links([]) == {}


def get_chunks_match_get_chunk(s: StoreUnderTest) -> None:
    """get_chunks() gives the chunks in the order asked, repeats included, as get_chunk()"""
    store = s.filled()
    ids = ["c-2200", "c-1100", "c-2200", "c-1200"]
    assert store.get_chunks(ids) == [store.get_chunk(c) for c in ids]
    assert store.get_chunks([]) == []
    raises(UnknownNodeError, lambda: store.get_chunks(["c-1100", "c-ffff"]))


def find_entities_by_name_matches_one_lookup_per_name(s: StoreUnderTest) -> None:
    """find_entities_by_name() gives what find_entity_by_name() gives, names of no entity
    left out"""
    store = s.filled()
    names = ["person one", "nobody", "person one", ""]
    names += [norm_name(n.name) for n in store.whole_graph()[0] if n.kind == "entity"]
    want = {k: e for k in names if (e := store.find_entity_by_name(k))}
    assert want and store.find_entities_by_name(names) == want
    assert store.find_entities_by_name([]) == {}


def search_many_matches_one_search_per_row(s: StoreUnderTest) -> None:
    """search_many() gives, row by row, what search() gives"""
    store = s.filled()
    g = contract_graph(dim=s.dim)
    rows = g["embeddings"][[0, 3, 9]]
    for where in (None, {"source": "contract"}, {"source": "none"}):
        many = store.search_many(rows, 3, ("entity", "anchor"), where)
        assert len(many) == 3
        for hits, row in zip(many, rows):
            one = store.search(row, 3, ("entity", "anchor"), where)
            assert [h for h, _ in hits] == [h for h, _ in one]
            assert np.allclose([x for _, x in hits], [x for _, x in one], atol=1e-5)


def graph_matrix_holds_entities_anchors_and_their_edges(s: StoreUnderTest) -> None:
    """graph_matrix() gives the data of GraphMatrixView: the entities and anchors and the
    corpus's edges between them (no chunks, no learned edges); core's PageRank and push over
    it flow along the edges"""
    store = s.filled()
    update(
        store, [LINK.id], [], np.eye(s.dim, dtype=np.float32)[0], [LINK]
    )  # memory's, not the corpus's
    g = store.graph_matrix()
    assert isinstance(g, GraphMatrixView)
    graph = contract_graph(dim=s.dim)
    want = {n.id for n in graph["nodes"] if n.kind != "chunk"}
    assert set(g.ids) == want and len(g.ids) == len(want)
    assert all(g.pos[n] == i for i, n in enumerate(g.ids)) and len(g.pos) == len(want)
    assert sorted(g.ids[i] for i in g.anchors) == sorted(i for i in want if is_anchor(i))
    assert [bool(x) for x in g.entities] == [is_entity(n) for n in g.ids]
    pairs: Counter[tuple[str, str]] = Counter()
    for e in graph["edges"]:
        if e.u in want and e.v in want:
            pairs.update([(e.u, e.v), (e.v, e.u)])
    a = g.adjacency
    held: Counter[tuple[str, str]] = Counter()
    for i, u in enumerate(g.ids):
        for k in range(a.indptr[i], a.indptr[i + 1]):
            held[(u, g.ids[a.indices[k]])] += int(a.data[k])
    assert held == pairs
    assert np.array_equal(g.degree, [sum(pairs[(u, w)] for w in want) for u in g.ids])
    assert np.allclose(a @ np.ones(len(g.ids)), g.degree)
    x = pagerank(Links.of_matrix(g, 100), {"e-1001": 1.0}, 0.85, 20)
    assert x.shape == (len(g.ids),) and abs(float(x.sum()) - 1.0) < 1e-3
    mass = dict(zip(g.ids, x.tolist()))
    assert mass["a-1100"] > 0 and mass["e-1002"] > 0  # e-1001 mentions one, relates to the other
    assert not np.any(pagerank(Links.of_matrix(g, 100), {"e-ffff": 1.0}, 0.85, 20))  # unknown
    pushed = push(Links.of_matrix(g, 100), {"e-1001": 1.0}, PriorConfig(push_epsilon=1e-6))
    assert pushed["a-1100"] > 0 and pushed["e-1002"] > 0 and sum(pushed.values()) <= 1.0


def settings_round_trip(s: StoreUnderTest) -> None:
    """update_settings() overwrites the keys it names; settings() reads them back"""
    store = s.empty()
    before = store.settings()
    store.update_settings({"embeddings": "hash", "k": 3})
    store.update_settings({"k": 5})
    assert store.settings() == {**before, "embeddings": "hash", "k": 5}
    assert s.empty("contract-other").settings() == {}


def trace_claims_let_one_caller_win(s: StoreUnderTest) -> None:
    """claim_trace() wins once; a release lets the next claim win; memorized: none wins"""
    store = s.empty()
    assert not store.claim_trace("t-none")  # not saved: nothing to claim
    store.save_trace({"trace_id": "t-1", "query": "q"})
    assert store.claim_trace("t-1") and not store.claim_trace("t-1")
    store.release_trace("t-1")
    assert store.claim_trace("t-1")
    store.save_trace({"trace_id": "t-1", "query": "q", "memorized": True})
    store.release_trace("t-1")
    assert not store.claim_trace("t-1")


CASES = [
    *cases("lexical", lexical_search_ranks_words_filters_and_forgets),
    *cases("snapshot", snapshot_sees_one_version_while_others_write),
    *cases("frontier", neighborhoods_match_the_plain_reads),
    *cases("adjacency", adjacency_matches_neighbors),
    *cases("spread_links", spread_links_are_the_other_ends_of_corpus_edges),
    *cases("chunks", get_chunks_match_get_chunk),
    *cases("entity_names", find_entities_by_name_matches_one_lookup_per_name),
    *cases("batch_search", search_many_matches_one_search_per_row),
    *cases("graph_matrix", graph_matrix_holds_entities_anchors_and_their_edges),
    *cases("settings", settings_round_trip),
    *cases("trace_claims", trace_claims_let_one_caller_win),
]
