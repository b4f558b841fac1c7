"""The prior's PageRank, written once in core: the forward push (core/push.py) converges to
the whole graph's personalised PageRank, reads only where mass flows and stops at its caps;
the push and the power iteration (core/pagerank.py) give the same mass over the embedded
store's matrix as over the walk's reads of the same graph."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from remindrag_integrations.core.config import PriorConfig, RetrievalConfig
from remindrag_integrations.core.errors import StoreError
from remindrag_integrations.core.pagerank import Links, pagerank
from remindrag_integrations.core.prior import spread, spread_local
from remindrag_integrations.core.push import Local, push, top_anchors
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


def _graph(
    n_anchors: int = 60,
    n_entities: int = 20,
    hub_mentions: int = 0,
    seed: int = 0,
    kind: type[CountingReads] = CountingReads,
):
    """A random corpus-shaped graph: chunks with anchors in a chain, entities mentioned by
    anchors and related to each other; optionally one hub entity mentioned by many."""
    rng = np.random.default_rng(seed)
    store = kind()
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


def _local_push(walk: Walk, restart: dict[str, float] = RESTART) -> dict[str, float]:
    """Core's push over the walk's reads."""
    return push(Local(walk), restart, walk.cfg.prior)


def _matrix_push(matrix: Any, **prior: Any) -> dict[str, float]:
    """Core's push over a whole-graph matrix's rows."""
    cfg = PriorConfig(**prior)
    return push(Links.of_matrix(matrix, cfg.max_degree), RESTART, cfg)


@pytest.mark.parametrize("hub", [0, 30])
def test_the_push_converges_to_the_whole_graphs_pagerank(hub: int) -> None:
    store, nodes, edges = _graph(hub_mentions=hub)
    exact = GraphMatrix.build(nodes, edges)
    x = pagerank(Links.of_matrix(exact, 10), RESTART, 0.8, 200)
    got = _local_push(_walk(store, push_epsilon=1e-9, iterations=500, max_degree=10))
    want = {exact.ids[i]: float(v) for i, v in enumerate(x) if v > 0}
    assert set(got) <= set(want)
    for n, v in want.items():
        assert got.get(n, 0.0) == pytest.approx(v, abs=1e-6), n
    assert "e-ffff" not in got or hub  # a hub keeps what reaches it but spreads nothing


def test_a_coarser_push_reads_fewer_nodes_and_keeps_the_order_of_the_best() -> None:
    store, nodes, edges = _graph(n_anchors=400, n_entities=150)
    fine = _local_push(_walk(store, push_epsilon=1e-7, iterations=200, push_max_nodes=5000))
    fine_reads = len(set(store.read))
    store.read = []
    coarse = _local_push(_walk(store, push_epsilon=1e-3, push_max_nodes=5000))
    coarse_reads = len(set(store.read))
    assert coarse_reads < fine_reads / 2
    best = list(top_anchors(fine, 5))[:3]
    assert list(top_anchors(coarse, 5))[:3] == best


def test_the_push_never_reads_more_than_its_cap() -> None:
    store, _, _ = _graph(n_anchors=400, n_entities=150)
    got = _local_push(_walk(store, push_epsilon=1e-7, push_max_nodes=25))
    assert 0 < len(set(store.read)) <= 25
    assert got and sum(got.values()) <= 1.0


def test_top_anchors_keeps_the_best_anchors_and_every_entity() -> None:
    mass = {"a-01": 0.1, "a-02": 0.3, "a-03": 0.3, "e-01": 0.01, "e-02": 0.2}
    assert top_anchors(mass, 2) == {"a-02": 0.3, "a-03": 0.3, "e-01": 0.01, "e-02": 0.2}


def test_no_restart_mass_spreads_nothing() -> None:
    store, _, _ = _graph()
    assert _local_push(_walk(store), {"e-0001": 0.0}) == {}
    assert store.read == []


@pytest.mark.parametrize(("eps", "cap"), [(3e-4, 300), (1e-3, 20), (1e-6, 5000)])
def test_the_push_gives_the_same_mass_over_the_matrix_and_over_the_reads(
    eps: float, cap: int
) -> None:
    store, nodes, edges = _graph(n_anchors=300, n_entities=100, hub_mentions=40)
    walk = _walk(store, push_epsilon=eps, push_max_nodes=cap, max_degree=30)
    by_reads = _local_push(walk)
    by_rows = _matrix_push(
        store.graph_matrix(), push_epsilon=eps, push_max_nodes=cap, max_degree=30
    )
    assert set(by_rows) == set(by_reads)
    for n, v in by_reads.items():
        assert by_rows[n] == pytest.approx(v, rel=1e-9, abs=1e-12), n


@pytest.mark.parametrize("hub", [0, 30])
def test_the_power_iteration_gives_the_same_mass_over_the_matrix_and_over_the_reads(
    hub: int,
) -> None:
    store, nodes, edges = _graph(n_anchors=80, n_entities=30, hub_mentions=hub)
    # hops enough for the neighbourhood to hold the whole graph, every edge read
    walk = _walk(store, push_epsilon=0, hops=8, max_nodes=10_000, max_degree=25)
    by_reads = spread_local(walk, RESTART)
    matrix = store.graph_matrix()
    wide = dataclasses.replace(  # the store's matrix in float64, as the reads are
        matrix, adjacency=matrix.adjacency.astype(np.float64), degree=matrix.degree.astype(float)
    )
    for m, tol in ((wide, 1e-9), (matrix, 1e-6)):  # the store's own: float32
        x = pagerank(Links.of_matrix(m, 25), RESTART, 0.8, 20)
        by_rows = {m.ids[i]: float(v) for i, v in enumerate(x) if v > 0}
        assert set(by_rows) == set(by_reads)
        for n, v in by_reads.items():
            assert by_rows[n] == pytest.approx(v, rel=tol, abs=tol * 1e-3), n
    assert "e-ffff" not in by_reads or hub


def test_a_load_builds_what_the_first_query_needs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store, _, _ = _graph()
    store.save(tmp_path / "s")
    loaded = InMemoryGraphStore.load(tmp_path / "s")
    assert {"lexical", "matrix"} <= set(loaded._first_pass)  # the BM25 index, the matrix
    got = _matrix_push(loaded.graph_matrix(), max_degree=500)
    assert got == _matrix_push(store.graph_matrix(), max_degree=500)


class OldMatrix:
    """What a store written for the previous release gave: the PageRank as its own methods,
    without the matrix's data."""

    def __init__(self, ids: list[str], anchors: np.ndarray) -> None:
        self.ids, self.anchors = ids, anchors

    def pagerank(self, *args: Any) -> np.ndarray:
        raise AssertionError("core runs the PageRank")

    push = pagerank


class OldMatrixStore(CountingReads):
    def graph_matrix(self) -> Any:
        m = super().graph_matrix()
        return OldMatrix(m.ids, m.anchors)


def test_a_matrix_without_its_data_is_a_store_error_naming_what_to_give() -> None:
    store, _, _ = _graph(kind=OldMatrixStore)
    with pytest.raises(StoreError, match=r"OldMatrixStore\.graph_matrix\(\) gave a OldMatrix"):
        spread(_walk(store), RESTART)
