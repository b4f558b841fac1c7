"""Connections of the PostgreSQL store: the pool, transactions with retry, the schema,
and :class:`PgBase`, the part every other part of the store builds on."""

from __future__ import annotations

import copy
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Self, TypeVar

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors, sql
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format, TransactionStatus
from psycopg.types import TypeInfo

from ...core.arguments import storable
from ...core.errors import ConfigError, EmbeddingError, StoreError, UnknownNodeError
from .bulk import BulkOptions
from .graph_cache import GraphCache
from .sql import LAST_SCHEMA_OBJECT, SCHEMA, SCHEMA_LOCK, SCHEMA_VERSION, hnsw_index_sql

T = TypeVar("T")


class _Pool:
    """A small thread-safe connection pool (autocommit connections; transactions explicit)."""

    def __init__(self, dsn: str, size: int, configure: Callable[[psycopg.Connection], None]):
        self.dsn, self.size, self.configure = dsn, size, configure
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None or conn.closed:
            conn = psycopg.connect(self.dsn, autocommit=True)
            self.configure(conn)
        try:
            yield conn
        finally:
            healthy = not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
            with self._lock:
                if healthy and len(self._idle) < self.size:
                    self._idle.append(conn)
                    conn = None  # type: ignore[assignment]
            if conn is not None:
                conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class _Pinned:
    """The one connection of a snapshot, inside its open transaction (see ``snapshot``)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        yield self.conn

    def close(self) -> None:
        return None


class PgBase:
    """Connections, transactions and the namespace's dimension; the store's other parts
    (graph writes, reads, memory, traces and settings) are mixins over it."""

    def __init__(
        self,
        dsn: str,
        namespace: str = "default",
        dim: int | None = None,
        *,
        pool_size: int = 4,
        max_traces: int | None = 10_000,
        journal: bool = False,
        ef_search: int = 800,
        bulk: BulkOptions | None = None,
        graph_cache: bool = True,
    ) -> None:
        if not isinstance(namespace, str) or not namespace or not storable(namespace):
            raise ConfigError("namespace must be a non-empty string without NUL or surrogates")
        self.dsn, self.namespace = dsn, namespace
        self.max_traces, self.journal, self.ef_search = max_traces, journal, int(ef_search)
        self._dim: int | None = None
        self._saved_traces = 0
        self.bulk = bulk if bulk is not None else BulkOptions()
        if not isinstance(self.bulk, BulkOptions):
            raise ConfigError("bulk must be a BulkOptions")
        if not isinstance(graph_cache, bool):
            raise ConfigError(
                f"graph_cache must be True or False, not {type(graph_cache).__name__}"
            )
        # the graph a query reads, in memory, caught up by the change sequence (.graph_cache)
        self._graph_cache = GraphCache() if graph_cache else None
        self._graph_seq: int | None = None  # a snapshot view's change sequence number
        self._bind_matrix()
        self._create_schema(dim)
        self._pool = _Pool(dsn, pool_size, lambda conn: _configure(conn, self.ef_search))

    def _create_schema(self, dim: int | None) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                with conn.transaction():
                    # DDL only when missing: IF NOT EXISTS still locks tables busy elsewhere
                    last = conn.execute("SELECT to_regclass(%s)", (LAST_SCHEMA_OBJECT,))
                    if last.fetchone() == (None,):
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                        conn.execute(SCHEMA)
                    conn.execute(
                        "INSERT INTO rr_namespaces (namespace, dim, schema_version) "
                        "VALUES (%s, NULL, %s) ON CONFLICT DO NOTHING",
                        (self.namespace, SCHEMA_VERSION),
                    )
                    row = conn.execute(
                        "SELECT dim FROM rr_namespaces WHERE namespace = %s", (self.namespace,)
                    ).fetchone()
                    self._dim = row[0] if row else None
                if dim is not None:  # own transaction: row lock, then the schema lock
                    with conn.transaction():
                        self._set_dim(conn.cursor(), int(dim))
        except psycopg.OperationalError as exc:
            raise StoreError(f"cannot open PostgreSQL store {_redact(self.dsn)}: {exc}") from exc

    def _set_dim(self, cur: psycopg.Cursor, dim: int) -> int:
        """Fix the namespace's dimension (first writer wins) and make sure its index exists."""
        row = cur.execute(
            "SELECT dim FROM rr_namespaces WHERE namespace = %s FOR UPDATE", (self.namespace,)
        ).fetchone()
        current = row[0] if row else None
        if current is None:
            cur.execute(
                "UPDATE rr_namespaces SET dim = %s WHERE namespace = %s", (dim, self.namespace)
            )
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            cur.execute(hnsw_index_sql(dim, self.bulk.m, self.bulk.ef_construction))
            current = dim
        elif current != dim:
            raise EmbeddingError(f"embedding dimension {dim} != store dimension {current}")
        self._dim = current
        return current

    @contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor]:
        """A cursor outside any explicit transaction: each statement commits on its own."""
        try:
            with self._pool.connection() as conn, conn.cursor(binary=True) as cur:
                yield cur
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL store {_redact(self.dsn)}: {exc}") from exc

    def _tx(self, fn: Callable[[psycopg.Cursor], T], retries: int = 8) -> T:
        """Run ``fn`` in one transaction, retrying on deadlock / serialisation failure."""
        for attempt in range(retries):
            try:
                with (
                    self._pool.connection() as conn,
                    conn.transaction(),
                    conn.cursor(binary=True) as cur,
                ):
                    return fn(cur)
            except (errors.DeadlockDetected, errors.SerializationFailure):
                if attempt == retries - 1:
                    raise
                time.sleep(random.uniform(0, 0.01 * 2**attempt))
            except psycopg.OperationalError as exc:
                raise StoreError(f"PostgreSQL store {_redact(self.dsn)}: {exc}") from exc
        raise AssertionError("unreachable")

    @contextmanager
    def snapshot(self) -> Iterator[Self]:
        """A read-only view of the namespace as of now: every read through it runs in one
        ``REPEATABLE READ READ ONLY`` transaction, so it sees one snapshot of the database
        whatever other connections commit meanwhile (writers do not wait for it). The
        transaction ends with the block; keep the block short (it holds a connection, and
        an old snapshot holds back vacuum)."""
        try:
            with self._pool.connection() as conn:
                # the snapshot is taken by the first statement, not by BEGIN: take it now,
                # with the graph's change sequence number as of it (.graph_cache), in the
                # same round trip (two statements, no parameters: the simple protocol)
                cur = conn.execute(
                    sql.SQL(
                        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT coalesce("
                        "(SELECT seq FROM rr_graph_seq WHERE namespace = {}), 0)"
                    ).format(sql.Literal(self.namespace))
                )
                cur.nextset()
                row = cur.fetchone()
                try:
                    view = copy.copy(self)
                    view._pool = _Pinned(conn)  # type: ignore[assignment]
                    view._graph_seq = int(row[0]) if row else None
                    view._bind_matrix()
                    yield view
                finally:
                    if not conn.closed:
                        conn.execute("ROLLBACK")
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL store {_redact(self.dsn)}: {exc}") from exc

    def _cache(self) -> GraphCache | None:
        """The store's graph cache, caught up to this snapshot view's change, or None (not
        a snapshot, no cache, or a snapshot older than the cache: read through SQL)."""
        cache, seq = self._graph_cache, self._graph_seq
        if cache is None or seq is None:
            return None
        with cache.lock:
            return cache if cache.at(self._cursor, self.namespace, seq) else None

    def _bind_matrix(self) -> None:
        """With the graph cache the store keeps the whole graph as a matrix
        (:class:`~remindrag_integrations.core.store.MatrixStore`: ``graph_matrix()``, from
        the cache's links, :meth:`~.reads.Reads.matrix_of_cache`), so the prior's push runs
        over it as on the embedded store; without the cache it has no ``graph_matrix`` and
        the push reads the graph round by round."""
        if self._graph_cache is not None:
            self.graph_matrix = self.matrix_of_cache  # type: ignore[attr-defined]

    def close(self) -> None:
        """Close the pooled connections (the store reopens them on next use)."""
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dim(self) -> int | None:
        if self._dim is None:
            with self._cursor() as cur:
                row = cur.execute(
                    "SELECT dim FROM rr_namespaces WHERE namespace = %s", (self.namespace,)
                ).fetchone()
            self._dim = row[0] if row else None
        return self._dim


class _NumpyVectorLoader(Loader):
    """Binary ``vector`` -> float32 ndarray (exact: no decimal round trip)."""

    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)


