"""What one whole zero-token query costs in store round trips, on both stores: the embedded
store's method calls, PostgreSQL's SQL statements. Upper bounds, counted, never timed, so a
change that multiplies a query's reads (an N+1 loop, a batched read undone) fails here. And
the same query on both stores returns the same chunks when both take the same path."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pg_fixture
import psycopg
import pytest

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.stores import InMemoryGraphStore
from remindrag_integrations.stores.postgres import PostgresGraphStore
from remindrag_integrations.testing import HashEmbedder

pg_dsn = pg_fixture.pg_dsn
make_pg_store = pg_fixture.make_pg_store

DIM = 32
# a whole zero-token query (prior, seeds, replay, walk, rank, the trace saved) on the HotpotQA
# sample (120 passages), measured 2026-11-25 (issue 25): embedded 79-145 store calls (the
# in-process store reads node by node); PostgreSQL 38-57 statements and 3.0-4.8 K rows (a
# move reads its target in one statement, rank its chunks in one; 44-64 statements before,
# the same rows); ~1.25x room
MAX_STORE_CALLS = 180
MAX_STATEMENTS = 70
MAX_ROWS = 6_000
# the store's read and write methods (bookkeeping like ``dim`` is not a round trip)
_CALLS = frozenset(
    """get_node get_nodes get_chunk get_chunks get_edge node_embeddings neighbors neighborhoods
    adjacency search search_many lexical_search find_entity_by_name find_entities_by_name
    memory whole_graph graph_matrix save_trace load_trace update_memory add_graph document_hash
    document_chunks""".split()
)


class CountingStore(InMemoryGraphStore):
    """The embedded store, counting calls of its read and write methods from outside (not
    the calls they make of each other), in one list that its snapshot views (shallow copies,
    which a retrieve reads through) share."""

    _depth = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally = [0]

    @property
    def calls(self) -> int:
        return self.tally[0]

    def __getattribute__(self, name: str) -> Any:
        method = super().__getattribute__(name)
        if name not in _CALLS or not callable(method):
            return method
        get = super().__getattribute__

        def counted(*args: Any, **kwargs: Any) -> Any:
            depth = get("_depth")
            object.__setattr__(self, "_depth", depth + 1)
            get("tally")[0] += depth == 0
            try:
                return method(*args, **kwargs)
            finally:
                object.__setattr__(self, "_depth", depth)

        return counted


class LocalPrior(InMemoryGraphStore):
    """The embedded store without its whole-graph matrix: the prior's push reads through the
    walk, as on PostgreSQL."""

    graph_matrix = None


class _Cursor:
    def __init__(
        self, cur: psycopg.Cursor, count: Callable[[], None], rows: Callable[[int], None]
    ) -> None:
        self._cur, self._count, self._rows = cur, count, rows

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._count()
        self._cur.execute(*args, **kwargs)
        return self

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        self._count()
        return self._cur.executemany(*args, **kwargs)

    def fetchall(self) -> list[Any]:
        out = self._cur.fetchall()
        self._rows(len(out))
        return out

    def fetchone(self) -> Any:
        out = self._cur.fetchone()
        self._rows(out is not None)
        return out

    def __iter__(self) -> Iterator[Any]:
        for row in self._cur:
            self._rows(1)
            yield row

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


class CountingPg(PostgresGraphStore):
    """The PostgreSQL store, counting the SQL statements it executes and the rows it reads
    (in one list that its snapshot views, shallow copies, share)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally = [0, 0]

    @property
    def statements(self) -> int:
        return self.tally[0]

    @property
    def rows(self) -> int:
        return self.tally[1]

    def _count(self) -> None:
        self.tally[0] += 1

    def _rows(self, n: int) -> None:
        self.tally[1] += n

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        with super()._cursor() as cur:
            yield _Cursor(cur, self._count, self._rows)

    def _tx(self, fn: Callable[[Any], Any], retries: int = 8) -> Any:
        return super()._tx(lambda cur: fn(_Cursor(cur, self._count, self._rows)), retries)


def _engine(store: Any, hotpot: tuple[list[dict], dict[str, dict]]) -> ReMindRAG:
    _, rows = hotpot
    eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=store)
    eng.insert([Document(pid, f"{r['title']}. {r['text']}") for pid, r in sorted(rows.items())])
    return eng


def _questions(hotpot: tuple[list[dict], dict[str, dict]]) -> list[str]:
    return [q["question"] for q in hotpot[0]]


