"""The PostgreSQL store's in-process copy of the prior's graph (issue 49): a whole zero-token
query on real text costs few statements, and the copy follows every graph write of any
process, connection or thread: the next query sees it, an older snapshot keeps its own."""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pg_fixture
import psycopg
import pytest
from test_round_trips import CountingPg

from remindrag_integrations import ConfigError, Document, ReMindRAG
from remindrag_integrations.core.store import MatrixStore
from remindrag_integrations.core.types import Edge
from remindrag_integrations.stores.graph_matrix import GraphMatrix
from remindrag_integrations.stores.lexical import LexicalIndex
from remindrag_integrations.stores.postgres import PostgresGraphStore
from remindrag_integrations.stores.postgres.lexical import or_query
from remindrag_integrations.testing import HashEmbedder

pg_dsn = pg_fixture.pg_dsn
make_pg_store = pg_fixture.make_pg_store
pytestmark = pytest.mark.postgres

DIM = 32
# A whole zero-token query on the two real-text samples pooled (240 MuSiQue and HotpotQA
# passages: many names per question, hub entities), counted 2026-11-29: 37-53 statements
# before (the push reading the graph one statement a round, the walk every node's edges and
# embedding); with the graph in memory 15-29 the first time a question's nodes are read and
# 7-11 when asked again (seed and lexical search, title hop, names, replay's
# memory reads, the trace); with seed search from the cached vectors, the push over the
# cached matrix, 12-21 and 6-10; with every node's edges and row read with the links, 7-11
# the first time too (lexical search, title hop, names, replay, the trace); with the lexical
# search BM25 over the cached chunk texts, at most 10 the first time and 9 again. With memory
# vectors and names in the cache too (round 4): 1-2 the first time (the trace; a passage's
# row not read yet), 1 asked again and 1 after memory writes (the trace).
MAX_STATEMENTS = 3
MAX_STATEMENTS_AGAIN = 2
MAX_STATEMENTS_AFTER_MEMORY = 2
Rows = tuple[list[dict], dict[str, dict]]


def _docs(*samples: Rows) -> list[Document]:
    return [
        Document(pid, f"{r['title']}. {r['text']}")
        for _, rows in samples
        for pid, r in sorted(rows.items())
    ]


def _questions(*samples: Rows) -> list[str]:
    return [q["question"] for qs, _ in samples for q in qs]


def _real_text(
    dsn: str, make: Callable[..., PostgresGraphStore], ns: str, *samples: Rows
) -> tuple[CountingPg, PostgresGraphStore, ReMindRAG]:
    """The real-text samples indexed into a new namespace: a statement-counting store with
    the graph cache, the same namespace read through SQL, and an engine on the first."""
    make(ns)  # an empty namespace
    store = CountingPg(dsn, namespace=ns)
    sql = PostgresGraphStore(dsn, namespace=ns, graph_cache=False)
    eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=store)
    eng.insert(_docs(*samples))
    return store, sql, eng


def test_a_whole_query_on_real_text_reads_the_graph_from_memory(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore], musique: Rows, hotpot: Rows
) -> None:
    store, sql, eng = _real_text(pg_dsn, make_pg_store, "real-text", musique, hotpot)
    try:
        # the same first pass as the cache's, from the graph read through SQL: BM25 over
        # every chunk's text, the power iteration over the whole graph's matrix (without
        # one the push reads round by round: other rounding, a rare swap of close scores)
        chunks = [c for d in sql.document_ids() for c in sql.document_chunks(d)]
        bm25 = LexicalIndex((c.id, c.text) for c in chunks)
        matrix = GraphMatrix.build(*sql.whole_graph())
        sql.lexical_search = lambda text, k, where=None: bm25.search(text, k)  # type: ignore[method-assign]
        sql.graph_matrix = lambda: matrix  # type: ignore[attr-defined]
        ref = ReMindRAG(embeddings=HashEmbedder(DIM), store=sql)
        eng.retrieve("warm up")  # the first query reads the graph once
        assert store._graph_cache is not None and store._graph_cache.reloads == 1
        qs = _questions(musique, hotpot)
        for i, q in enumerate(qs * 2):
            bound = MAX_STATEMENTS if i < len(qs) else MAX_STATEMENTS_AGAIN
            before = store.statements
            r = eng.retrieve(q)
            assert store.statements - before <= bound, (i, q, store.statements - before)
            assert r.chunks and r.trace.costs.total_tokens == 0
            # the same graph read through SQL: the same prior, the same chunks
            same = ref.retrieve(q)
            assert [c.chunk.id for c in r.chunks] == [c.chunk.id for c in same.chunks], q
        assert store._graph_cache.reloads == 1  # no write: never read again
        # memory written (each question's gold passages named), then every question asked
        # again: replay's reads of memory come from the cache too
        for item in [q for qs, _ in (musique, hotpot) for q in qs[:5]]:
            r = eng.retrieve(item["question"])
            support = [c.id for g in item["gold_pids"] for c in store.document_chunks(g)]
            assert eng.memorize(r.trace_id, supporting=support).applied
        spent = []
        for q in qs:
            before = store.statements
            r = eng.retrieve(q)
            spent.append(store.statements - before)
            same = ref.retrieve(q)
            assert [c.chunk.id for c in r.chunks] == [c.chunk.id for c in same.chunks], q
        assert max(spent) <= MAX_STATEMENTS_AFTER_MEMORY, spent
        assert store._graph_cache.reloads == 1
    finally:
        store.close()
        sql.close()


TEXTS = [
    ("d1", "Marie Curie discovered polonium in Paris. Pierre Curie worked with Marie Curie."),
    ("d2", "Paris is the capital of France. The Seine flows through Paris."),
    ("d3", "Lyon is a city in France. Paul Bocuse cooked in Lyon."),
]


