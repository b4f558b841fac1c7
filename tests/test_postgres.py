"""The PostgreSQL store against a real server: concurrent memory writes, document lifecycle
without orphans, tenant isolation, parity with the embedded store, indexed lookups."""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pg_fixture
import psycopg
import pytest
from pg_fixture import HOT_EDGES, memory_writer, orphans

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.core.memory import math as mem
from remindrag_integrations.core.memory.write import update
from remindrag_integrations.errors import StoreEmptyError
from remindrag_integrations.stores import InMemoryGraphStore, open_store
from remindrag_integrations.stores.postgres import _NEIGHBORS, TABLES, PostgresGraphStore
from remindrag_integrations.testing import HashEmbedder, contract_graph

pytestmark = pytest.mark.postgres
pg_dsn = pg_fixture.pg_dsn  # the session's server (started once per process)
make_pg_store = pg_fixture.make_pg_store
own_pg_database = pg_fixture.own_pg_database

DIM = 32
TEXTS = [
    ("d1", "Scott Derrickson is an American director. He directed Sinister in Los Angeles."),
    ("d2", "Ed Wood was an American filmmaker. Conrad Brooks acted in films by Ed Wood."),
    ("d3", "Sinister is a horror film. Ethan Hawke starred in Sinister."),
]
OTHER_TENANT = [
    ("b1", "Marie Curie discovered polonium in Paris. Pierre Curie worked with Marie Curie."),
    ("b2", "Polonium is a radioactive element. Paris is the capital of France."),
]


def _journal(dsn: str, ns: str) -> list[tuple[str, str, np.ndarray]]:
    """The write journal, read with a connection of the test's own (not the store's)."""
    import psycopg
    from pgvector.psycopg import register_vector

    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        rows = conn.execute(
            "SELECT edge_id, op, query FROM rr_memory_journal WHERE namespace = %s ORDER BY seq",
            (ns,),
        ).fetchall()
    return [(e, op, np.asarray(q.to_numpy(), np.float32)) for e, op, q in rows]


def test_concurrent_memory_writes_lose_no_update(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    store = make_pg_store("concurrency", journal=True)
    store.add_graph(**contract_graph(("d1", "d2", "d3"), dim=DIM))
    workers, calls = 4, 100
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=memory_writer, args=(pg_dsn, "concurrency", w, calls, DIM, barrier, out))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    plans = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    # count: every planned write is in the journal, written in the same transaction
    planned = Counter(e for plan in plans.values() for enh, pen in plan for e in {*enh, *pen})
    journal = _journal(pg_dsn, "concurrency")
    assert sum(len(p) for p in plans.values()) == workers * calls
    assert Counter(e for e, _, _ in journal) == planned
    # vectors: replaying the journal in commit order reproduces every stored vector exactly;
    # a lost update (two writers reading the same old vector) would break the replay
    expected: dict[str, np.ndarray] = {e: np.zeros(DIM, np.float32) for e in HOT_EDGES}
    writes: Counter[str] = Counter()
    for eid, op, q in journal:
        expected[eid] = (mem.enhance if op == "e" else mem.penalise)(expected[eid], q)
        if op == "e" or writes[eid]:
            writes[eid] += 1  # the row exists from the first enhance on; each write counts
    assert np.array_equal(store.memory(list(HOT_EDGES)), np.stack([expected[e] for e in HOT_EDGES]))
    assert store.memory_writes(list(HOT_EDGES)) == {e: n for e, n in writes.items() if n}
    assert store.touched_edges() == len([e for e in HOT_EDGES if writes[e]])


def _engine(store: Any) -> ReMindRAG:
    return ReMindRAG(embeddings=HashEmbedder(DIM), store=store)


def _same_state(pg: ReMindRAG, ref: ReMindRAG) -> None:
    assert pg.store.counts() == ref.store.counts()
    assert sorted(pg.store.document_ids()) == sorted(ref.store.document_ids())
    a, b = pg.store.export_memory(), ref.store.export_memory()
    assert sorted(a) == sorted(b)
    for k in a:
        assert np.allclose(a[k], b[k], atol=1e-6)


