"""The store contract's cases of memory and traces (required of every store): the memory
math applied atomically, bad writes that change nothing, no lost update under threads, the
admin calls, learned links; traces saved, loaded and listed. A row of :data:`CASES` per check."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import numpy as np

from ..core.errors import EmbeddingError, InvalidArgumentError, UnknownNodeError
from ..core.memory import math as mem
from ..core.memory.write import update
from ..core.types import Edge
from .contract_case import StoreUnderTest, cases, raises, write
from .contract_graph import LINK


def memory_follows_the_spec_math(s: StoreUnderTest) -> None:
    store = s.filled()
    rng = np.random.default_rng(7)
    expected: dict[str, np.ndarray] = {}
    plan = [
        (["r-1000", "m-1100"], ["k-1100"]),
        (["r-1000"], ["m-1100", "x-1000"]),
        (["x-1000"], ["r-1000"]),
        ([], ["r-1000", "m-2100"]),
    ]
    for enhance, penalise in plan:
        q = rng.normal(size=s.dim).astype(np.float32)
        fn = mem.memory_update(enhance, penalise, q)
        assert (fn.enhanced, fn.penalised) == (len(enhance), len(penalise))
        new = store.update_memory(fn.edge_ids, fn)
        assert new.shape == (len(fn.edge_ids), s.dim)
        expected.update(mem.apply_updates(expected, enhance, penalise, mem.unit(q), s.dim))
    ids = sorted(expected) + ["r-2000"]
    want = np.stack([expected.get(e, np.zeros(s.dim, np.float32)) for e in ids])
    assert np.allclose(store.memory(ids), want, atol=1e-5)
    assert store.touched_edges() == sum(1 for v in expected.values() if np.any(v))
    assert np.all(np.linalg.norm(store.memory(ids), axis=1) <= 1.0 + 1e-5)


def memory_write_with_unknown_edge_changes_nothing(s: StoreUnderTest) -> None:
    store = s.filled()
    q = np.ones(s.dim, dtype=np.float32)
    raises(UnknownNodeError, lambda: write(store, ["r-1000", "r-ffff"], [], q))
    assert store.touched_edges() == 0 and not np.any(store.memory(["r-1000"]))


def update_memory_applies_a_function_or_nothing(s: StoreUnderTest) -> None:
    store = s.filled()
    ids = ["x-1000", "r-1000"]  # any order: rows follow ``edge_ids``
    step = np.eye(s.dim, dtype=np.float32)[:2] * 0.25
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
        raises((EmbeddingError, ZeroDivisionError), partial(store.update_memory, ids, bad))
    raises(ValueError, lambda: store.update_memory(["r-1000", "r-1000"], lambda c: c))
    assert np.array_equal(store.memory(ids), step * 2)
    # an edge left at zero stays untouched (memory is sparse)
    store.update_memory(["r-2000"], lambda cur: cur)
    assert store.touched_edges() == 2


def concurrent_memory_updates_lose_none(s: StoreUnderTest) -> None:
    """Threads add to the same edges through a function that yields mid-way: without the
    store's lock (row locks on PostgreSQL) two of them read the same vector and one
    increment is lost."""

    store = s.filled()
    ids, threads, rounds = ["k-1100", "m-1100", "r-1000"], 6, 8
    one = np.zeros((len(ids), s.dim), dtype=np.float32)
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


def memory_admin(s: StoreUnderTest) -> None:
    store = s.filled()
    q1, q2 = np.eye(s.dim, dtype=np.float32)[:2]
    write(store, ["r-1000", "r-2000"], [], q1)
    write(store, ["r-1000"], [], q1)
    write(store, ["x-1000"], [], q2)
    top = store.top_memory(None, 2)
    assert top[0][0] == "r-1000" and top[0][1] > top[1][1]
    assert [e for e, _ in store.top_memory(q2, 1)] == ["x-1000"]
    dump = store.export_memory()
    assert sorted(dump) == ["r-1000", "r-2000", "x-1000"]
    assert store.decay_memory(0.5) == 3
    assert np.allclose(store.memory(["x-1000"])[0], 0.5 * mem.delta(0.0) * q2, atol=1e-6)
    raises(ValueError, lambda: store.decay_memory(1.5))
    assert store.reset_memory() == 3 and store.touched_edges() == 0
    assert store.import_memory(dump) == 3
    assert store.export_memory() == dump


def memory_update_adds_learned_links(s: StoreUnderTest) -> None:
    store = s.filled()
    q = np.eye(s.dim, dtype=np.float32)[2]
    bad = Edge("r-77", "e-2001", "a-1200", "relation", "x")
    for links, err in (
        ([bad], InvalidArgumentError),
        ([replace(LINK, v="a-9900")], UnknownNodeError),
    ):
        try:
            update(store, [LINK.id], [], q, links)
        except err:
            pass
        else:
            raise AssertionError(f"expected {err.__name__}")
        assert store.touched_edges() == 0
    update(store, [LINK.id, "k-1200"], [], q, [LINK])
    assert store.get_edge(LINK.id) == LINK
    assert LINK.id in [e.id for e in store.neighbors("e-2001")]
    assert LINK.id in [e.id for e in store.neighbors("a-1200")]
    assert np.allclose(store.memory([LINK.id])[0], 2 / np.pi * q, atol=1e-5)
    update(store, [LINK.id], [], q, [LINK])  # an existing link is kept, its memory grows
    assert store.counts()["edges"] == 15 and store.touched_edges() == 2
    assert float(np.linalg.norm(store.memory([LINK.id])[0])) > 2 / np.pi
    store.delete_documents(["d1"])  # a learned edge goes with its end
    assert LINK.id not in [e.id for e in store.neighbors("e-2001")]


def traces_round_trip(s: StoreUnderTest) -> None:
    store = s.empty()
    trace = {"trace_id": "t-1", "query": "q", "moves": [{"i": 0, "node": "e-1001"}]}
    store.save_trace(trace)
    assert store.load_trace("t-1") == trace
    store.save_trace({**trace, "memorized": True})
    assert store.load_trace("t-1") == {**trace, "memorized": True}


def recent_traces_newest_first(s: StoreUnderTest) -> None:
    store = s.empty()
    for i in range(3):
        store.save_trace({"trace_id": f"t-{i}", "query": f"q{i}"})
    store.save_trace({"trace_id": "t-0", "query": "q0", "memorized": True})
    assert [t["trace_id"] for t in store.recent_traces(2)] == ["t-2", "t-1"]
    assert len(store.recent_traces(10)) == 3 and store.recent_traces(0) == []


CASES = cases(
    "memory",
    memory_follows_the_spec_math,
    memory_write_with_unknown_edge_changes_nothing,
    update_memory_applies_a_function_or_nothing,
    concurrent_memory_updates_lose_none,
    memory_admin,
    memory_update_adds_learned_links,
) + cases("traces", traces_round_trip, recent_traces_newest_first)