def _spread(store: PostgresGraphStore) -> dict[str, list[str]]:
    """Every node's spread links through one snapshot (the cache when the store has one)."""
    nodes, _ = store.whole_graph()
    with store.snapshot() as view:
        return view.spread_links(sorted(n.id for n in nodes) + ["e-missing"])


def _sql(dsn: str, ns: str) -> dict[str, list[str]]:
    with PostgresGraphStore(dsn, namespace=ns, graph_cache=False) as sql:
        return _spread(sql)


def _graph(store: PostgresGraphStore) -> tuple:
    """Every node's edges, row and embedding through one snapshot (the cache's, filled by
    the first call and read by the next ones, when the store has one)."""
    nodes = store.whole_graph()[0]
    ids = sorted(n.id for n in nodes)
    chunks = sorted(n.id for n in nodes if n.kind == "chunk")
    with store._cursor() as cur:  # every name ever given, and one never
        cur.execute("SELECT DISTINCT name FROM rr_entity_names")
        names = sorted(r[0] for r in cur.fetchall()) + ["nobody at all"]
    with store.snapshot() as view:
        edges = view.adjacency(ids)
        rows = view.get_nodes(ids), view.get_chunks(chunks), view.find_entities_by_name(names)
        return edges, rows, view.node_embeddings(ids).round(5).tolist()


def _searches(view: PostgresGraphStore, probes: list[Any]) -> list[tuple[list, list]]:
    """Each probe's top 5 entities, anchors and both: their cosines (to 4 places), and the
    ids of those above the 5th (which of the nodes tied with the 5th makes the cut is the
    store's choice: SQL's arbitrary, the cache's by id)."""
    out = []
    for q in probes:
        for kinds in (("entity",), ("anchor",), ("entity", "anchor")):
            hits = [(n, round(s, 4)) for n, s in view.search(q, 5, kinds)]
            last = hits[-1][1] if len(hits) == 5 else -2.0
            out.append(([s for _, s in hits], [n for n, s in hits if s > last + 1e-4]))
    return out


def _exact_sql(view: PostgresGraphStore) -> PostgresGraphStore:
    """The same snapshot read through SQL, seed search a full scan (exact, not HNSW)."""
    sql = copy.copy(view)
    sql._graph_cache = None
    with sql._cursor() as cur:
        cur.execute("SET LOCAL enable_indexscan = off")
    return sql


