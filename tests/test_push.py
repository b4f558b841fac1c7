"""The prior's forward-push PageRank (core/push.py): it converges to the whole graph's
personalised PageRank, reads only where mass flows, and stops at its caps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from remindrag_integrations.core.config import PriorConfig, RetrievalConfig
from remindrag_integrations.core.push import push, top_anchors
from remindrag_integrations.core.types import Chunk, Edge, Node
from remindrag_integrations.core.walk import Walk
from remindrag_integrations.stores import InMemoryGraphStore
from remindrag_integrations.stores.graph_matrix import GraphMatrix

DIM = 8


class CountingReads(InMemoryGraphStore):
    """The embedded store, counting the nodes whose edges are read."""

    read: list[str]

    def neighbors(self, node_id: str) -> list[Edge]:
        self.read.append(node_id)
        return super().neighbors(node_id)


def _graph(n_anchors: int = 60, n_entities: int = 20, hub_mentions: int = 0, seed: int = 0):
    """A random corpus-shaped graph: chunks with anchors in a chain, entities mentioned by
    anchors and related to each other; optionally one hub entity mentioned by many."""
    rng = np.random.default_rng(seed)
    store = CountingReads()
    store.read = []
    chunks, nodes, edges = [], [], []
    for j in range(n_entities):
        nodes.append(Node(f"e-{j:04x}", "entity", f"entity {j}"))
    for i in range(n_anchors):
        c, a = f"c-{i:04x}", f"a-{i:04x}"
        chunks.append(Chunk(c, "doc", i, f"chunk {i}", 0, 5))
        nodes += [Node(c, "chunk", c, "doc", c), Node(a, "anchor", f"t {i}", "doc", c)]
        edges.append(Edge(f"k-{i:04x}", a, c, "contains", "t"))
        if i:
            edges.append(Edge(f"x-{i:04x}", f"a-{i - 1:04x}", a, "context", "next"))
        for t, j in enumerate(rng.choice(n_entities, 2, replace=False)):
            edges.append(Edge(f"m-{i:04x}{t}", f"e-{j:04x}", a, "mention", "m"))
        if i < hub_mentions:
            edges.append(Edge(f"m-{i:04x}h", "e-ffff", a, "mention", "m"))
    if hub_mentions:
        nodes.append(Node("e-ffff", "entity", "hub"))
    for t in range(n_entities):
        j1, j2 = rng.choice(n_entities, 2, replace=False)
        edges.append(Edge(f"r-{t:04x}", f"e-{j1:04x}", f"e-{j2:04x}", "relation", "r"))
    vecs = rng.normal(size=(len(nodes), DIM)).astype(np.float32)
    store.add_graph(
        documents=[("doc", "h", {})],
        chunks=chunks,
        nodes=nodes,
        embeddings=vecs,
        edges=edges,
        entity_aliases={},
    )
    return store, nodes, edges


def _walk(store: InMemoryGraphStore, **prior: Any) -> Walk:
    return Walk(
        store, np.ones(DIM, np.float32) / np.sqrt(DIM), RetrievalConfig(prior=PriorConfig(**prior))
    )


RESTART = {"e-0001": 0.7, "a-0005": 0.3}


@pytest.mark.parametrize("hub", [0, 30])
def test_the_push_converges_to_the_whole_graphs_pagerank(hub: int) -> None:
    store, nodes, edges = _graph(hub_mentions=hub)
    exact = GraphMatrix.build(nodes, edges)
    x = exact.pagerank(RESTART, 0.8, 200, max_degree=10)
    got = push(_walk(store, push_epsilon=1e-9, iterations=500, max_degree=10), RESTART)
    want = {exact.ids[i]: float(v) for i, v in enumerate(x) if v > 0}
    assert set(got) <= set(want)
    for n, v in want.items():
        assert got.get(n, 0.0) == pytest.approx(v, abs=1e-6), n
    assert "e-ffff" not in got or hub  # a hub keeps what reaches it but spreads nothing


def test_a_coarser_push_reads_fewer_nodes_and_keeps_the_order_of_the_best() -> None:
    store, nodes, edges = _graph(n_anchors=400, n_entities=150)
    fine = push(
        _walk(store, push_epsilon=1e-7, iterations=200, push_max_nodes=5000),
        RESTART,
    )
    fine_reads = len(set(store.read))
    store.read = []
    coarse = push(_walk(store, push_epsilon=1e-3, push_max_nodes=5000), RESTART)
    coarse_reads = len(set(store.read))
    assert coarse_reads < fine_reads / 2
    best = list(top_anchors(fine, 5))[:3]
    assert list(top_anchors(coarse, 5))[:3] == best


def test_the_push_never_reads_more_than_its_cap() -> None:
    store, _, _ = _graph(n_anchors=400, n_entities=150)
    got = push(_walk(store, push_epsilon=1e-7, push_max_nodes=25), RESTART)
    assert 0 < len(set(store.read)) <= 25
    assert got and sum(got.values()) <= 1.0


def test_top_anchors_keeps_the_best_anchors_and_every_entity() -> None:
    mass = {"a-01": 0.1, "a-02": 0.3, "a-03": 0.3, "e-01": 0.01, "e-02": 0.2}
    assert top_anchors(mass, 2) == {"a-02": 0.3, "a-03": 0.3, "e-01": 0.01, "e-02": 0.2}


def test_no_restart_mass_spreads_nothing() -> None:
    store, _, _ = _graph()
    assert push(_walk(store), {"e-0001": 0.0}) == {}
    assert store.read == []


@pytest.mark.parametrize(("eps", "cap"), [(3e-4, 300), (1e-3, 20), (1e-6, 5000)])
def test_the_matrix_push_computes_what_the_store_reads_push_does(eps: float, cap: int) -> None:
    store, nodes, edges = _graph(n_anchors=300, n_entities=100, hub_mentions=40)
    walk = _walk(store, push_epsilon=eps, push_max_nodes=cap, max_degree=30)
    by_reads = push(walk, RESTART)
    by_rows = GraphMatrix.build(nodes, edges).push(RESTART, 0.8, eps, 20, 30, cap)
    assert set(by_rows) == set(by_reads)
    for n, v in by_reads.items():
        assert by_rows[n] == pytest.approx(v, rel=1e-9, abs=1e-12), n


def test_a_load_builds_what_the_first_query_needs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store, _, _ = _graph()
    store.save(tmp_path / "s")
    loaded = InMemoryGraphStore.load(tmp_path / "s")
    assert {"lexical", "matrix"} <= set(loaded._first_pass)  # the BM25 index, the matrix
    got = loaded.graph_matrix().push(RESTART, 0.8, 3e-4, 20, 500, 300)
    assert got == store.graph_matrix().push(RESTART, 0.8, 3e-4, 20, 500, 300)
