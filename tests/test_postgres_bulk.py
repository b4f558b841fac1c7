"""The PostgreSQL bulk-load path and the one-statement frontier read, against a real server:
the bulk path builds the same graph as row-by-row inserts and passes the store contract; a
load that fails mid-way leaves the store as it was; readers wait and then see the whole batch;
``neighborhoods`` (with read-ahead along memory) returns what the plain reads return."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pg_fixture
import psycopg
import pytest

from remindrag_integrations import ConfigError, Document, ReMindRAG, StoreError
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.core.frontier import Follow, read_neighborhoods
from remindrag_integrations.core.memory.replay import replay
from remindrag_integrations.core.memory.write import update
from remindrag_integrations.core.walk import Walk
from remindrag_integrations.errors import BulkLoadError, UnknownNodeError
from remindrag_integrations.stores import InMemoryGraphStore
from remindrag_integrations.stores.contract import StoreContract
from remindrag_integrations.stores.postgres import BulkOptions, PostgresGraphStore
from remindrag_integrations.testing import HashEmbedder, contract_graph

pytestmark = pytest.mark.postgres
pg_dsn = pg_fixture.pg_dsn
make_pg_store = pg_fixture.make_pg_store

DIM = 32
DOCS = ("d1", "d2", "d3", "d4")
TEXTS = [
    ("d1", "Scott Derrickson is an American director. He directed Sinister in Los Angeles."),
    ("d2", "Ed Wood was an American filmmaker. Conrad Brooks acted in films by Ed Wood."),
    ("d3", "Sinister is a horror film. Ethan Hawke starred in Sinister."),
]
# every batch takes the bulk path and strips every table it writes (indexes, foreign keys)
ALWAYS = BulkOptions(rows=1, rebuild_ratio=math.inf)
NEVER = BulkOptions(rows=None)


class TestPostgresBulkStore(StoreContract):
    """The whole store contract with every write on the bulk path."""

    @pytest.fixture()
    def make_store(self, make_pg_store: Callable[..., object]) -> Callable[..., object]:
        return lambda namespace="contract", **kw: make_pg_store(namespace, bulk=ALWAYS, **kw)


def _hnsw_indexes(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'rr_nodes' "
            "AND indexdef LIKE '%%USING hnsw%%'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def test_bulk_and_row_paths_build_the_same_graph(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    bulk, rows = make_pg_store("bulk", bulk=ALWAYS), make_pg_store("rows", bulk=NEVER)
    engines = [ReMindRAG(embeddings=HashEmbedder(DIM), store=s) for s in (bulk, rows)]
    for eng in engines:
        eng.insert([Document(i, t) for i, t in TEXTS])
    assert bulk.counts() == rows.counts() and bulk.counts()["edges"] > 10
    assert bulk.whole_graph() == rows.whole_graph()
    assert f"rr_nodes_hnsw_{DIM}" in _hnsw_indexes(pg_dsn)  # rebuilt after the load
    q = HashEmbedder(DIM).embed(["Who directed Sinister?"])[0]
    kinds = ("entity", "anchor", "chunk")
    assert bulk.search(q, 5, kinds) == rows.search(q, 5, kinds)
    a, b = (e.retrieve("Who directed Sinister?") for e in engines)
    assert [c.chunk.id for c in a.chunks] == [c.chunk.id for c in b.chunks]


def _schema(dsn: str) -> list[tuple[str, str]]:
    """Every index and constraint of the store's tables, with its definition."""
    with psycopg.connect(dsn) as conn:
        idx = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename LIKE 'rr\\_%%'"
        ).fetchall()
        con = conn.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid::regclass::text LIKE 'rr\\_%%'"
        ).fetchall()
    return sorted((str(a), str(b)) for a, b in idx + con)


