"""The bulk-load path of the PostgreSQL store: a large ``add_graph`` batch is written by COPY
with the dimension's HNSW index dropped and rebuilt once afterwards, in the batch's own
transaction.

Maintaining HNSW row by row costs milliseconds per node; building it once over all rows is an
order of magnitude cheaper per row. The drop, the COPY and the rebuild commit together: a
failure anywhere rolls all of it back (the old index and rows are untouched), and readers of
``rr_nodes`` (every tenant of the database) wait for the commit, then see the whole batch.
The index is rebuilt only when the batch is large next to what the index already holds
(``REBUILD_RATIO``); otherwise the rows are COPYed with the index maintained as usual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg

from ...core.errors import ConfigError
from .sql import SCHEMA_LOCK, hnsw_index_sql

_SIZE = re.compile(r"[1-9][0-9]{0,6}(kB|MB|GB)")
REBUILD_RATIO = 4
ANALYZE_ROWS = 10_000  # below it the planner's defaults serve as well as fresh statistics  # rebuild when the index holds fewer than RATIO x the batch's new nodes


@dataclass(frozen=True)
class BulkOptions:
    """When and how a batch is bulk-loaded.

    ``rows``: a batch with at least this many nodes + edges takes the bulk path (``None``:
    never). ``memory``: ``maintenance_work_mem`` for the index build (the HNSW graph must fit
    in it, about 1 KB per 128-d node). ``workers``: parallel build workers. ``m`` and
    ``ef_construction``: the HNSW build parameters of indexes this store creates.
    """

    rows: int | None = 20_000
    memory: str = "1GB"
    workers: int = 2
    m: int = 16
    ef_construction: int = 64

    def __post_init__(self) -> None:
        if self.rows is not None and self.rows < 1:
            raise ConfigError("bulk rows must be >= 1 or None")
        if not 2 <= self.m <= 100 or not 4 <= self.ef_construction <= 1000:
            raise ConfigError("hnsw m must be in [2, 100] and ef_construction in [4, 1000]")
        if self.ef_construction < 2 * self.m:
            raise ConfigError("hnsw ef_construction must be >= 2 * m")
        if not 0 <= self.workers <= 64:
            raise ConfigError("bulk workers must be in [0, 64]")
        if not isinstance(self.memory, str) or not _SIZE.fullmatch(self.memory):
            raise ConfigError(f"bulk memory must be a PostgreSQL size like '1GB': {self.memory!r}")


def begin(cur: psycopg.Cursor, opts: BulkOptions, dim: int | None, new_nodes: int) -> bool:
    """Prepare a bulk batch in the open transaction; drop the HNSW index of ``dim`` when the
    batch is worth a rebuild. Returns whether :func:`end` must rebuild it."""
    if dim is None or new_nodes == 0:
        return False
    held = cur.execute(f"SELECT count(*) FROM rr_nodes WHERE dim = {int(dim)}").fetchone()
    if held is None or held[0] >= REBUILD_RATIO * new_nodes:
        return False
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
    cur.execute(f"DROP INDEX IF EXISTS rr_nodes_hnsw_{int(dim)}")
    return True


def end(cur: psycopg.Cursor, opts: BulkOptions, dim: int | None, rebuild: bool, rows: int) -> None:
    """Rebuild the HNSW index of ``dim`` over every row when :func:`begin` dropped it, and
    after a batch of ``ANALYZE_ROWS`` rows or more refresh the planner's statistics (stale
    ones turn indexed lookups into scans of the whole namespace until autovacuum comes by).
    Still inside the batch's transaction."""
    if rebuild and dim is not None:
        cur.execute("SELECT set_config('maintenance_work_mem', %s, true)", (opts.memory,))
        cur.execute(
            "SELECT set_config('max_parallel_maintenance_workers', %s, true)",
            (str(opts.workers),),
        )
        cur.execute(hnsw_index_sql(dim, opts.m, opts.ef_construction))
    if rows >= ANALYZE_ROWS:
        cur.execute("ANALYZE rr_nodes, rr_edges, rr_chunks, rr_entity_names")