def test_engine_on_postgres_matches_the_embedded_store_through_the_lifecycle(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    pg, ref = _engine(make_pg_store("lifecycle")), _engine(InMemoryGraphStore())
    for eng in (pg, ref):
        eng.insert([Document(i, t) for i, t in TEXTS])
    _same_state(pg, ref)
    runs = {}
    for name, eng in (("pg", pg), ("ref", ref)):  # cosine-only pass: both walk the same way
        r = eng.retrieve(
            "Who directed Sinister?", navigator={"min_similarity": -1.0}, prior={"enabled": False}
        )
        runs[name] = [c.chunk.id for c in r.chunks]
        walked = [c.chunk.id for c in r.chunks if c.source == "traversal"]
        assert walked and eng.memorize(r.trace_id, supporting=walked).applied
    assert runs["pg"] == runs["ref"]
    _same_state(pg, ref)
    assert pg.store.touched_edges() > 0
    again = pg.retrieve("Who directed Sinister?", prior={"enabled": False})
    assert again.trace.stop_reason == "replay" and again.trace.replayed_edges
    # an unchanged document is a no-op: memory and graph stay as they are
    before = (pg.store.counts(), pg.store.export_memory())
    assert pg.insert([Document(i, t) for i, t in TEXTS]).skipped_documents == 3
    assert (pg.store.counts(), pg.store.export_memory()) == before
    # update one document, then delete another: no orphans, same state as the embedded store
    for eng in (pg, ref):
        eng.insert([Document("d3", "Sinister is a horror film. Juliet Rylance starred in it.")])
    _same_state(pg, ref)
    assert not any(orphans(pg_dsn).values()), orphans(pg_dsn)
    for eng in (pg, ref):
        eng.delete(["d1"])
    _same_state(pg, ref)
    assert not any(orphans(pg_dsn).values()), orphans(pg_dsn)


def test_delete_keeps_untouched_memory_and_drops_the_rest(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    store = make_pg_store("delete", journal=True)
    store.add_graph(**contract_graph(("d1", "d2", "d3"), dim=DIM))
    all_edges = [e.id for e in contract_graph(("d1", "d2", "d3"), dim=DIM)["edges"]]
    update(store, all_edges, [], np.ones(DIM, dtype=np.float32))
    removed = {"k-1100", "k-1200", "x-1000", "m-1100", "m-1200", "r-1000"}
    survivors = [e for e in all_edges if e not in removed]
    kept = store.memory(survivors)
    store.delete_documents(["d1"])
    assert np.array_equal(store.memory(survivors), kept)
    assert store.touched_edges() == store.counts()["edges"]
    assert not any(orphans(pg_dsn).values()), orphans(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        for table in (
            "rr_chunks",
            "rr_nodes",
            "rr_edges",
            "rr_edge_memory",
            "rr_memory_journal",
            "rr_entity_names",
        ):
            col = (
                "edge_id"
                if table in ("rr_edge_memory", "rr_memory_journal")
                else ("node_id" if table == "rr_entity_names" else "id")
            )
            n = conn.execute(
                f"SELECT count(*) FROM {table} WHERE namespace = 'delete' AND {col} ~ '^[a-z]-1'"
            ).fetchone()[0]
            # left of d1: entity e-1002 (still mentioned in d2) and its edge r-1900 to d2
            assert n == (0 if table == "rr_chunks" else 1), table


def _tenant_rows(dsn: str, ns: str) -> dict[str, list]:
    with psycopg.connect(dsn) as conn:
        return {
            t: conn.execute(f"SELECT * FROM {t} WHERE namespace = %s ORDER BY 2", (ns,)).fetchall()
            for t in TABLES
        }


def test_a_tenant_never_sees_or_changes_another_tenants_data(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    a = _engine(make_pg_store("tenant-a"))
    b = _engine(make_pg_store("tenant-b"))
    b.insert([Document(i, t) for i, t in OTHER_TENANT])
    rb = b.retrieve("Who discovered polonium?", navigator={"min_similarity": -1.0})
    b.memorize(rb.trace_id, supporting=[c.chunk.id for c in rb.chunks])
    b_chunks = {c for r in _tenant_rows(pg_dsn, "tenant-b")["rr_chunks"] for c in r[1:2]}
    snapshot = _tenant_rows(pg_dsn, "tenant-b")
    # tenant A uses the same document ids and asks B's questions
    a.insert([Document("b1", TEXTS[0][1]), Document("b2", TEXTS[2][1])])
    for q in ("Who discovered polonium?", "What is the capital of France?"):
        r = a.retrieve(q, navigator={"min_similarity": -1.0})
        assert not {c.chunk.id for c in r.chunks} & b_chunks
        if r.chunks:
            a.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
    a.decay_memory(0.5)
    a.delete(["b1"])
    a.reset_memory()
    a.store.drop_namespace()  # type: ignore[attr-defined]
    assert _tenant_rows(pg_dsn, "tenant-b") == snapshot
    assert b.retrieve("Who discovered polonium?").trace.stop_reason == "replay"


def test_open_store_and_engine_accept_a_dsn(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    make_pg_store("default")  # empty the default namespace
    eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=pg_dsn)
    assert isinstance(eng.store, PostgresGraphStore) and eng.store.namespace == "default"
    eng.insert([Document(i, t) for i, t in TEXTS[:1]])
    other = open_store(pg_dsn, namespace="default")
    assert other.counts() == eng.store.counts()  # a second replica sees the same graph
    assert isinstance(open_store(None), InMemoryGraphStore)
    assert isinstance(open_store("/nonexistent/dir"), InMemoryGraphStore)
    eng.store.drop_namespace()  # type: ignore[union-attr]


def test_memory_admin_through_the_engine(
    tmp_path: Any, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    eng = _engine(make_pg_store("admin"))
    eng.insert([Document(i, t) for i, t in TEXTS])
    r = eng.retrieve(
        "Who directed Sinister?", navigator={"min_similarity": -1.0}, prior={"enabled": False}
    )
    eng.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks if c.source == "traversal"])
    top = eng.inspect_memory(5)
    assert top and all(row["norm"] > 0 and row["text"] for row in top)
    assert {row["cluster"] for row in top} == {0}  # one query: one cluster
    assert eng.inspect_memory(3, query="Who directed Sinister?")[0]["score"] > 0
    n = eng.export_memory(tmp_path / "mem.json")
    dump = eng.store.export_memory()
    assert eng.decay_memory(0.5) == n
    assert eng.reset_memory() == n and eng.store.touched_edges() == 0
    assert eng.import_memory(tmp_path / "mem.json") == n
    assert eng.store.export_memory() == dump


def _plan(dsn: str, sql: str, params: tuple | dict) -> str:
    with psycopg.connect(dsn) as conn:
        conn.execute("SET enable_seqscan = off")
        from pgvector.psycopg import register_vector

        register_vector(conn)
        return "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))


def test_lookups_are_served_by_indexes(own_pg_database: str) -> None:
    """In a database of its own: other tests' tenants (other dimensions, more rows) change the
    planner's statistics, and so the plans read here."""
    pg_dsn = own_pg_database
    store = PostgresGraphStore(pg_dsn, namespace="plans")
    store.add_graph(**contract_graph(dim=DIM))
    q = np.ones(DIM, dtype=np.float32)
    search = (
        f"SELECT id FROM rr_nodes WHERE namespace = %s AND dim = {DIM} "
        f"AND kind = ANY(%s) AND kind <> 'chunk' "
        f"ORDER BY (embedding::vector({DIM})) <=> %s::vector({DIM}) "
        "LIMIT 2"
    )
    assert f"rr_nodes_hnsw_{DIM}" in _plan(pg_dsn, search, ("plans", ["entity"], q))
    nbrs = _plan(pg_dsn, _NEIGHBORS, {"ns": "plans", "n": "e-1001"})
    assert "Index Cond: ((namespace = 'plans'::text) AND (u = 'e-1001'::text))" in nbrs
    assert "Index Cond: ((namespace = 'plans'::text) AND (v = 'e-1001'::text))" in nbrs
    memory = _plan(
        pg_dsn,
        "SELECT vec FROM rr_edge_memory WHERE namespace = %s AND edge_id = ANY(%s)",
        ("plans", ["r-1000"]),
    )
    assert "rr_edge_memory_pkey" in memory
    store.close()


def test_reset_all_namespaces_and_list_them(
    make_pg_store: Callable[..., PostgresGraphStore],
) -> None:
    a, b = make_pg_store("reset-a"), make_pg_store("reset-b")
    q = np.ones(DIM, dtype=np.float32)
    for store in (a, b):
        store.add_graph(**contract_graph(dim=DIM))
        update(store, ["r-1000"], [], q)
    assert {"reset-a", "reset-b"} <= set(a.namespaces())
    assert a.reset_memory() == 1 and b.touched_edges() == 1
    update(a, ["r-1000"], [], q)
    assert a.reset_memory(all_namespaces=True) >= 2
    assert a.touched_edges() == b.touched_edges() == 0


def test_dimension_is_pinned_per_namespace(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    from remindrag_integrations.errors import EmbeddingError

    make_pg_store("dim-16")
    pinned = PostgresGraphStore(pg_dsn, namespace="dim-16", dim=16)
    assert pinned.dim == 16
    with pytest.raises(EmbeddingError):
        pinned.add_graph(**contract_graph(dim=DIM))
    other = make_pg_store("dim-32")  # another tenant may use another embedder
    other.add_graph(**contract_graph(dim=DIM))
    assert other.dim == DIM and other.search(np.ones(DIM, np.float32), 1, ("entity",))
    pinned.close()


def test_settings_live_with_the_namespace(make_pg_store: Callable[..., PostgresGraphStore]) -> None:
    a, b = make_pg_store("settings-a"), make_pg_store("settings-b")
    a.update_settings({"embeddings": "all-MiniLM-L6-v2", "engine": {"index": {"k": 1}}})
    a.update_settings({"embeddings": "other"})
    assert a.settings() == {"embeddings": "other", "engine": {"index": {"k": 1}}}
    assert b.settings() == {}
    a.drop_namespace()
    assert a.settings() == {}


def test_retriever_on_a_dsn_is_isolated_per_namespace(pg_dsn: str) -> None:
    from remindrag_integrations import ReMindRetriever

    docs = [
        Document("paris", "Paris is the capital of France. The Seine flows through Paris."),
        Document("berlin", "Berlin is the capital of Germany."),
    ]
    a = ReMindRetriever.from_documents(
        docs, store=pg_dsn, namespace="retriever-a", embeddings=HashEmbedder(), k=2
    )
    b = ReMindRetriever.from_documents(
        [], store=pg_dsn, namespace="retriever-b", embeddings=HashEmbedder(), k=2
    )
    try:
        got = a.invoke("Which river flows through the capital of France?")
        assert got and got[0].metadata["remindrag"]["doc_id"] == "paris"
        with pytest.raises(StoreEmptyError, match="'retriever-b' holds no documents"):
            b.invoke("Which river flows through the capital of France?")  # nothing in it
    finally:
        a.engine.store.drop_namespace()
        b.engine.store.drop_namespace()


def test_cli_on_a_dsn_with_namespaces(pg_dsn: str, tmp_path) -> None:
    import subprocess
    import sys

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "seine.txt").write_text(
        "The Seine flows through Paris. Paris is the capital of France.", encoding="utf-8"
    )

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "remindrag_integrations.app.cli", *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    common = ["--store", pg_dsn, "--namespace", "cli-tenant"]
    try:
        out = cli("index", str(tmp_path / "docs"), *common, "--no-cache")
        assert "indexed 1 documents" in out
        out = cli("ask", "Which river flows through Paris?", *common, "--no-cache")
        assert "seine" in out.lower()
        assert "documents: 1" in cli("inspect", *common) or "1 documents" in cli("inspect", *common)
        other = subprocess.run(
            [
                sys.executable,
                "-m",
                "remindrag_integrations.app.cli",
                "ask",
                "Which river?",
                "--store",
                pg_dsn,
                "--namespace",
                "cli-empty",
                "--no-cache",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert other.returncode != 0 and "empty" in other.stderr
    finally:
        for ns in ("cli-tenant", "cli-empty"):
            open_store(pg_dsn, namespace=ns).drop_namespace()


def test_the_first_pass_prior_on_postgres(make_pg_store: Callable[..., PostgresGraphStore]) -> None:
    """Full-text search is the lexical half and the PageRank spreads over the question's
    local neighbourhood (batched reads): the second hop still comes from the graph."""
    from test_prior import DOCS, FILLER, QUESTION

    eng = ReMindRAG(llm=None, embeddings=HashEmbedder(), store=make_pg_store("prior"))
    docs = [Document(k, v) for k, v in DOCS.items()]
    eng.insert(docs + [Document(f"filler{i}", t) for i, t in enumerate(FILLER)])
    r = eng.retrieve(QUESTION, k=3)
    found = [rc.chunk.doc_id for rc in r.chunks]
    assert found[0] == "derrickson" and "sinister" in found
    ev = r.trace.rank_evidence
    assert ev[r.chunks[0].chunk.id]["lexical"] > 0 and ev[r.chunks[0].chunk.id]["graph"] > 0
    xj = eng.retrieve("Who produced the XJ220?", k=1).chunks[0]
    assert xj.chunk.doc_id == "xj"
    eng.store.drop_namespace()  # type: ignore[union-attr]