def _configure(conn: psycopg.Connection, ef_search: int) -> None:
    register_vector(conn)
    info = TypeInfo.fetch(conn, "vector")
    if info is not None:
        conn.adapters.register_loader(info.oid, _NumpyVectorLoader)
    # HNSW candidate list (recall vs latency); pgvector >= 0.8: keep scanning the index until
    # k rows pass the namespace / kind filters
    for setting in (
        f"SET hnsw.ef_search = {int(ef_search)}",
        "SET hnsw.iterative_scan = strict_order",
    ):
        try:
            conn.execute(setting)
        except psycopg.Error:
            pass


def _bulk(
    cur: psycopg.Cursor,
    table: str,
    cols: Sequence[str],
    rows: list[tuple],
    conflict: str,
    types: Sequence[str] | None = None,
) -> list[tuple]:
    """COPY ``rows`` into a temporary twin of ``table``, then INSERT ... SELECT ``conflict``.
    With the column ``types``, the COPY is binary (vectors go as raw floats, not text)."""
    if not rows:
        return []
    stage = f"_stage_{table}"
    collist = ", ".join(cols)
    cur.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {stage} "
        f"(LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
    )
    binary = " (FORMAT BINARY)" if types else ""
    with cur.copy(f"COPY {stage} ({collist}) FROM STDIN{binary}") as copy:
        if types:
            copy.set_types(list(types))
        for row in rows:
            copy.write_row(row)
    cur.execute(f"INSERT INTO {table} ({collist}) SELECT {collist} FROM {stage} {conflict}")
    out = cur.fetchall() if cur.description else []
    cur.execute(f"TRUNCATE {stage}")
    return out


def _get(found: dict[str, T], key: str, what: str) -> T:
    try:
        return found[key]
    except KeyError:
        raise UnknownNodeError(f"unknown {what} id {key!r}") from None


def _redact(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    if "://" in dsn and "@" in dsn:
        scheme, rest = dsn.split("://", 1)
        cred, host = rest.rsplit("@", 1)
        return f"{scheme}://{cred.split(':', 1)[0]}@{host}"
    return dsn