def test_a_whole_query_on_the_embedded_store_makes_few_store_calls(
    hotpot: tuple[list[dict], dict[str, dict]],
) -> None:
    store = CountingStore()
    eng = _engine(store, hotpot)
    eng.retrieve("warm up")  # the first query builds the lexical index and graph matrix
    for q in _questions(hotpot):
        before = store.calls
        r = eng.retrieve(q)
        assert r.chunks and r.trace.costs.total_tokens == 0
        assert store.calls - before <= MAX_STORE_CALLS, (q, store.calls - before)


@pytest.mark.postgres
def test_a_whole_query_on_postgres_executes_few_statements_and_reads_few_rows(
    pg_dsn: str,
    make_pg_store: Callable[..., PostgresGraphStore],
    hotpot: tuple[list[dict], dict[str, dict]],
) -> None:
    make_pg_store("round-trips")  # an empty namespace
    store = CountingPg(pg_dsn, namespace="round-trips")
    eng = _engine(store, hotpot)
    ref = _engine(LocalPrior(), hotpot)
    matrix = _engine(InMemoryGraphStore(), hotpot)  # the push over its graph matrix
    try:
        for q in _questions(hotpot):
            before, rows = store.statements, store.rows
            r = eng.retrieve(q, prior={"lexical_weight": 0.0})
            assert store.statements - before <= MAX_STATEMENTS, (q, store.statements - before)
            assert store.rows - rows <= MAX_ROWS, (q, store.rows - rows)
            # the same path on both stores (no lexical half: BM25 and full-text rank differ;
            # the local PageRank on both): the same chunks
            got = [c.chunk.id for c in r.chunks]
            same = ref.retrieve(q, prior={"lexical_weight": 0.0})
            assert got == [c.chunk.id for c in same.chunks], q
            same = matrix.retrieve(q, prior={"lexical_weight": 0.0})
            assert got == [c.chunk.id for c in same.chunks], q
    finally:
        store.close()


# an insert's store calls per batch of documents besides a document hash each (what changed):
# one name lookup (two embedding ahead), one nearest-entity search, one write; measured
# 2026-11-27: the name lookups were one call per distinct name (~400 per batch of 40 passages)
MAX_INSERT_CALLS_PER_BATCH = 8


@pytest.mark.parametrize("ahead", [False, True])
def test_an_insert_looks_names_up_once_per_batch(
    hotpot: tuple[list[dict], dict[str, dict]], ahead: bool
) -> None:
    _, rows = hotpot
    docs = [Document(pid, f"{r['title']}. {r['text']}") for pid, r in sorted(rows.items())]
    store = CountingStore()
    cfg = {"insert_batch_documents": 40, "embed_ahead": ahead}
    eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=store, index_config=cfg)
    report = eng.insert(docs)
    batches = -(-len(docs) // 40)
    assert report.entities_added > 10 * batches  # many names per batch
    per_doc = 2 * len(docs)  # document_hash: planning, and the commit's check
    assert store.calls - per_doc <= MAX_INSERT_CALLS_PER_BATCH * batches, store.calls


@pytest.mark.postgres
@pytest.mark.parametrize("ahead", [False, True])
def test_an_insert_on_postgres_looks_names_up_in_one_statement_per_batch(
    pg_dsn: str,
    make_pg_store: Callable[..., PostgresGraphStore],
    hotpot: tuple[list[dict], dict[str, dict]],
    ahead: bool,
) -> None:
    _, rows = hotpot
    docs = [Document(pid, f"{r['title']}. {r['text']}") for pid, r in sorted(rows.items())]
    make_pg_store(f"insert-trips-{ahead}")
    store = CountingPg(pg_dsn, namespace=f"insert-trips-{ahead}")
    try:
        cfg = {"insert_batch_documents": 40, "embed_ahead": ahead}
        eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=store, index_config=cfg)
        looked_up: list[int] = []
        real = store.find_entities_by_name

        def counted(names: Any) -> dict[str, str]:
            looked_up.append(len(names))
            before = store.statements
            try:
                return real(names)
            finally:  # the batch's names in one statement (ahead, the writes run beside it)
                assert ahead or store.statements - before == 1

        def one_by_one(name: str) -> str | None:
            raise AssertionError(f"{name!r} looked up alone")

        store.find_entities_by_name = counted  # type: ignore[method-assign]
        store.find_entity_by_name = one_by_one  # type: ignore[method-assign]
        eng.insert(docs)
        batches = -(-len(docs) // 40)
        # one read of many names per batch; embedding ahead, the build reads them again
        assert len(looked_up) == batches * (2 if ahead else 1) and min(looked_up) > 100
    finally:
        store.close()
