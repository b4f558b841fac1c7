"""The bulk-load path of the PostgreSQL store: a large ``add_graph`` batch is COPYed into
tables stripped of what is cheaper to build once than to maintain row by row — the
dimension's HNSW index, the edge and document btrees, the full-text index, the edges'
foreign keys — and those are built again afterwards, all in the batch's own transaction.

Maintaining an index row by row costs a tree descent (HNSW: a graph search) per row and a
foreign key a lookup per row; building either once over all rows is a sort or one join.
Drop, COPY and rebuild commit together: a failure anywhere rolls all of it back (the old
indexes, constraints and rows are untouched) and raises :class:`BulkLoadError` naming the
phase, so no half-loaded graph is ever visible. Readers of the tables the batch stripped
(every tenant of the database) wait for the commit, then see the whole batch. A table is
stripped only when the batch is large next to what it already holds (``rebuild_ratio``);
otherwise its rows go in with its indexes maintained as usual.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg import errors

from ...core.errors import BulkLoadError, ConfigError, UnknownNodeError
from .sql import SCHEMA_LOCK, hnsw_index_sql

_SIZE = re.compile(r"[1-9][0-9]{0,6}(kB|MB|GB)")
ANALYZE_ROWS = 10_000  # below it the planner's defaults serve as well as fresh statistics
AUTO_MIN_MB, AUTO_MAX_MB = 64, 8192  # the range of memory="auto"
_RETRYABLE = (errors.DeadlockDetected, errors.SerializationFailure)


@dataclass(frozen=True)
class Deferred:
    """A secondary index or foreign key of ``table`` that a bulk load drops and builds again
    (``drop`` and ``create`` are its DDL, ``create`` the same as the schema's)."""

    kind: str  # "index" or "fkey"
    table: str
    name: str
    drop: str
    create: str


def _index(table: str, name: str, body: str) -> Deferred:
    drop, create = f"DROP INDEX {name}", f"CREATE INDEX {name} ON {table} {body}"
    return Deferred("index", table, name, drop, create)


def _fkey(table: str, name: str, body: str) -> Deferred:
    return Deferred(
        "fkey",
        table,
        name,
        f"ALTER TABLE {table} DROP CONSTRAINT {name}",
        f"ALTER TABLE {table} ADD CONSTRAINT {name} {body}",
    )


# what a bulk load strips, by table (the schema in sql.py creates the same objects)
DEFERRED = (
    _index("rr_chunks", "rr_chunks_doc", "(namespace, doc_id)"),
    _index("rr_chunks", "rr_chunks_tsv", "USING gin (tsv)"),
    _index("rr_nodes", "rr_nodes_doc", "(namespace, doc_id)"),
    _fkey(
        "rr_edges",
        "rr_edges_namespace_u_fkey",
        "FOREIGN KEY (namespace, u) REFERENCES rr_nodes (namespace, id) ON DELETE CASCADE",
    ),
    _fkey(
        "rr_edges",
        "rr_edges_namespace_v_fkey",
        "FOREIGN KEY (namespace, v) REFERENCES rr_nodes (namespace, id) ON DELETE CASCADE",
    ),
    _index("rr_edges", "rr_edges_u", "(namespace, u)"),
    _index("rr_edges", "rr_edges_v", "(namespace, v)"),
)


@dataclass(frozen=True)
class BulkOptions:
    """When and how a batch is bulk-loaded.

    ``rows``: a batch with at least this many nodes + edges takes the bulk path (``None``:
    never). ``memory``: ``maintenance_work_mem`` of the session that builds the indexes, a
    PostgreSQL size (``"4GB"``) or ``"auto"``: sized for the HNSW graph of the vectors to
    index (about 1.6 KB per 128-d vector at ``m`` 16, between 64 MB and 8 GB); too small and
    the HNSW build spills to disk and slows down many-fold. ``workers``: parallel maintenance
    workers per index build (the server caps them at its ``max_parallel_workers``).
    ``m`` and ``ef_construction``: the HNSW build parameters of indexes this store creates.
    ``rebuild_ratio``: a table's indexes (and the edges' foreign keys) are dropped and built
    again when it holds fewer than this many times the batch's new rows (the HNSW index:
    vectors), else maintained row by row; ``math.inf``: always, ``0``: never.
    ``progress``: called as ``progress(phase, seconds)`` when each phase of a bulk load ends
    (``"nodes"``, ``"edges"``, ``"index rr_edges_u"``, ``"hnsw"``, ``"analyze"``, ...).
    """

    rows: int | None = 20_000
    memory: str = "auto"
    workers: int = 2
    m: int = 16
    ef_construction: int = 64
    rebuild_ratio: float = 4.0
    progress: Callable[[str, float], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.rows is not None and self.rows < 1:
            raise ConfigError("bulk rows must be >= 1 or None")
        if not 2 <= self.m <= 100 or not 4 <= self.ef_construction <= 1000:
            raise ConfigError("hnsw m must be in [2, 100] and ef_construction in [4, 1000]")
        if self.ef_construction < 2 * self.m:
            raise ConfigError("hnsw ef_construction must be >= 2 * m")
        if not 0 <= self.workers <= 64:
            raise ConfigError("bulk workers must be in [0, 64]")
        if not isinstance(self.memory, str) or not (
            self.memory == "auto" or _SIZE.fullmatch(self.memory)
        ):
            raise ConfigError(
                f"bulk memory must be 'auto' or a PostgreSQL size like '1GB': {self.memory!r}"
            )
        if not isinstance(self.rebuild_ratio, int | float) or not self.rebuild_ratio >= 0:
            raise ConfigError(f"bulk rebuild_ratio must be >= 0: {self.rebuild_ratio!r}")
        if self.progress is not None and not callable(self.progress):
            raise ConfigError("bulk progress must be a callable (phase, seconds) or None")

    def memory_for(self, vectors: int, dim: int) -> str:
        """``maintenance_work_mem`` for an HNSW build over ``vectors`` rows of ``dim``."""
        if self.memory != "auto":
            return self.memory
        per_vector = 4 * dim + 32 * self.m + 256  # the vector, layer-0 links, element header
        mb = -(-vectors * per_vector * 5 // 4 // 2**20)  # + 25 % for upper layers and slack
        return f"{min(AUTO_MAX_MB, max(AUTO_MIN_MB, mb))}MB"


@dataclass
class BulkLoad:
    """One batch's way through the store: which phases it times and which indexes and
    constraints it dropped (``plan``) and must build again in :meth:`finish`."""

    cur: psycopg.Cursor | None
    opts: BulkOptions
    dim: int | None = None
    hnsw_vectors: int = 0  # > 0: the HNSW index of ``dim`` was dropped; rows it will index
    dropped: list[Deferred] = field(default_factory=list)
    rows: int = 0

    @classmethod
    def off(cls, opts: BulkOptions) -> BulkLoad:
        """A batch on the ordinary path: phases run untimed, nothing is dropped."""
        return cls(None, opts)

    @classmethod
    def start(
        cls,
        cur: psycopg.Cursor,
        opts: BulkOptions,
        dim: int | None,
        new: dict[str, int],
    ) -> BulkLoad:
        """Prepare a bulk batch in the open transaction: drop what the batch outgrows.
        ``new``: the batch's rows per table, and under ``"vectors"`` its non-chunk nodes."""
        load = cls(cur, opts, dim, rows=new.get("rr_nodes", 0) + new.get("rr_edges", 0))
        with load.phase("prepare"):
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            held = _held(cur, [d.table for d in DEFERRED])
            for table in ("rr_chunks", "rr_nodes", "rr_edges"):  # the order writers lock them
                if table == "rr_nodes":
                    load._drop_hnsw(new.get("vectors", 0))
                if not _outgrown(held[table], new.get(table, 0), opts.rebuild_ratio):
                    continue
                for item in DEFERRED:
                    if item.table == table and _exists(cur, item):
                        cur.execute(item.drop)
                        load.dropped.append(item)
        return load

    def _drop_hnsw(self, vectors: int) -> None:
        """Drop the HNSW index of ``dim`` when the batch's ``vectors`` are worth a rebuild."""
        if self.cur is None or self.dim is None or vectors == 0:
            return
        dim = int(self.dim)
        row = self.cur.execute(
            f"SELECT count(*) FROM rr_nodes WHERE dim = {dim} AND kind <> 'chunk'"
        ).fetchone()
        have = int(row[0]) if row else 0
        if _outgrown(have, vectors, self.opts.rebuild_ratio):
            self.cur.execute(f"DROP INDEX IF EXISTS rr_nodes_hnsw_{dim}")
            self.hnsw_vectors = have + vectors

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time one phase and report it; a database error in it becomes a
        :class:`BulkLoadError` (deadlocks and serialisation failures pass through, to be
        retried with the whole transaction)."""
        if self.cur is None:
            yield
            return
        t = time.perf_counter()
        try:
            yield
        except (*_RETRYABLE, errors.ForeignKeyViolation, errors.UniqueViolation):
            raise  # retried with the whole transaction, or the caller's typed error
        except psycopg.Error as exc:
            raise BulkLoadError(
                f"bulk load failed in phase {name!r}, nothing of the batch was written: {exc}"
            ) from exc
        if self.opts.progress is not None:
            self.opts.progress(name, time.perf_counter() - t)

    def finish(self) -> None:
        """Refresh the planner's statistics, then build what :meth:`start` dropped (btrees,
        foreign keys, then HNSW) with the session's ``maintenance_work_mem`` and parallel
        workers raised for this transaction. Still inside the batch's transaction.

        Statistics first: a foreign key is checked by one anti-join of the edges against the
        nodes, and with the estimates of the tables before the COPY the planner picks a
        nested loop of index probes (43 s at 3 M edges) over a hash join (9 s)."""
        cur = self.cur
        if cur is None:
            return
        if self.rows >= ANALYZE_ROWS or self.dropped or self.hnsw_vectors:
            with self.phase("analyze"):
                cur.execute("ANALYZE rr_nodes, rr_edges, rr_chunks, rr_entity_names")
        if self.dropped or self.hnsw_vectors:
            mem = self.opts.memory_for(self.hnsw_vectors, self.dim or 0)
            cur.execute("SELECT set_config('maintenance_work_mem', %s, true)", (mem,))
            cur.execute(
                "SELECT set_config('max_parallel_maintenance_workers', %s, true)",
                (str(self.opts.workers),),
            )
        for item in self.dropped:
            with self.phase(f"{item.kind} {item.name}"):
                try:
                    cur.execute(item.create)
                except errors.ForeignKeyViolation as exc:
                    raise UnknownNodeError(
                        f"an edge joins unknown node(s): {exc.diag.message_detail}"
                    ) from None
        if self.hnsw_vectors and self.dim is not None:
            with self.phase("hnsw"):
                cur.execute(hnsw_index_sql(self.dim, self.opts.m, self.opts.ef_construction))


def _outgrown(held: float, new: int, ratio: float) -> bool:
    """Whether a batch of ``new`` rows is worth rebuilding an index over ``held`` + new."""
    return new > 0 and ratio > 0 and (ratio == math.inf or held < ratio * new)


def _held(cur: psycopg.Cursor, tables: list[str]) -> dict[str, float]:
    """Rows each table holds, as the planner last estimated (0 when never estimated)."""
    cur.execute(
        "SELECT relname, greatest(reltuples, 0) FROM pg_class "
        "WHERE relkind = 'r' AND relname = ANY(%s) AND relnamespace = "
        "(SELECT oid FROM pg_namespace WHERE nspname = current_schema())",
        (sorted(set(tables)),),
    )
    found = {r[0]: float(r[1]) for r in cur}
    return {t: found.get(t, 0.0) for t in tables}


def _exists(cur: psycopg.Cursor, item: Deferred) -> bool:
    if item.kind == "index":
        row = cur.execute("SELECT to_regclass(%s)", (item.name,)).fetchone()
        return row is not None and row[0] is not None
    row = cur.execute(
        "SELECT 1 FROM pg_constraint WHERE conname = %s AND conrelid = to_regclass(%s)",
        (item.name, item.table),
    ).fetchone()
    return row is not None