def test_a_bulk_load_builds_back_every_index_and_key_and_reports_its_phases(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    dim = 44  # a dimension no other test uses: the load builds its HNSW index
    seen: list[tuple[str, float]] = []
    opts = BulkOptions(rows=1, rebuild_ratio=math.inf, progress=lambda p, s: seen.append((p, s)))
    make_pg_store("bulk-phases-ref", bulk=NEVER).add_graph(**contract_graph(("d0",), dim=dim))
    schema = _schema(pg_dsn)
    store = make_pg_store("bulk-phases", bulk=opts)
    store.add_graph(**contract_graph(DOCS, dim=dim))
    phases = [p for p, _ in seen]
    assert phases[:5] == ["prepare", "chunks", "nodes", "edges", "analyze"]
    assert phases[-1] == "hnsw"
    built = {p.split(" ", 1)[1] for p in phases if p.startswith(("index ", "fkey "))}
    assert built == {
        "rr_chunks_doc",
        "rr_chunks_tsv",
        "rr_nodes_doc",
        "rr_edges_u",
        "rr_edges_v",
        "rr_edges_namespace_u_fkey",
        "rr_edges_namespace_v_fkey",
    }
    assert all(s >= 0 for _, s in seen)
    assert _schema(pg_dsn) == schema  # the same indexes and keys, defined the same way
    # the keys are enforced again: deleting a document cascades to its edges
    before = store.counts()["edges"]
    store.delete_documents(["d1"])
    assert 0 < store.counts()["edges"] < before
    with psycopg.connect(pg_dsn) as conn:
        orphans = conn.execute(
            "SELECT count(*) FROM rr_edges e WHERE e.namespace = 'bulk-phases' AND NOT EXISTS "
            "(SELECT 1 FROM rr_nodes n WHERE n.namespace = e.namespace AND n.id = e.u)"
        ).fetchone()
    assert orphans == (0,)


def test_bulk_memory_is_sized_for_the_hnsw_graph() -> None:
    auto = BulkOptions()
    assert auto.memory_for(1_930_000, 128) == "2945MB"  # 10 M edges: 1.93 M vectors
    assert auto.memory_for(1_000, 128) == "64MB"
    assert auto.memory_for(50_000_000, 768) == "8192MB"
    assert BulkOptions(memory="3GB").memory_for(1_930_000, 128) == "3GB"


@pytest.mark.parametrize("last", ["edges", "index rr_edges_v"])
def test_a_bulk_load_stopped_midway_leaves_nothing(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore], last: str
) -> None:
    """Stopped once its rows are in (no index or key built yet), or once every btree and
    key is built again (the HNSW index not yet): the store and its schema are as before."""
    store = make_pg_store("bulk-stop", bulk=NEVER)
    store.add_graph(**contract_graph(("d1",), dim=DIM))
    before = (store.counts(), store.whole_graph())
    schema = _schema(pg_dsn)

    class Stop(Exception):
        pass

    def stop_after_the_rows(phase: str, secs: float) -> None:
        if phase == last:
            raise Stop

    loader = PostgresGraphStore(
        pg_dsn,
        namespace="bulk-stop",
        bulk=BulkOptions(rows=1, rebuild_ratio=math.inf, progress=stop_after_the_rows),
    )
    with pytest.raises(Stop):
        loader.add_graph(**contract_graph(("d1", "d2", "d3"), dim=DIM, salt="new"))
    loader.close()
    assert (store.counts(), store.whole_graph()) == before
    assert _schema(pg_dsn) == schema