def _same_search(reader: PostgresGraphStore) -> bool:
    """Unfiltered seed search through a snapshot (from the cache's vectors when the store
    has them) finds what an exact scan in SQL finds in that snapshot."""
    nodes, _ = reader.whole_graph()
    ids = sorted(n.id for n in nodes if n.kind != "chunk")
    with reader.snapshot() as view:
        probes = list(view.node_embeddings(ids[:: max(1, len(ids) // 6)]))
        probes.append(HashEmbedder(DIM).embed(["Who cooked in Lyon?"])[0])
        return _searches(view, probes) == _searches(_exact_sql(view), probes)


def _matrix(g: Any) -> tuple:
    """A whole-graph matrix as plain data: rows, entries, degrees, anchors, entities."""
    a = g.adjacency.tocoo()
    entries = sorted(zip(a.row.tolist(), a.col.tolist(), a.data.tolist()))
    return (
        list(g.ids),
        entries,
        g.degree.tolist(),
        g.anchors.tolist(),
        g.entities.tolist(),
    )


def _same_matrix(reader: PostgresGraphStore) -> bool:
    """The matrix the prior's push runs over, through a snapshot (the cache's), is the one
    the embedded store builds from the same graph read through SQL in that snapshot."""
    with reader.snapshot() as view:
        nodes, edges = view.whole_graph()
        return _matrix(view.graph_matrix()) == _matrix(GraphMatrix.build(nodes, edges))


def _same_graph(reader: PostgresGraphStore, dsn: str, ns: str) -> bool:
    with PostgresGraphStore(dsn, namespace=ns, graph_cache=False) as sql:
        same = _graph(reader) == _graph(sql) and _spread(reader) == _spread(sql)
        assert not isinstance(sql, MatrixStore)  # its push reads round by round
    assert isinstance(reader, MatrixStore)
    return same and _same_search(reader) and _same_matrix(reader)


def test_a_graph_write_from_another_process_is_seen_by_the_next_query(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    ns = "cache-follows"
    reader = make_pg_store(ns)
    writer = ReMindRAG(embeddings=HashEmbedder(DIM), store=make_pg_store(ns))
    writer.insert([Document(i, t) for i, t in TEXTS[:2]])
    first = _spread(reader)
    assert first == _sql(pg_dsn, ns)  # first read: the whole graph
    assert _same_graph(reader, pg_dsn, ns)  # and every node's edges, row, embedding
    cache = reader._graph_cache
    assert cache is not None and (cache.reloads, cache.catch_ups) == (1, 0)
    # another connection adds a document, replaces one, deletes one: each seen next time,
    # caught up from the change sequence (only the touched nodes read again)
    writer.insert([Document("d3", TEXTS[2][1])])
    got = _spread(reader)
    assert len(got) > len(first) and sum(map(len, got.values())) > sum(map(len, first.values()))
    assert got == _sql(pg_dsn, ns) and (cache.reloads, cache.catch_ups) == (1, 1)
    assert _same_graph(reader, pg_dsn, ns)
    writer.insert([Document("d2", "Paris is the capital of France. Notre-Dame stands in Paris.")])
    assert _spread(reader) == _sql(pg_dsn, ns) and cache.catch_ups == 2
    assert _same_graph(reader, pg_dsn, ns)
    # a memory write from another connection; one that adds a learned link: in the node's
    # edges at the next query, never in the spread
    r = writer.retrieve("Who cooked in Lyon?")
    writer.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
    anchors = sorted(n.id for n in reader.whole_graph()[0] if n.kind == "anchor")
    link = Edge("l-test", anchors[0], anchors[-1], "learned", "")
    writer.store.update_memory([], lambda current: current, links=[link])
    assert _spread(reader) == _sql(pg_dsn, ns) and cache.catch_ups == 3
    with reader.snapshot() as view:
        assert link in view.adjacency([anchors[0]])[anchors[0]]
    assert _same_graph(reader, pg_dsn, ns)
    # another process deletes a document
    out = _run(pg_dsn, ns, "print(s.delete_documents(['d1']))")
    assert "'documents': 1" in out
    after = _spread(reader)
    assert after == _sql(pg_dsn, ns) and not any("Curie" in k for k in after)
    assert _same_graph(reader, pg_dsn, ns) and cache.reloads == 1
    # and through the engine: the deleted document's passage is no longer found
    eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=reader)
    found = eng.retrieve("Who discovered polonium?").chunks
    assert all(c.chunk.doc_id != "d1" for c in found)


def test_an_older_snapshot_keeps_its_own_graph_while_the_cache_moves_on(
    make_pg_store: Callable[..., PostgresGraphStore],
) -> None:
    ns = "cache-snapshots"
    reader = make_pg_store(ns)
    writer = ReMindRAG(embeddings=HashEmbedder(DIM), store=make_pg_store(ns))
    writer.insert([Document(i, t) for i, t in TEXTS[:2]])
    nodes, _ = reader.whole_graph()
    ids = sorted(n.id for n in nodes)
    with reader.snapshot() as old:
        before = old.spread_links(ids)
        matrix = _matrix(old.graph_matrix())
        writer.delete(["d1"])
        with reader.snapshot() as new:  # catches the shared copy up past ``old``
            now = new.spread_links(ids)
            without = _matrix(new.graph_matrix())
            assert without != matrix
        cache = reader._graph_cache
        assert cache is not None and (cache.reloads, cache.catch_ups) == (1, 1)
        assert now != before  # the deleted document's nodes lost their links
        assert old.spread_links(ids) == before  # read through SQL in its own snapshot
        assert _matrix(old.graph_matrix()) == matrix  # the matrix kept for it
    # a snapshot older than the cache, whose matrix was never built: read through SQL
    with reader.snapshot() as old:
        writer.insert([Document("d1", TEXTS[0][1])])
        with reader.snapshot() as new:
            new.spread_links(ids)
        nodes, edges = old.whole_graph()
        assert _matrix(old.graph_matrix()) == _matrix(GraphMatrix.build(nodes, edges))
        assert _matrix(old.graph_matrix()) == without  # d1 was not back yet
    assert cache.reloads == 1 and cache.catch_ups == 2


def test_a_dropped_namespace_or_a_gap_in_the_changes_reads_the_graph_again(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    ns = "cache-reload"
    reader = make_pg_store(ns)
    writer = make_pg_store(ns)
    eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=writer)
    eng.insert([Document(i, t) for i, t in TEXTS])
    assert _spread(reader) == _sql(pg_dsn, ns)
    cache = reader._graph_cache
    assert cache is not None and cache.reloads == 1
    eng.delete(["d3"])
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # the change rows trimmed away
        conn.execute("DELETE FROM rr_graph_changes WHERE namespace = %s", (ns,))
    assert _spread(reader) == _sql(pg_dsn, ns) and cache.reloads == 2
    writer.drop_namespace()
    assert all(v == [] for v in _spread(reader).values())
    assert cache.reloads == 3 and cache.links == {}


def test_graph_cache_must_be_a_bool(pg_dsn: str) -> None:
    bad: Any = "yes"
    with pytest.raises(ConfigError, match="graph_cache must be True or False"):
        PostgresGraphStore(pg_dsn, namespace="cache-arg", graph_cache=bad)


def test_threads_reading_while_another_connection_writes_see_their_own_snapshot(
    make_pg_store: Callable[..., PostgresGraphStore],
) -> None:
    """Each query's cached reads equal what SQL reads in the same snapshot, while threads
    share one store (one cache) and another connection inserts, replaces and deletes."""
    ns = "cache-threads"
    reader = make_pg_store(ns)
    writer = ReMindRAG(embeddings=HashEmbedder(DIM), store=make_pg_store(ns))
    writer.insert([Document(i, t) for i, t in TEXTS])
    ids = sorted({n.id for n in reader.whole_graph()[0]} | {"e-missing"})
    done = threading.Event()
    failures: list[str] = []
    checked = [0]

    def write() -> None:
        versions = ["Paris is the capital of France.", TEXTS[1][1]]
        try:
            for i in range(12):
                writer.insert([Document("d2", versions[i % 2] + f" Round {i}.")])
                if i % 3 == 0:
                    writer.delete(["d3"])
                else:
                    writer.insert([Document("d3", TEXTS[2][1])])
        finally:
            done.set()

    def read() -> None:
        while not done.is_set() or checked[0] < 8:
            with reader.snapshot() as view:
                cached = view.spread_links(ids)
                sql = copy.copy(view)
                sql._graph_cache = None  # the same snapshot, read through SQL
                if cached != sql.spread_links(ids):
                    failures.append(f"snapshot at change {view._graph_seq}")
                anchors = [n.id for n in view.whole_graph()[0] if n.kind == "anchor"]
                probes = list(view.node_embeddings(anchors[:2]))
                if _searches(view, probes) != _searches(_exact_sql(view), probes):
                    failures.append(f"search at change {view._graph_seq}")
                nodes, edges = view.whole_graph()
                if _matrix(view.graph_matrix()) != _matrix(GraphMatrix.build(nodes, edges)):
                    failures.append(f"matrix at change {view._graph_seq}")
                # BM25 over this snapshot's chunks (or, in a snapshot older than the
                # cache's texts without an index kept for it, the full-text rank)
                q = "Paris France Lyon Seine round"
                got = view.lexical_search(q, 10)
                if not _same_hits([got], [_bm25(sql, q)]) and [
                    (c, round(x, 6)) for c, x in got
                ] != _ts_rank(sql, q):
                    failures.append(f"lexical at change {view._graph_seq}")
                checked[0] += 1

    threads = [threading.Thread(target=read) for _ in range(3)]
    threads.append(threading.Thread(target=write))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures and checked[0] >= 8
    cache = reader._graph_cache
    assert cache is not None and cache.reloads == 1 and cache.catch_ups >= 2
    assert cache.lexical_builds >= 2


def test_full_text_rank_leaves_the_planner_settings_as_they_were(
    make_pg_store: Callable[..., PostgresGraphStore], hotpot: Rows
) -> None:
    """The lexical statement turns sequential scans off for itself alone (in the query's
    snapshot and outside one) and ranks as the plain statement does (without the graph
    cache: with it, BM25 from the cache answers)."""
    store = make_pg_store("lexical-index", graph_cache=False)
    ReMindRAG(embeddings=HashEmbedder(DIM), store=store).insert(_docs(hotpot))
    q = _questions(hotpot)[0]
    plain = (
        "WITH q AS (SELECT to_tsquery('english', %(q)s) AS q) "
        "SELECT id, ts_rank(tsv, q.q, 1)::float8 FROM rr_chunks, q "
        "WHERE namespace = %(ns)s AND tsv @@ q.q ORDER BY 2 DESC, id LIMIT 10"
    )
    with store._cursor() as cur:
        cur.execute(plain, {"q": or_query(q), "ns": "lexical-index"})
        want = [(r[0], round(r[1], 6)) for r in cur.fetchall() if r[1] > 0]
    assert want
    assert [(c, round(s, 6)) for c, s in store.lexical_search(q, 10)] == want
    with store.snapshot() as view:
        assert [(c, round(s, 6)) for c, s in view.lexical_search(q, 10)] == want
        with view._cursor() as cur:
            assert cur.execute("SHOW enable_seqscan").fetchone() == ("on",)
    with store._cursor() as cur:
        assert cur.execute("SHOW enable_seqscan").fetchone() == ("on",)


# A memory write with named support bridges every named passage the walk never reached
# by breadth-first search from the subgraph: it read each node's edges with a statement of
# its own (issue 49, round 3: 5,230 statements for 30 writes at 3 K passages, up to 1.1 s
# one write); now a level at a time from the graph cache. And the check that the passages
# come back (the question asked again) read the live store, every read a statement; now
# through a snapshot, from the cache. What is left a write: claiming the trace, its edges'
# and memory rows locked and written, the journal, the trace marked, the question asked
# again (once, or again after each learned link). Counted on these 18 writes 2026-11-29:
# 13-28 a write, 15 on average (23-46, 27 on average, with the check on the live store).
MAX_WRITE_STATEMENTS = 60
MEAN_WRITE_STATEMENTS = 20


def _node_by_node(store: PostgresGraphStore, subgraph: dict, chunk_ids: list, depth: int) -> dict:
    """The bridge as it was read before: breadth first, ``neighbors`` node by node."""
    from collections import deque

    from remindrag_integrations.core.ids import anchor_of, is_chunk

    targets = {anchor_of(c): c for c in chunk_ids if c not in subgraph}
    prev: dict = {n: (None, None) for n in subgraph if not is_chunk(n)}
    frontier, found = deque((n, 0) for n in prev), []
    while frontier and len(found) < len(targets):
        node, d = frontier.popleft()
        if d >= depth:
            continue
        for e in store.neighbors(node):
            w = e.other(node)
            if w in prev or is_chunk(w):
                continue
            prev[w] = (node, e.id)
            found += [w] if w in targets else []
            frontier.append((w, d + 1))
    out = {}
    for anchor in found:
        contains = next(e for e in store.neighbors(anchor) if e.kind == "contains")
        out[targets[anchor]] = (anchor, contains.id)
        node = anchor
        while node not in subgraph:
            out[node] = prev[node]
            node = prev[node][0]
    return out


def test_a_memory_write_bridges_from_memory_as_it_did_node_by_node(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore], musique: Rows, hotpot: Rows
) -> None:
    from remindrag_integrations.core.memory.write import bridge_paths

    store, sql, eng = _real_text(pg_dsn, make_pg_store, "real-write", musique, hotpot)
    try:
        eng.retrieve("warm up")
        depth = 4  # memory.max_bridge_hops, the default
        bridged, spent_all = 0, []
        for qs, _ in (musique, hotpot):
            for item in qs[:12]:
                got = eng.retrieve(item["question"])
                support = [c.id for g in item["gold_pids"] for c in store.document_chunks(g)]
                parents = got.trace.parents
                outside = [c for c in support if c not in parents]
                want = _node_by_node(sql, parents, outside, depth)
                before = store.statements
                assert bridge_paths(store, parents, outside, depth) == want, item["question"]
                # at most one a level (and one for the anchors found): the nodes whose edges
                # an earlier write's learned links changed, read again
                assert store.statements - before <= depth + 1, store.statements - before
                bridged += any(c in want for c in outside)
                before = store.statements
                w = eng.memorize(got.trace_id, supporting=support)
                spent = store.statements - before
                assert w.applied and spent <= MAX_WRITE_STATEMENTS, (item["question"], spent)
                spent_all.append(spent)
        assert sum(spent_all) <= MEAN_WRITE_STATEMENTS * len(spent_all), spent_all
        assert bridged >= 3  # writes that had to find a path outside the walk's subgraph
    finally:
        store.close()
        sql.close()


# Memory vectors in the graph cache (issue 49, round 4): a query's neighbourhood reads (the
# walk's and replay's, with the memory of every edge) come from process memory, caught up by
# ``rr_memory_changes``; every memory write of any process names the edges it wrote.


def _memory_rows(dsn: str, ns: str) -> dict[str, list[float]]:
    with psycopg.connect(dsn) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        rows = conn.execute(
            "SELECT edge_id, vec FROM rr_edge_memory WHERE namespace = %s", (ns,)
        ).fetchall()
    return {e: [round(float(x), 5) for x in v.to_list()] for e, v in rows}


def _cached_memory(store: PostgresGraphStore) -> dict[str, list[float]] | None:
    """The cache's memory rows as of a new snapshot (caught up by opening it)."""
    with store.snapshot() as view:
        view.memory(["no-such-edge"])
        cache = view._graph_cache
        assert cache is not None and cache.seq == view._graph_seq
        if cache.memory is None:
            return None
        return {e: [round(float(x), 5) for x in v] for e, v in cache.memory.items()}


def _hoods(view: PostgresGraphStore, ids: list[str], q: Any) -> list[dict]:
    """Every node's neighbourhood as plain data, alone and following memory."""
    from remindrag_integrations.core.frontier import Follow

    out = []
    for follow in (None, Follow(q, 0.0, max_nodes=500)):
        got = view.neighborhoods(ids, follow)
        out.append(
            {
                n: (
                    h.node,
                    h.edges,
                    h.memory.round(5).tolist(),
                    h.embedding.round(5).tolist(),
                    sorted(h.remembered),
                )
                for n, h in got.items()
            }
        )
    return out


def _same_hoods(reader: PostgresGraphStore, q: Any) -> bool:
    """Neighbourhoods through a snapshot (the cache's) are what SQL reads in that snapshot,
    and the cache's memory rows are the table's."""
    ids = sorted(n.id for n in reader.whole_graph()[0])
    with reader.snapshot() as view:
        cached = _hoods(view, ids, q)
        sql = copy.copy(view)
        sql._graph_cache = None
        return cached == _hoods(sql, ids, q)


def _run(dsn: str, ns: str, code: str) -> str:
    """``code`` in another process, ``s`` the store (namespace ``ns``)."""
    prog = (
        "import sys, numpy as np; from remindrag_integrations.stores.postgres import "
        "PostgresGraphStore as P; s = P(sys.argv[1], namespace=sys.argv[2]);" + code + "; s.close()"
    )
    out = subprocess.run(
        [sys.executable, "-c", prog, dsn, ns],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_memory_written_by_any_process_is_in_the_next_querys_neighbourhoods(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    ns = "cache-memory"
    make_pg_store(ns)
    reader = CountingPg(pg_dsn, namespace=ns)
    writer = ReMindRAG(embeddings=HashEmbedder(DIM), store=make_pg_store(ns))
    writer.insert([Document(i, t) for i, t in TEXTS])
    q = HashEmbedder(DIM).embed(["Who cooked in Lyon?"])[0]
    try:
        assert _cached_memory(reader) == {} and _same_hoods(reader, q)
        cache = reader._graph_cache
        assert cache is not None and cache.whole
        # another connection's memory write: named in the change, read again alone
        r = writer.retrieve("Who cooked in Lyon?")
        w = writer.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
        assert w.applied
        held = _cached_memory(reader)
        assert held and held == _memory_rows(pg_dsn, ns) and cache.reloads == 1
        assert _same_hoods(reader, q)
        # through a snapshot, the neighbourhoods (following memory too) cost no statement
        ids = sorted(n.id for n in reader.whole_graph()[0])
        with reader.snapshot() as view:
            view.memory(ids[:1])  # caught up
            before = reader.statements
            got = view.neighborhoods(ids, None)
            assert reader.statements == before and set(got) == set(ids)
            assert np.any([h.memory.any() for h in got.values()])
        # another process decays memory (every row), imports a row, then forgets the
        # memory of a document (deleted with its edges, whose memory rows go)
        _run(pg_dsn, ns, "print(s.decay_memory(0.5))")
        assert _cached_memory(reader) == _memory_rows(pg_dsn, ns) and _same_hoods(reader, q)
        edge = sorted(e.id for e in reader.whole_graph()[1] if e.kind != "contains")[0]
        _run(pg_dsn, ns, f"s.import_memory({{{edge!r}: list(np.eye({DIM})[3])}})")
        assert edge in (_cached_memory(reader) or {}) and _same_hoods(reader, q)
        remembered = set(_memory_rows(pg_dsn, ns))
        d3 = {e.id for e in reader.whole_graph()[1] if "Lyon" in e.text or "Bocuse" in e.text}
        assert remembered & d3  # memory on the document about to go
        writer.delete(["d3"])
        assert _cached_memory(reader) == _memory_rows(pg_dsn, ns) and _same_hoods(reader, q)
        # the same text again: the same edge ids, without memory (no stale row comes back)
        writer.insert([Document("d3", TEXTS[2][1])])
        assert not set(_cached_memory(reader) or {}) & d3
        assert _cached_memory(reader) == _memory_rows(pg_dsn, ns) and _same_hoods(reader, q)
        # reset, from another process: every row gone
        _run(pg_dsn, ns, "print(s.reset_memory())")
        assert _cached_memory(reader) == {} == _memory_rows(pg_dsn, ns)
        assert cache.reloads == 1  # each change caught up, never the whole graph again
    finally:
        reader.close()


def test_too_much_memory_to_hold_is_read_through_sql(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore], monkeypatch: Any
) -> None:
    from remindrag_integrations.stores.postgres import graph_cache

    ns = "cache-memory-big"
    make_pg_store(ns)
    writer = ReMindRAG(embeddings=HashEmbedder(DIM), store=make_pg_store(ns))
    writer.insert([Document(i, t) for i, t in TEXTS])
    r = writer.retrieve("Who cooked in Lyon?")
    writer.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
    monkeypatch.setattr(graph_cache, "PRELOAD_MEMORY", 1)
    reader = CountingPg(pg_dsn, namespace=ns)
    q = HashEmbedder(DIM).embed(["Who cooked in Lyon?"])[0]
    try:
        assert _cached_memory(reader) is None and _same_hoods(reader, q)
        ids = sorted(n.id for n in reader.whole_graph()[0])
        with reader.snapshot() as view:
            view.memory(ids[:1])
            before = reader.statements
            view.neighborhoods(ids, None)
            assert reader.statements == before + 1  # one statement, as without the cache
        # a later memory write is not held either, and reads stay right
        r = writer.retrieve("Who discovered polonium?")
        writer.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
        assert _cached_memory(reader) is None and _same_hoods(reader, q)
    finally:
        reader.close()


def test_a_namespace_too_big_to_hold_whole_keeps_the_neighbourhoods_it_read(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore], monkeypatch: Any
) -> None:
    """Over ``PRELOAD_EDGES`` a node's neighbourhood is read through SQL the first time (one
    statement for the frontier), then from the cache, with memory written meanwhile."""
    from remindrag_integrations.stores.postgres import graph_cache

    ns = "cache-memory-partial"
    make_pg_store(ns)
    writer = ReMindRAG(embeddings=HashEmbedder(DIM), store=make_pg_store(ns))
    writer.insert([Document(i, t) for i, t in TEXTS])
    monkeypatch.setattr(graph_cache, "PRELOAD_EDGES", 1)
    reader = CountingPg(pg_dsn, namespace=ns)
    q = HashEmbedder(DIM).embed(["Who cooked in Lyon?"])[0]
    ids = sorted(n.id for n in reader.whole_graph()[0])
    try:
        with reader.snapshot() as view:
            view.memory(ids[:1])
            cache = view._graph_cache
            assert cache is not None and not cache.whole and cache.memory == {}
            before = reader.statements
            first = view.neighborhoods(ids, None)
            assert reader.statements == before + 1
            again = view.neighborhoods(ids, None)
            assert reader.statements == before + 1  # held now
            assert {n: (h.node, h.edges) for n, h in first.items()} == {
                n: (h.node, h.edges) for n, h in again.items()
            }
        r = writer.retrieve("Who cooked in Lyon?")
        writer.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
        assert _cached_memory(reader) == _memory_rows(pg_dsn, ns)
        assert _same_hoods(reader, q) and _same_hoods(reader, q)
    finally:
        reader.close()


def test_the_cached_vectors_search_as_a_brute_force_scan_does() -> None:
    """Vectors (a matrix per kind, rows reused after a drop) against a plain scan, ties by
    id, after puts, drops, a node changing kind and a zero vector."""
    from remindrag_integrations.stores.postgres.graph_cache import Vectors

    rng = np.random.default_rng(7)
    ids = [f"e-{i:04x}" if i % 3 else f"a-{i:04x}" for i in range(60)]
    kinds = ["entity" if i.startswith("e-") else "anchor" for i in ids]
    rows = [rng.normal(size=8).astype(np.float32) for _ in ids]
    rows[5] = rows[7].copy()  # a tie
    vecs = Vectors(ids, kinds, rows, 8)
    held = {i: (k, r) for i, k, r in zip(ids, kinds, rows)}
    for i in ids[::4]:
        vecs.drop(i)
        del held[i]
    for j in range(6):  # reuse of freed rows, a zero row, a node that changes kind
        node = f"e-new{j}"
        vec = np.zeros(8, np.float32) if j == 0 else rng.normal(size=8).astype(np.float32)
        vecs.put(node, "entity", vec)
        held[node] = ("entity", vec)
    vecs.put(ids[1], "anchor", held[ids[1]][1])
    held[ids[1]] = ("anchor", held[ids[1]][1])

    def brute(q: np.ndarray, k: int, want: tuple[str, ...]) -> list[tuple[str, float]]:
        out = []
        for i, (kd, r) in held.items():
            if kd in want:
                norm = float(np.linalg.norm(r))
                out.append((i, float(r @ q) / norm if norm else 0.0))
        return sorted(out, key=lambda t: (-t[1], t[0]))[:k]

    assert len(vecs) == len(held)
    for _ in range(20):
        q = rng.normal(size=8).astype(np.float32)
        q /= np.linalg.norm(q)
        for want in (("entity",), ("anchor",), ("entity", "anchor")):
            for k in (1, 5, 200):
                got = vecs.search(q, k, want)
                exp = brute(q, k, want)
                true = dict(brute(q, 10**6, want))  # each node's cosine
                # the same scores in the same places; each id with its own score (which of
                # two nodes within a float's last bits comes first is not asked)
                assert len(got) == len(exp) and len({i for i, _ in got}) == len(got)
                assert np.allclose([s for _, s in got], [s for _, s in exp], atol=1e-5)
                assert all(abs(true[i] - s) < 1e-5 for i, s in got), (want, k)
    q = np.asarray(held[ids[7]][1]) / np.linalg.norm(held[ids[7]][1])
    assert [i for i, _ in vecs.search(q, 2, ("anchor", "entity"))] == sorted([ids[5], ids[7]])
    assert vecs.get("e-nothing") is None and np.array_equal(vecs.get(ids[2]), held[ids[2]][1])


# --- the lexical half: BM25 over the cached chunk texts ----------------------------------------

LEX_QUERIES = [
    "Who discovered polonium in Paris?",
    "Which river flows through the capital of France?",
    "Who cooked in Lyon?",
    "Notre-Dame cathedral",
    "zebra",  # no word known: nothing
]


def _lexical(store: Any, where: dict | None = None) -> list[list[tuple[str, float]]]:
    return [store.lexical_search(q, 10, where) for q in LEX_QUERIES]


def _same_hits(got: list[list[tuple[str, float]]], want: list[list[tuple[str, float]]]) -> bool:
    """The same chunks in the same order for every query, scores equal to float32 precision."""
    return len(got) == len(want) and all(
        [c for c, _ in g] == [c for c, _ in w]
        and all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for (_, a), (_, b) in zip(g, w))
        for g, w in zip(got, want)
    )


def test_lexical_search_through_a_snapshot_is_the_embedded_stores_bm25_without_a_statement(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    from remindrag_integrations.stores import InMemoryGraphStore

    docs = [Document(i, t, metadata={"n": n}) for n, (i, t) in enumerate(TEXTS)]
    mem = InMemoryGraphStore()
    ReMindRAG(embeddings=HashEmbedder(DIM), store=mem).insert(docs)
    make_pg_store("lexical-cache")  # an empty namespace
    store = CountingPg(pg_dsn, namespace="lexical-cache")
    try:
        ReMindRAG(embeddings=HashEmbedder(DIM), store=store).insert(docs)
        want, only = _lexical(mem), {"n": {"$gte": 1}}
        assert any(want) and not want[-1]
        with store.snapshot() as view:
            view.spread_links(["e-missing"])  # the cache caught up to this snapshot
            before = store.statements
            assert _same_hits(_lexical(view), want)
            assert store.statements == before  # no statement: BM25 in process
            got = _lexical(view, only)
            # the passing documents, one statement a search that found a chunk
            assert store.statements - before == sum(1 for w in want if w)
            assert _same_hits(got, _lexical(mem, only))
            assert all(c.startswith("c-") for hits in got for c, _ in hits)
            assert {store.get_chunk(c).doc_id for hits in got for c, _ in hits} == {"d2", "d3"}
            assert view.lexical_search(LEX_QUERIES[0], 0) == []
        assert _same_hits(_lexical(store), want)  # outside a snapshot: through one
        cache = store._graph_cache
        assert cache is not None and cache.lexical_builds == 1 and cache.reloads == 1
    finally:
        store.close()


def test_lexical_search_sees_chunks_another_store_object_or_process_writes(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    """A chunk inserted, replaced or deleted by another store object (and process) is in
    the next query's lexical search, the index built again once per change of the texts
    (a memory write changes none: not again)."""
    from remindrag_integrations.stores import InMemoryGraphStore

    ns = "lexical-follows"
    reader = make_pg_store(ns)
    writer = ReMindRAG(embeddings=HashEmbedder(DIM), store=make_pg_store(ns))
    mem = ReMindRAG(embeddings=HashEmbedder(DIM), store=InMemoryGraphStore())

    def both(op: str, *args: Any) -> None:
        getattr(writer, op)(*args)
        getattr(mem, op)(*args)

    both("insert", [Document(i, t) for i, t in TEXTS[:2]])
    assert _same_hits(_lexical(reader), _lexical(mem.store))
    cache = reader._graph_cache
    assert cache is not None and cache.lexical_builds == 1
    both("insert", [Document("d3", TEXTS[2][1])])  # inserted
    assert _same_hits(_lexical(reader), _lexical(mem.store))
    assert any(c.startswith("c-") for c, _ in reader.lexical_search("Bocuse", 5))
    assert (cache.reloads, cache.catch_ups, cache.lexical_builds) == (1, 1, 2)
    replaced = "Paris is the capital of France. Notre-Dame cathedral stands in Paris."
    both("insert", [Document("d2", replaced)])  # replaced
    assert _same_hits(_lexical(reader), _lexical(mem.store))
    assert not reader.lexical_search("Seine", 5) and reader.lexical_search("cathedral", 5)
    assert cache.lexical_builds == 3
    r = writer.retrieve("Who cooked in Lyon?")  # a memory write: no chunk changes
    writer.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
    assert _same_hits(_lexical(reader), _lexical(mem.store)) and cache.lexical_builds == 3
    out = _run(pg_dsn, ns, "print(s.delete_documents(['d1']))")
    assert "'documents': 1" in out
    mem.delete(["d1"])  # deleted by another process
    assert _same_hits(_lexical(reader), _lexical(mem.store))
    assert reader.lexical_search("polonium", 5) == []
    assert cache.reloads == 1 and cache.lexical_builds == 4


def _ts_rank(store: PostgresGraphStore, q: str) -> list[tuple[str, float]]:
    """The full-text rank of the SQL path, as a plain statement."""
    with store._cursor() as cur:
        cur.execute(
            "WITH q AS (SELECT to_tsquery('english', %(q)s) AS q) "
            "SELECT id, ts_rank(tsv, q.q, 1)::float8 FROM rr_chunks, q "
            "WHERE namespace = %(ns)s AND tsv @@ q.q ORDER BY 2 DESC, id LIMIT 10",
            {"q": or_query(q), "ns": store.namespace},
        )
        return [(r[0], round(r[1], 6)) for r in cur.fetchall() if r[1] > 0]


def _bm25(store: PostgresGraphStore, q: str) -> list[tuple[str, float]]:
    """BM25 over every chunk's text, read through SQL."""
    chunks = [c for d in store.document_ids() for c in store.document_chunks(d)]
    return LexicalIndex((c.id, c.text) for c in chunks).search(q, 10)


def test_lexical_search_is_the_full_text_rank_without_the_texts_in_the_cache(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A namespace too big to hold whole, a store without the cache, and a snapshot older
    than the cache's texts rank by ``ts_rank`` in SQL."""
    from remindrag_integrations.stores.postgres import graph_cache

    ns = "lexical-sql"
    writer = ReMindRAG(embeddings=HashEmbedder(DIM), store=make_pg_store(ns))
    writer.insert([Document(i, t) for i, t in TEXTS[:2]])
    q = "Who discovered polonium in Paris?"
    with PostgresGraphStore(pg_dsn, namespace=ns, graph_cache=False) as sql:
        want = _ts_rank(sql, q)
        assert want and [(c, round(s, 6)) for c, s in sql.lexical_search(q, 10)] == want
    monkeypatch.setattr(graph_cache, "PRELOAD_TEXTS", 1)
    big = PostgresGraphStore(pg_dsn, namespace=ns)
    try:
        with big.snapshot() as view:
            assert [(c, round(s, 6)) for c, s in view.lexical_search(q, 10)] == want
        cache = big._graph_cache
        assert cache is not None and cache.reloads == 1 and cache.texts is None
        assert cache.lexical_builds == 0 and cache.links  # the graph held, not the texts
    finally:
        big.close()
    monkeypatch.undo()
    reader = make_pg_store(ns + "-old")
    ReMindRAG(embeddings=HashEmbedder(DIM), store=reader).insert(
        [Document(i, t) for i, t in TEXTS[:2]]
    )
    other = ReMindRAG(embeddings=HashEmbedder(DIM), store=PostgresGraphStore(pg_dsn, ns + "-old"))
    cache = reader._graph_cache
    assert cache is not None
    try:
        with reader.snapshot() as old:
            assert _same_hits([old.lexical_search(q, 10)], [_bm25(old, q)])
            assert cache.lexical_builds == 1
            other.insert([Document("d3", TEXTS[2][1])])
            with reader.snapshot() as new:  # the cache's texts move past ``old``
                assert new.lexical_search("Bocuse", 5)
            # the index built for ``old`` is kept for it: BM25 over its own chunks
            assert old.lexical_search("Bocuse", 5) == []
            assert _same_hits([old.lexical_search(q, 10)], [_bm25(old, q)])
            assert cache.lexical_builds == 2
        other.insert([Document("d2", "Paris is the capital of France.")])  # nobody searches
        with reader.snapshot() as old:  # the cache stays behind it: ``old`` reads nothing
            other.insert([Document("d2", TEXTS[1][1])])
            with reader.snapshot() as new:  # one catch-up past ``old``
                assert new.lexical_search("Seine", 5)
            # no index was built for ``old``: full-text rank, in its own snapshot
            assert old.lexical_search("Seine", 5) == []
            assert [(c, round(s, 6)) for c, s in old.lexical_search(q, 10)] == _ts_rank(old, q)
            assert cache.lexical_builds == 3
    finally:
        other.store.close()  # type: ignore[attr-defined]


def test_a_snapshot_between_a_change_and_its_undoing_gets_its_own_matrix(
    make_pg_store: Callable[..., PostgresGraphStore],
) -> None:
    """A document replaced, then put back: the cache catches up over both at once (its links
    as before), and a snapshot taken in between still gets the graph it saw."""
    ns = "cache-undone"
    reader = make_pg_store(ns)
    writer = ReMindRAG(embeddings=HashEmbedder(DIM), store=make_pg_store(ns))
    writer.insert([Document(i, t) for i, t in TEXTS])
    with reader.snapshot() as view:
        before = _matrix(view.graph_matrix())
    writer.insert([Document("d2", "Paris is the capital of France. Notre-Dame stands in Paris.")])
    with reader.snapshot() as between:  # opened now, read after the cache moved on
        writer.insert([Document("d2", TEXTS[1][1])])
        with reader.snapshot() as after:
            assert _matrix(after.graph_matrix()) == before
        cache = reader._graph_cache
        assert cache is not None and cache.catch_ups == 1  # both changes at once
        nodes, edges = between.whole_graph()
        want = _matrix(GraphMatrix.build(nodes, edges))
        assert want != before and _matrix(between.graph_matrix()) == want


def test_a_big_kind_is_searched_through_the_ann_index_as_on_the_embedded_store(
    monkeypatch: Any,
) -> None:
    """At ``ann.THRESHOLD`` nodes of a kind the cached vectors answer through an HNSW index
    (the embedded store's, :mod:`stores.ann`), re-scored exactly: it finds the exact top
    hits, follows puts and drops made after it was built, and never returns a dropped node."""
    from remindrag_integrations.stores import ann
    from remindrag_integrations.stores.postgres.graph_cache import Vectors

    if not ann.available():  # (found, not imported: onnxruntime must come first)
        pytest.skip("the ann extra (usearch) is not installed")
    monkeypatch.setattr(ann, "THRESHOLD", 200)
    rng = np.random.default_rng(11)
    n = 600
    ids = [f"e-{i:05x}" for i in range(n)]
    rows = rng.normal(size=(n, 16)).astype(np.float32)
    vecs = Vectors(ids, ["entity"] * n, list(rows), 16)
    held = dict(zip(ids, rows))

    def exact(q: np.ndarray, k: int) -> list[str]:
        sims = {i: float(v @ q) / float(np.linalg.norm(v)) for i, v in held.items()}
        return sorted(sims, key=lambda i: -sims[i])[:k]

    def unit(v: np.ndarray) -> np.ndarray:
        return (v / np.linalg.norm(v)).astype(np.float32)

    queries = [unit(rng.normal(size=16)) for _ in range(40)]
    found = [vecs.search(q, 5, ("entity",)) for q in queries]
    assert vecs.mats["entity"].ann is not None  # built by the first search
    recall = np.mean(
        [len({i for i, _ in f} & set(exact(q, 5))) / 5 for f, q in zip(found, queries)]
    )
    assert recall >= 0.9, recall
    for f, q in zip(found, queries):  # each hit with its exact cosine
        assert all(
            abs(s - float(held[i] @ q) / float(np.linalg.norm(held[i]))) < 1e-5 for i, s in f
        )
    for i in ids[:100]:  # drops after the build: never found again
        vecs.drop(i)
        del held[i]
    for j in range(20):  # puts after the build: found by their own vector
        node = f"e-new{j:02d}"
        v = rng.normal(size=16).astype(np.float32)
        vecs.put(node, "entity", v)
        held[node] = v
        assert vecs.search(unit(v), 1, ("entity",))[0][0] == node
    moved = ids[200]  # a vector replaced: found at its new place
    v = rng.normal(size=16).astype(np.float32)
    vecs.put(moved, "entity", v)
    held[moved] = v
    assert vecs.search(unit(v), 1, ("entity",))[0][0] == moved
    for q in queries:
        got = [i for i, _ in vecs.search(q, 10, ("entity",))]
        assert not set(got) & set(ids[:100])
        assert len(set(got) & set(exact(q, 10))) >= 8
