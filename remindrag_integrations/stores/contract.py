"""The store contract: the behaviour every :class:`~..core.protocols.GraphStore` must show
(the embedded store and PostgreSQL both pass it). Subclass :class:`StoreContract` in a pytest
module, or call :func:`store_contract`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.protocols import GraphStore
from .contract_graph import contract_graph
from .contract_learn import LearnContract
from .contract_snapshot import SnapshotContract
from .contract_views import ViewsContract

__all__ = ["StoreContract", "contract_graph", "store_contract"]


def _write(store: GraphStore, enhance: list[str], penalise: list[str], q: np.ndarray) -> None:
    from ..core.memory.write import update

    update(store, enhance, penalise, q)


def _raises(
    exc: type[BaseException] | tuple[type[BaseException], ...], fn: Callable[[], object]
) -> None:
    try:
        fn()
    except exc:
        return
    raise AssertionError(f"expected {exc}")


class StoreContract(LearnContract, ViewsContract, SnapshotContract):
    """The behaviour every :class:`~.protocols.GraphStore` must show.

    Subclass it in a pytest module and provide a ``make_store`` fixture: a callable
    ``make_store(namespace="contract")`` that returns an EMPTY store for that namespace::

        class TestMyStore(StoreContract):
            @pytest.fixture
            def make_store(self):
                return lambda namespace="contract": MyStore(namespace=namespace)

    Or run every check without pytest: ``store_contract(make_store)``.
    """

    dim = 32
    # how far a stored vector may come back from what was inserted (a store keeping float16
    # vectors sets about 1e-3)
    embedding_atol = 1e-6

    def test_empty_store(self, make_store: Callable[..., GraphStore]) -> None:
        store = make_store("contract")
        assert store.counts() == {
            "documents": 0,
            "chunks": 0,
            "anchors": 0,
            "entities": 0,
            "edges": 0,
            "touched_edges": 0,
        }
        assert store.document_ids() == [] and store.document_hash("d1") is None
        assert store.search(np.ones(self.dim, dtype=np.float32), 3, ("entity",)) == []
        assert store.touched_edges() == 0 and store.top_memory(None, 5) == []
        assert store.load_trace("nope") is None

    def test_add_graph_round_trip(self, make_store: Callable[..., GraphStore]) -> None:
        g = contract_graph(dim=self.dim)
        store = self._filled(make_store)
        assert store.dim == self.dim
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
        assert np.allclose(got, g["embeddings"], atol=self.embedding_atol)

    def test_add_graph_is_idempotent_and_extends_aliases(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        store = self._filled(make_store)
        before = store.counts()
        g = contract_graph(dim=self.dim)
        store.add_graph(**{**g, "entity_aliases": {"e-1001": ["Person One", "P1"]}})
        assert store.counts() == before
        assert store.get_node("e-1001").aliases == ("Person One", "P1")
        assert store.find_entity_by_name("person one") == "e-1001"
        assert store.find_entity_by_name(" ".join(g["nodes"][-4].name.lower().split())) == "e-1001"
        assert store.find_entity_by_name("nobody") is None

    def test_unknown_ids_and_bad_input_raise(self, make_store: Callable[..., GraphStore]) -> None:
        from ..core.errors import EmbeddingError, UnknownNodeError
        from ..core.types import Edge, Node

        store = self._filled(make_store)
        for call in (
            lambda: store.get_node("e-ffff"),
            lambda: store.get_chunk("c-ffff"),
            lambda: store.get_edge("r-ffff"),
            lambda: store.neighbors("e-ffff"),
            lambda: store.node_embeddings(["e-1001", "e-ffff"]),
            lambda: store.get_nodes(["e-1001", "e-ffff"]),
        ):
            _raises(UnknownNodeError, call)
        bad_edge = Edge("r-ffff", "e-1001", "e-ffff", "relation", "x")
        _raises(
            UnknownNodeError,
            lambda: store.add_graph(
                documents=[],
                chunks=[],
                nodes=[],
                embeddings=np.zeros((0, self.dim)),
                edges=[bad_edge],
                entity_aliases={},
            ),
        )
        _raises(
            EmbeddingError,
            lambda: store.add_graph(
                documents=[],
                chunks=[],
                nodes=[Node("e-eeee", "entity", "X")],
                embeddings=np.ones((1, self.dim + 1)),
                edges=[],
                entity_aliases={},
            ),
        )
        assert store.counts()["edges"] == len(contract_graph(dim=self.dim)["edges"])

    def test_neighbors_are_sorted_and_undirected(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        store = self._filled(make_store)
        got = store.neighbors("e-1002")
        assert [e.id for e in got] == ["m-1200", "m-2300", "r-1000", "r-1900"]
        assert {e.other("e-1002") for e in got} == {"a-1200", "a-2100", "e-1001", "e-2001"}

    def test_search_ranks_by_cosine_within_kinds(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        g = contract_graph(dim=self.dim)
        store = self._filled(make_store)
        kinds = {n.id: n.kind for n in g["nodes"]}
        for i, n in enumerate(g["nodes"]):
            if n.kind == "chunk":
                continue  # a chunk shares its anchor's embedding
            hits = store.search(g["embeddings"][i], 3, ("entity", "anchor"))
            assert hits[0][0] == n.id
            assert abs(hits[0][1] - 1.0) < max(1e-4, self.embedding_atol)
            assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
            assert all(kinds[h] in ("entity", "anchor") for h, _ in hits)
        only = store.search(g["embeddings"][0], 10, ("entity",))
        assert len(only) == 4 and all(kinds[h] == "entity" for h, _ in only)

    def test_memory_follows_the_spec_math(self, make_store: Callable[..., GraphStore]) -> None:
        from ..core.memory import math as mem

        store = self._filled(make_store)
        rng = np.random.default_rng(7)
        expected: dict[str, np.ndarray] = {}
        plan = [
            (["r-1000", "m-1100"], ["k-1100"]),
            (["r-1000"], ["m-1100", "x-1000"]),
            (["x-1000"], ["r-1000"]),
            ([], ["r-1000", "m-2100"]),
        ]
        for enhance, penalise in plan:
            q = rng.normal(size=self.dim).astype(np.float32)
            fn = mem.memory_update(enhance, penalise, q)
            assert (fn.enhanced, fn.penalised) == (len(enhance), len(penalise))
            new = store.update_memory(fn.edge_ids, fn)
            assert new.shape == (len(fn.edge_ids), self.dim)
            expected.update(mem.apply_updates(expected, enhance, penalise, mem.unit(q), self.dim))
        ids = sorted(expected) + ["r-2000"]
        want = np.stack([expected.get(e, np.zeros(self.dim, np.float32)) for e in ids])
        assert np.allclose(store.memory(ids), want, atol=1e-5)
        assert store.touched_edges() == sum(1 for v in expected.values() if np.any(v))
        assert np.all(np.linalg.norm(store.memory(ids), axis=1) <= 1.0 + 1e-5)

    def test_memory_write_with_unknown_edge_changes_nothing(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        from ..core.errors import UnknownNodeError

        store = self._filled(make_store)
        q = np.ones(self.dim, dtype=np.float32)
        _raises(UnknownNodeError, lambda: _write(store, ["r-1000", "r-ffff"], [], q))
        assert store.touched_edges() == 0 and not np.any(store.memory(["r-1000"]))

    def test_update_memory_applies_a_function_or_nothing(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        from functools import partial

        from ..core.errors import EmbeddingError

        store = self._filled(make_store)
        ids = ["x-1000", "r-1000"]  # any order: rows follow ``edge_ids``
        step = np.eye(self.dim, dtype=np.float32)[:2] * 0.25
        assert np.array_equal(store.update_memory(ids, lambda cur: cur + step), step)
        assert np.array_equal(store.update_memory(ids, lambda cur: cur * 2), step * 2)
        assert np.array_equal(store.memory(ids), step * 2)

        # a function that fails, or returns the wrong shape or NaN, writes nothing
        def fails(cur: np.ndarray) -> np.ndarray:
            raise ZeroDivisionError

        bad_fns: list[Callable[[np.ndarray], np.ndarray]] = [
            lambda cur: cur[:1],
            lambda cur: cur * np.nan,
            fails,
        ]
        for bad in bad_fns:
            _raises((EmbeddingError, ZeroDivisionError), partial(store.update_memory, ids, bad))
        _raises(ValueError, lambda: store.update_memory(["r-1000", "r-1000"], lambda c: c))
        assert np.array_equal(store.memory(ids), step * 2)
        # an edge left at zero stays untouched (memory is sparse)
        store.update_memory(["r-2000"], lambda cur: cur)
        assert store.touched_edges() == 2

    def test_concurrent_memory_updates_lose_none(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        """Threads add to the same edges through a function that yields mid-way: without the
        store's lock (row locks on PostgreSQL) two of them read the same vector and one
        increment is lost."""
        import threading
        import time

        store = self._filled(make_store)
        ids, threads, rounds = ["k-1100", "m-1100", "r-1000"], 6, 8
        one = np.zeros((len(ids), self.dim), dtype=np.float32)
        one[:, 0] = 1 / 64  # exact in float32: the sum is exact too

        def add(cur: np.ndarray) -> np.ndarray:
            time.sleep(0.002)
            return cur + one

        def work() -> None:
            for _ in range(rounds):
                store.update_memory(ids, add)

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert np.array_equal(store.memory(ids), one * threads * rounds)

    def test_memory_admin(self, make_store: Callable[..., GraphStore]) -> None:
        from ..core.memory import math as mem

        store = self._filled(make_store)
        q1, q2 = np.eye(self.dim, dtype=np.float32)[:2]
        _write(store, ["r-1000", "r-2000"], [], q1)
        _write(store, ["r-1000"], [], q1)
        _write(store, ["x-1000"], [], q2)
        top = store.top_memory(None, 2)
        assert top[0][0] == "r-1000" and top[0][1] > top[1][1]
        assert [e for e, _ in store.top_memory(q2, 1)] == ["x-1000"]
        dump = store.export_memory()
        assert sorted(dump) == ["r-1000", "r-2000", "x-1000"]
        assert store.decay_memory(0.5) == 3
        assert np.allclose(store.memory(["x-1000"])[0], 0.5 * mem.delta(0.0) * q2, atol=1e-6)
        _raises(ValueError, lambda: store.decay_memory(1.5))
        assert store.reset_memory() == 3 and store.touched_edges() == 0
        assert store.import_memory(dump) == 3
        assert store.export_memory() == dump

    def test_traces_round_trip(self, make_store: Callable[..., GraphStore]) -> None:
        store = make_store("contract")
        trace = {"trace_id": "t-1", "query": "q", "moves": [{"i": 0, "node": "e-1001"}]}
        store.save_trace(trace)
        assert store.load_trace("t-1") == trace
        store.save_trace({**trace, "memorized": True})
        assert store.load_trace("t-1") == {**trace, "memorized": True}

    def test_delete_documents_leaves_no_orphans(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        from functools import partial

        from ..core.errors import UnknownNodeError

        store = self._filled(make_store)
        q = np.eye(self.dim, dtype=np.float32)[3]
        _write(store, ["r-1000", "r-1900", "r-2000", "m-2100"], [], q)
        kept = store.memory(["r-1900", "r-2000", "m-2100"])
        removed = store.delete_documents(["d1", "not-a-doc"])
        assert removed == {"documents": 1, "chunks": 2, "nodes": 5, "edges": 6}
        assert store.document_ids() == ["d2"]
        # e-1002 is still mentioned in d2: it stays, with its edges into d2 only
        assert [e.id for e in store.neighbors("e-1002")] == ["m-2300", "r-1900"]
        for gone in ("c-1100", "a-1200", "e-1001"):
            _raises(UnknownNodeError, partial(store.get_node, gone))
        for gone in ("r-1000", "m-1200", "k-1100", "x-1000"):
            _raises(UnknownNodeError, partial(store.get_edge, gone))
        _raises(UnknownNodeError, lambda: store.get_chunk("c-1200"))
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

    def test_update_is_delete_then_insert(self, make_store: Callable[..., GraphStore]) -> None:
        store = self._filled(make_store)
        _write(store, ["r-2000"], [], np.ones(self.dim, dtype=np.float32))
        g = contract_graph(("d1",), dim=self.dim, salt="v2")
        store.delete_documents(["d1"])
        store.add_graph(**{**g, "documents": [("d1", "hash-d1-v2", {})]})
        assert store.document_hash("d1") == "hash-d1-v2"
        assert store.get_chunk("c-1100").text.endswith("v2")
        assert store.touched_edges() == 1 and np.any(store.memory(["r-2000"]))

    def test_namespaces_are_isolated(self, make_store: Callable[..., GraphStore]) -> None:
        a = self._filled(make_store, "tenant-a")
        b = make_store("tenant-b")
        gb = contract_graph(("d1", "d2", "d3"), dim=self.dim, salt="b")
        b.add_graph(**gb)
        q = np.ones(self.dim, dtype=np.float32)
        _write(b, ["r-3000"], [], q)
        snap = (b.counts(), b.export_memory(), sorted(b.document_ids()))
        _write(a, ["r-1000", "r-2000"], ["m-1100"], q)
        a.decay_memory(0.5)
        a.delete_documents(["d1"])
        a.reset_memory()
        a.save_trace({"trace_id": "t-a"})
        assert (b.counts(), b.export_memory(), sorted(b.document_ids())) == snap
        assert b.load_trace("t-a") is None and a.load_trace("t-a") == {"trace_id": "t-a"}
        # a's searches only ever see a's nodes, even with b's embeddings as the query
        a_ids = {n.id for n in contract_graph(dim=self.dim)["nodes"]}
        for row in gb["embeddings"]:
            assert {h for h, _ in a.search(row, 5, ("entity", "anchor"))} <= a_ids
        _raises(KeyError, lambda: a.get_node("e-3001"))
        assert "e-3001" in {n.id for n in b.get_nodes(["e-3001"])}


def store_contract(
    make_store: Callable[..., GraphStore], *, embedding_atol: float = 1e-6
) -> list[str]:
    """Run every :class:`StoreContract` check against ``make_store``; returns their names.
    Raises ``AssertionError`` at the first failing check. ``embedding_atol``: see
    :attr:`StoreContract.embedding_atol`."""
    suite, ran = StoreContract(), []
    suite.embedding_atol = embedding_atol
    for name in sorted(dir(suite)):
        if name.startswith("test_"):
            getattr(suite, name)(make_store)
            ran.append(name)
    return ran