def test_a_bulk_load_that_fails_after_its_rows_are_in_raises_a_typed_error(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    store = make_pg_store("bulk-late", bulk=NEVER)
    store.add_graph(**contract_graph(("d1",), dim=DIM))
    before = (store.counts(), store.whole_graph())
    schema = _schema(pg_dsn)
    loader = PostgresGraphStore(
        pg_dsn + "?options=-c%20lock_timeout%3D300ms", namespace="bulk-late", bulk=ALWAYS
    )
    with psycopg.connect(pg_dsn) as blocker:  # only ANALYZE (after the COPY) waits for this
        blocker.execute("LOCK TABLE rr_entity_names IN SHARE UPDATE EXCLUSIVE MODE")
        with pytest.raises(BulkLoadError, match="phase 'analyze'"):
            loader.add_graph(**contract_graph(("d1", "d2", "d3"), dim=DIM, salt="new"))
    loader.close()
    assert (store.counts(), store.whole_graph()) == before
    assert _schema(pg_dsn) == schema


def test_a_bulk_load_that_fails_midway_leaves_the_store_as_it_was(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    store = make_pg_store("bulk-fail", bulk=NEVER)
    store.add_graph(**contract_graph(("d1",), dim=DIM))
    update(store, ["r-1000"], [], np.ones(DIM, dtype=np.float32))
    before = (store.counts(), store.whole_graph(), store.export_memory())
    # the loader gives up on a lock after 300 ms; the edge table is locked by another session,
    # so the load fails after its nodes and chunks were copied and the HNSW index dropped
    loader = PostgresGraphStore(
        pg_dsn + "?options=-c%20lock_timeout%3D300ms", namespace="bulk-fail", bulk=ALWAYS
    )
    with psycopg.connect(pg_dsn) as blocker:
        blocker.execute("LOCK TABLE rr_edges IN SHARE MODE")
        with pytest.raises(StoreError):
            loader.add_graph(**contract_graph(("d1", "d2", "d3"), dim=DIM, salt="new"))
    loader.close()
    assert (store.counts(), store.whole_graph(), store.export_memory()) == before
    assert f"rr_nodes_hnsw_{DIM}" in _hnsw_indexes(pg_dsn)
    assert store.search(np.ones(DIM, dtype=np.float32), 1, ("entity",))  # index usable


def _waiting_on_locks(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()
    return int(row[0]) if row else 0


def _wait_for_lock_waiters(dsn: str, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while _waiting_on_locks(dsn) < n:
        assert time.monotonic() < deadline, f"fewer than {n} sessions ever waited on a lock"
        time.sleep(0.02)


def test_readers_wait_for_a_bulk_load_and_then_see_all_of_it(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    dim = 40  # a dimension no other test uses: its index is small, so the batch rebuilds it
    loader = make_pg_store("bulk-read", bulk=ALWAYS)
    loader.add_graph(**contract_graph(("d1",), dim=dim))
    reader = make_pg_store("bulk-read-other")  # another tenant of the same dimension
    reader.add_graph(**contract_graph(("d9",), dim=dim))
    mine = PostgresGraphStore(pg_dsn, namespace="bulk-read")
    before, other_before = mine.counts(), reader.counts()
    seen: dict[str, Any] = {}
    with psycopg.connect(pg_dsn) as blocker:
        blocker.execute("LOCK TABLE rr_edges IN SHARE MODE")  # holds the load mid-way
        load = threading.Thread(
            target=lambda: loader.add_graph(**contract_graph(DOCS, dim=dim, salt="x"))
        )
        load.start()
        _wait_for_lock_waiters(pg_dsn, 1)
        reads = [
            threading.Thread(target=lambda: seen.update(mine=mine.counts())),
            threading.Thread(target=lambda: seen.update(other=reader.counts())),
        ]
        for t in reads:
            t.start()
        _wait_for_lock_waiters(pg_dsn, 3)  # the loader and both readers wait
        assert not seen  # no reader saw the half-loaded graph
        blocker.rollback()
    load.join(timeout=60)
    for t in reads:
        t.join(timeout=60)
    assert (
        seen["mine"] == mine.counts() and seen["mine"]["chunks"] == 2 * len(DOCS) > before["chunks"]
    )
    assert seen["other"] == other_before
    mine.close()


def _warm(store: Any) -> np.ndarray:
    q = HashEmbedder(DIM).embed(["Person1 City1"])[0]
    q /= np.linalg.norm(q)
    for path in (["m-1100", "r-1000", "m-1200"], ["k-1100", "r-1900", "m-2100"]):
        update(store, path, [], q)
        update(store, path, [], q)
    return q


def test_neighborhoods_match_the_plain_reads(
    make_pg_store: Callable[..., PostgresGraphStore],
) -> None:
    pg, ref = make_pg_store("hoods"), InMemoryGraphStore()
    for store in (pg, ref):
        store.add_graph(**contract_graph(DOCS, dim=DIM))
    q = [_warm(s) for s in (pg, ref)][0]
    ids = ["e-1001", "a-1100", "c-2100", "e-1001"]
    follow = Follow(q, 0.5, max_nodes=10)
    for fl in (None, follow):
        got, want = pg.neighborhoods(ids, fl), read_neighborhoods(ref, ids, fl)
        assert sorted(got) == sorted(want)
        for n, h in want.items():
            assert got[n].node == h.node and got[n].edges == h.edges
            assert np.allclose(got[n].memory, h.memory, atol=1e-6)
            assert np.allclose(got[n].embedding, h.embedding, atol=1e-3)  # embedded: float16
            assert set(h.remembered) <= set(got[n].remembered)
    reached = pg.neighborhoods(["e-1001"], follow)
    assert {"e-1001", "a-1100", "e-1002", "a-1200"} <= set(reached)  # through memory only
    assert "a-4100" not in reached  # not reached through remembered edges
    assert len(pg.neighborhoods(["e-1001"], Follow(q, 0.5, max_nodes=1))) == 2
    with pytest.raises(UnknownNodeError):
        pg.neighborhoods(["e-1001", "e-nope"])
    with pytest.raises(UnknownNodeError):
        read_neighborhoods(ref, ["e-nope"])


def test_replay_on_postgres_matches_the_embedded_store(
    make_pg_store: Callable[..., PostgresGraphStore],
) -> None:
    pg, ref = make_pg_store("hoods-replay"), InMemoryGraphStore()
    for store in (pg, ref):
        store.add_graph(**contract_graph(DOCS, dim=DIM))
    q = [_warm(s) for s in (pg, ref)][0]
    walks = [Walk(s, q, RetrievalConfig()) for s in (pg, ref)]
    for walk in walks:
        walk.add("e-1001", None, None, "seed")
        replay(walk)
    assert walks[0].replayed_edges == walks[1].replayed_edges
    assert len(walks[0].replayed_edges) >= 3 and walks[0].parents == walks[1].parents


def test_bulk_options_are_validated(pg_dsn: str) -> None:
    for bad in (
        {"rows": 0},
        {"m": 1},
        {"ef_construction": 10, "m": 16},
        {"memory": "lots"},
        {"memory": "1 GB; DROP TABLE x"},
        {"workers": -1},
        {"memory": "Auto"},
        {"rebuild_ratio": -1},
        {"rebuild_ratio": math.nan},
        {"progress": "print"},
    ):
        with pytest.raises(ConfigError):
            BulkOptions(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        PostgresGraphStore(pg_dsn, namespace="x", bulk={"rows": 5})  # type: ignore[arg-type]
