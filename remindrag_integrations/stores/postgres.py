"""PostgreSQL + pgvector graph store (extra ``postgres``): one database shared by many replicas.

- Every table has a ``namespace`` column (the tenant) and every query filters by it.
- Node embeddings sit in an untyped ``vector`` column with one partial HNSW expression index per
  dimension (cosine), so seed search is an index scan and tenants may use different embedders.
- Edge memory is sparse: a row in ``rr_edge_memory`` exists only once an edge was written.
- Memory writes lock the edge rows (``SELECT ... FOR UPDATE`` in id order, one transaction),
  compute SPEC §3 with :func:`remindrag_integrations.memory.apply_updates` and write back, so
  writers in any number of processes serialise per edge and no update is lost.
- Neighbour, memory and embedding lookups are indexed point queries; the graph is never loaded.
- Foreign keys cascade node → edges → memory, so a deleted node leaves no orphan behind.

``journal=True`` also records every applied memory update (edge, operation, query vector) in
``rr_memory_journal`` in the order it was applied: an audit trail that can be replayed.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Self, TypeVar

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format, TransactionStatus
from psycopg.types import TypeInfo
from psycopg.types.json import Jsonb

from ..core.memory import math as mem
from ..core.protocols import MemoryUpdateResult
from ..core.types import Chunk, Edge, EmbeddingError, Node, NodeKind, StoreError, UnknownNodeError

T = TypeVar("T")
SCHEMA_VERSION = 1
_SCHEMA_LOCK = 0x7252_0001  # pg_advisory_xact_lock key: one schema creator at a time

_SCHEMA = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS rr_namespaces (
  namespace text PRIMARY KEY, dim integer, schema_version integer NOT NULL);
CREATE TABLE IF NOT EXISTS rr_documents (
  namespace text NOT NULL, id text NOT NULL, hash text NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}', PRIMARY KEY (namespace, id));
CREATE TABLE IF NOT EXISTS rr_chunks (
  namespace text NOT NULL, id text NOT NULL, doc_id text NOT NULL, idx integer NOT NULL,
  text text NOT NULL, start_char integer NOT NULL, end_char integer NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}', PRIMARY KEY (namespace, id));
CREATE INDEX IF NOT EXISTS rr_chunks_doc ON rr_chunks (namespace, doc_id);
CREATE TABLE IF NOT EXISTS rr_nodes (
  namespace text NOT NULL, id text NOT NULL, kind text NOT NULL, name text NOT NULL,
  doc_id text, chunk_id text, aliases text[] NOT NULL DEFAULT '{}',
  dim integer NOT NULL, embedding vector NOT NULL, PRIMARY KEY (namespace, id));
CREATE INDEX IF NOT EXISTS rr_nodes_doc ON rr_nodes (namespace, doc_id);
CREATE TABLE IF NOT EXISTS rr_entity_names (
  namespace text NOT NULL, name text NOT NULL, node_id text NOT NULL,
  PRIMARY KEY (namespace, name),
  FOREIGN KEY (namespace, node_id) REFERENCES rr_nodes (namespace, id) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS rr_entity_names_node ON rr_entity_names (namespace, node_id);
CREATE TABLE IF NOT EXISTS rr_edges (
  namespace text NOT NULL, id text NOT NULL, u text NOT NULL, v text NOT NULL,
  kind text NOT NULL, text text NOT NULL, PRIMARY KEY (namespace, id),
  FOREIGN KEY (namespace, u) REFERENCES rr_nodes (namespace, id) ON DELETE CASCADE,
  FOREIGN KEY (namespace, v) REFERENCES rr_nodes (namespace, id) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS rr_edges_u ON rr_edges (namespace, u);
CREATE INDEX IF NOT EXISTS rr_edges_v ON rr_edges (namespace, v);
CREATE TABLE IF NOT EXISTS rr_edge_memory (
  namespace text NOT NULL, edge_id text NOT NULL, vec vector NOT NULL,
  writes bigint NOT NULL DEFAULT 1, updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (namespace, edge_id),
  FOREIGN KEY (namespace, edge_id) REFERENCES rr_edges (namespace, id) ON DELETE CASCADE);
CREATE TABLE IF NOT EXISTS rr_memory_journal (
  namespace text NOT NULL, seq bigserial, edge_id text NOT NULL, op char(1) NOT NULL,
  query vector NOT NULL, at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (namespace, seq),
  FOREIGN KEY (namespace, edge_id) REFERENCES rr_edges (namespace, id) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS rr_memory_journal_edge ON rr_memory_journal (namespace, edge_id);
CREATE TABLE IF NOT EXISTS rr_traces (
  namespace text NOT NULL, id text NOT NULL, seq bigserial, data jsonb NOT NULL,
  PRIMARY KEY (namespace, id));
CREATE INDEX IF NOT EXISTS rr_traces_seq ON rr_traces (namespace, seq);
CREATE TABLE IF NOT EXISTS rr_settings (
  namespace text NOT NULL, key text NOT NULL, value jsonb NOT NULL, PRIMARY KEY (namespace, key));
"""

TABLES = (
    "rr_documents",
    "rr_chunks",
    "rr_nodes",
    "rr_entity_names",
    "rr_edges",
    "rr_edge_memory",
    "rr_memory_journal",
    "rr_traces",
    "rr_settings",
    "rr_namespaces",
)


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


class PostgresGraphStore:
    """A :class:`~remindrag_integrations.protocols.GraphStore` on PostgreSQL with pgvector.

    ``dsn`` is a libpq connection string (``postgresql://user@host:5432/db``); the schema is
    created on first use. ``dim`` pins the embedding dimension up front (else the first
    :meth:`add_graph` sets it). One store object serves one ``namespace``. ``ef_search`` is
    the HNSW candidate list of seed search (higher: better recall, slower).
    """

    def __init__(
        self,
        dsn: str,
        namespace: str = "default",
        dim: int | None = None,
        *,
        pool_size: int = 4,
        max_traces: int | None = 10_000,
        journal: bool = False,
        ef_search: int = 100,
    ) -> None:
        if not namespace:
            raise ValueError("namespace must be a non-empty string")
        self.dsn, self.namespace = dsn, namespace
        self.max_traces, self.journal, self.ef_search = max_traces, journal, int(ef_search)
        self._dim: int | None = None
        self._saved_traces = 0
        self._create_schema(dim)
        self._pool = _Pool(dsn, pool_size, lambda conn: _configure(conn, self.ef_search))

    # --- connections ------------------------------------------------------------------------
    def _create_schema(self, dim: int | None) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                with conn.transaction():
                    # DDL only when missing: IF NOT EXISTS still locks tables busy elsewhere
                    if conn.execute("SELECT to_regclass('rr_settings')").fetchone() == (None,):
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                        conn.execute(_SCHEMA)
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
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            cur.execute(
                f"CREATE INDEX IF NOT EXISTS rr_nodes_hnsw_{dim} ON rr_nodes USING hnsw "
                f"((embedding::vector({dim})) vector_cosine_ops) WHERE dim = {dim}"
            )
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

    def close(self) -> None:
        """Close the pooled connections (the store reopens them on next use)."""
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- size and documents -------------------------------------------------------------------
    @property
    def dim(self) -> int | None:
        if self._dim is None:
            with self._cursor() as cur:
                row = cur.execute(
                    "SELECT dim FROM rr_namespaces WHERE namespace = %s", (self.namespace,)
                ).fetchone()
            self._dim = row[0] if row else None
        return self._dim

    def counts(self) -> dict[str, int]:
        with self._cursor() as cur:
            cur.execute(
                """SELECT (SELECT count(*) FROM rr_documents WHERE namespace = %(ns)s),
                     (SELECT count(*) FROM rr_nodes WHERE namespace = %(ns)s AND kind = 'chunk'),
                     (SELECT count(*) FROM rr_nodes WHERE namespace = %(ns)s AND kind = 'anchor'),
                     (SELECT count(*) FROM rr_nodes WHERE namespace = %(ns)s AND kind = 'entity'),
                     (SELECT count(*) FROM rr_edges WHERE namespace = %(ns)s),
                     (SELECT count(*) FROM rr_edge_memory WHERE namespace = %(ns)s)""",
                {"ns": self.namespace},
            )
            row = cur.fetchone() or ()
        keys = ("documents", "chunks", "anchors", "entities", "edges", "touched_edges")
        return dict(zip(keys, (int(x) for x in row)))

    def document_hash(self, doc_id: str) -> str | None:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT hash FROM rr_documents WHERE namespace = %s AND id = %s",
                (self.namespace, doc_id),
            ).fetchone()
        return row[0] if row else None

    def document_ids(self) -> list[str]:
        with self._cursor() as cur:
            cur.execute(
                "SELECT id FROM rr_documents WHERE namespace = %s ORDER BY id", (self.namespace,)
            )
            return [r[0] for r in cur]

    # --- writes ---------------------------------------------------------------------------------
    def add_graph(
        self,
        *,
        documents: Sequence[tuple[str, str, dict]],
        chunks: Sequence[Chunk],
        nodes: Sequence[Node],
        embeddings: np.ndarray,
        edges: Sequence[Edge],
        entity_aliases: Mapping[str, Sequence[str]],
    ) -> None:
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if len(nodes) and (embeddings.ndim != 2 or embeddings.shape[0] != len(nodes)):
            raise EmbeddingError(f"expected {len(nodes)} embedding rows, got {embeddings.shape}")
        ns = self.namespace

        def write(cur: psycopg.Cursor) -> None:
            dim = self._set_dim(cur, int(embeddings.shape[1])) if len(nodes) else self._dim
            if documents:
                cur.executemany(
                    "INSERT INTO rr_documents (namespace, id, hash, metadata) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, id) DO UPDATE "
                    "SET hash = EXCLUDED.hash, metadata = EXCLUDED.metadata",
                    [(ns, d, h, Jsonb(dict(m))) for d, h, m in documents],
                )
            _bulk(
                cur,
                "rr_chunks",
                ("namespace", "id", "doc_id", "idx", "text", "start_char", "end_char", "metadata"),
                [
                    (ns, c.id, c.doc_id, c.index, c.text, c.start, c.end, json.dumps(c.metadata))
                    for c in chunks
                ],
                "ON CONFLICT (namespace, id) DO UPDATE SET doc_id = EXCLUDED.doc_id, "
                "idx = EXCLUDED.idx, text = EXCLUDED.text, start_char = EXCLUDED.start_char, "
                "end_char = EXCLUDED.end_char, metadata = EXCLUDED.metadata",
            )
            new = _bulk(
                cur,
                "rr_nodes",
                (
                    "namespace",
                    "id",
                    "kind",
                    "name",
                    "doc_id",
                    "chunk_id",
                    "aliases",
                    "dim",
                    "embedding",
                ),
                [
                    (ns, n.id, n.kind, n.name, n.doc_id, n.chunk_id, list(n.aliases), dim, row)
                    for n, row in zip(nodes, embeddings)
                ],
                "ON CONFLICT (namespace, id) DO NOTHING RETURNING id, kind, name",
            )
            names = [(ns, _norm(name), nid) for nid, kind, name in new if kind == "entity"]
            if names:
                cur.executemany(
                    "INSERT INTO rr_entity_names (namespace, name, node_id) VALUES (%s, %s, %s) "
                    "ON CONFLICT (namespace, name) DO UPDATE SET node_id = EXCLUDED.node_id",
                    names,
                )
            for node_id, aliases in entity_aliases.items():
                self._add_aliases(cur, node_id, aliases)
            try:
                _bulk(
                    cur,
                    "rr_edges",
                    ("namespace", "id", "u", "v", "kind", "text"),
                    [(ns, e.id, e.u, e.v, e.kind, e.text) for e in edges],
                    "ON CONFLICT (namespace, id) DO NOTHING",
                )
            except errors.ForeignKeyViolation as exc:
                raise UnknownNodeError(
                    f"an edge joins unknown node(s): {exc.diag.message_detail}"
                ) from None

        self._tx(write)

    def _add_aliases(self, cur: psycopg.Cursor, node_id: str, aliases: Sequence[str]) -> None:
        row = cur.execute(
            "SELECT name, aliases FROM rr_nodes WHERE namespace = %s AND id = %s FOR UPDATE",
            (self.namespace, node_id),
        ).fetchone()
        if row is None:
            raise UnknownNodeError(f"unknown entity {node_id}")
        name, have = row
        new = [a for a in dict.fromkeys(aliases) if a not in have and a != name]
        if new:
            cur.execute(
                "UPDATE rr_nodes SET aliases = aliases || %s::text[] "
                "WHERE namespace = %s AND id = %s",
                (new, self.namespace, node_id),
            )
        if aliases:
            cur.executemany(
                "INSERT INTO rr_entity_names (namespace, name, node_id) "
                "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                [(self.namespace, _norm(a), node_id) for a in aliases],
            )

    def delete_documents(self, doc_ids: Iterable[str]) -> dict[str, int]:
        ids, ns = sorted(set(doc_ids)), self.namespace

        def delete(cur: psycopg.Cursor) -> dict[str, int]:
            cur.execute(
                "SELECT id FROM rr_documents WHERE namespace = %s AND id = ANY(%s) "
                "ORDER BY id FOR UPDATE",
                (ns, ids),
            )
            docs = [r[0] for r in cur]
            if not docs:
                return {"documents": 0, "chunks": 0, "nodes": 0, "edges": 0}
            cur.execute(
                "SELECT id FROM rr_nodes WHERE namespace = %s AND doc_id = ANY(%s) "
                "AND kind IN ('chunk', 'anchor')",
                (ns, docs),
            )
            doomed = [r[0] for r in cur]
            doomed += [r[0] for r in cur.execute(_ORPHAN_ENTITIES, {"ns": ns, "doomed": doomed})]
            cur.execute(
                "SELECT count(*) FROM rr_edges WHERE namespace = %(ns)s "
                "AND (u = ANY(%(d)s) OR v = ANY(%(d)s))",
                {"ns": ns, "d": doomed},
            )
            n_edges = cur.fetchone()[0]  # type: ignore[index]
            # the foreign keys cascade: edges, their memory and journal, entity names
            cur.execute("DELETE FROM rr_nodes WHERE namespace = %s AND id = ANY(%s)", (ns, doomed))
            n_nodes = cur.rowcount
            cur.execute(
                "DELETE FROM rr_chunks WHERE namespace = %s AND doc_id = ANY(%s)", (ns, docs)
            )
            n_chunks = cur.rowcount
            cur.execute(
                "DELETE FROM rr_documents WHERE namespace = %s AND id = ANY(%s)", (ns, docs)
            )
            return {
                "documents": len(docs),
                "chunks": n_chunks,
                "nodes": n_nodes,
                "edges": int(n_edges),
            }

        return self._tx(delete)

    def drop_namespace(self) -> dict[str, int]:
        """Delete everything this namespace holds (graph, memory, traces); other tenants
        are untouched. Returns rows removed per table."""

        def drop(cur: psycopg.Cursor) -> dict[str, int]:
            out = {}
            for table in (
                "rr_settings",
                "rr_traces",
                "rr_memory_journal",
                "rr_edge_memory",
                "rr_edges",
                "rr_entity_names",
                "rr_nodes",
                "rr_chunks",
                "rr_documents",
            ):
                cur.execute(f"DELETE FROM {table} WHERE namespace = %s", (self.namespace,))
                out[table] = cur.rowcount
            cur.execute(
                "UPDATE rr_namespaces SET dim = NULL WHERE namespace = %s", (self.namespace,)
            )
            return out

        result = self._tx(drop)
        self._dim = None
        return result

    # --- reads ----------------------------------------------------------------------------------
    def get_node(self, node_id: str) -> Node:
        return self.get_nodes([node_id])[0]

    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]:
        with self._cursor() as cur:
            cur.execute(
                "SELECT id, kind, name, doc_id, chunk_id, aliases FROM rr_nodes "
                "WHERE namespace = %s AND id = ANY(%s)",
                (self.namespace, list(node_ids)),
            )
            found = {r[0]: Node(r[0], r[1], r[2], r[3], r[4], tuple(r[5])) for r in cur}
        return [_get(found, n, "node") for n in node_ids]

    def get_chunk(self, chunk_id: str) -> Chunk:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT id, doc_id, idx, text, start_char, end_char, metadata "
                "FROM rr_chunks WHERE namespace = %s AND id = %s",
                (self.namespace, chunk_id),
            ).fetchone()
        if row is None:
            raise UnknownNodeError(f"unknown chunk id {chunk_id!r}")
        return Chunk(*row)

    def get_edge(self, edge_id: str) -> Edge:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT id, u, v, kind, text FROM rr_edges WHERE namespace = %s AND id = %s",
                (self.namespace, edge_id),
            ).fetchone()
        if row is None:
            raise UnknownNodeError(f"unknown edge id {edge_id!r}")
        return Edge(*row)

    def node_embeddings(self, node_ids: Sequence[str]) -> np.ndarray:
        if not node_ids:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        with self._cursor() as cur:
            cur.execute(
                "SELECT id, embedding FROM rr_nodes WHERE namespace = %s AND id = ANY(%s)",
                (self.namespace, list(dict.fromkeys(node_ids))),
            )
            found = {r[0]: r[1] for r in cur}
        return np.stack([_get(found, n, "node") for n in node_ids]).astype(np.float32)

    def neighbors(self, node_id: str) -> list[Edge]:
        with self._cursor() as cur:
            cur.execute(_NEIGHBORS, {"ns": self.namespace, "n": node_id})
            out = [Edge(*r) for r in cur]
            if (
                not out
                and cur.execute(
                    "SELECT 1 FROM rr_nodes WHERE namespace = %s AND id = %s",
                    (self.namespace, node_id),
                ).fetchone()
                is None
            ):
                raise UnknownNodeError(f"unknown node id {node_id!r}")
        return out

    def search(
        self, query: np.ndarray, k: int, kinds: Sequence[NodeKind]
    ) -> list[tuple[str, float]]:
        dim = self.dim
        if dim is None or k <= 0 or not kinds:
            return []
        q = mem.unit(query)
        if q.shape != (dim,):
            raise EmbeddingError(f"query dimension {q.shape} != store dimension {dim}")

        def run(cur: psycopg.Cursor) -> list[tuple[str, float]]:
            if 2 * k > self.ef_search:  # widen the HNSW candidate list for a large k
                cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(2 * k),))
            cur.execute(  # dim is an int literal so the planner can match the partial index
                f"SELECT id, 1 - ((embedding::vector({dim})) <=> %(q)s::vector({dim})) "
                f"FROM rr_nodes WHERE namespace = %(ns)s AND dim = {dim} AND kind = ANY(%(k)s) "
                f"ORDER BY (embedding::vector({dim})) <=> %(q)s::vector({dim}) LIMIT %(n)s",
                {"q": q, "ns": self.namespace, "k": list(kinds), "n": k},
            )
            return [(r[0], float(r[1])) for r in cur]

        if 2 * k > self.ef_search:
            hits = self._tx(run)
        else:
            with self._cursor() as cur:
                hits = run(cur)
        return sorted(hits, key=lambda t: (-t[1], t[0]))

    def find_entity_by_name(self, normalized_name: str) -> str | None:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT node_id FROM rr_entity_names WHERE namespace = %s AND name = %s",
                (self.namespace, normalized_name),
            ).fetchone()
        return row[0] if row else None

    # --- memory ---------------------------------------------------------------------------------
    def memory(self, edge_ids: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(edge_ids), self.dim or 0), dtype=np.float32)
        if not edge_ids:
            return out
        with self._cursor() as cur:
            cur.execute(
                "SELECT edge_id, vec FROM rr_edge_memory "
                "WHERE namespace = %s AND edge_id = ANY(%s)",
                (self.namespace, list(dict.fromkeys(edge_ids))),
            )
            found = {r[0]: r[1] for r in cur}
        for i, eid in enumerate(edge_ids):
            if eid in found:
                out[i] = found[eid]
        return out

    def update_memory(
        self, enhance: Sequence[str], penalise: Sequence[str], query: np.ndarray
    ) -> MemoryUpdateResult:
        result = MemoryUpdateResult(
            enhanced=len(set(enhance)), penalised=len(set(penalise) - set(enhance))
        )
        ids = sorted({*enhance, *penalise})
        if not ids:
            return result
        q_hat = mem.unit(query)
        ns = self.namespace

        def write(cur: psycopg.Cursor) -> None:
            self._lock_edges(cur, ids)
            cur.execute(
                "SELECT edge_id, vec FROM rr_edge_memory WHERE namespace = %s "
                "AND edge_id = ANY(%s) ORDER BY edge_id FOR UPDATE",
                (ns, ids),
            )
            current = {r[0]: r[1] for r in cur}
            new = mem.apply_updates(current, enhance, penalise, q_hat, self.dim or len(q_hat))
            rows = [
                (ns, e, v.astype(np.float32))
                for e, v in sorted(new.items())
                if np.any(v) or e in current
            ]
            cur.executemany(
                "INSERT INTO rr_edge_memory (namespace, edge_id, vec) VALUES (%s, %s, %s) "
                "ON CONFLICT (namespace, edge_id) DO UPDATE SET vec = EXCLUDED.vec, "
                "writes = rr_edge_memory.writes + 1, updated_at = now()",
                rows,
            )
            if self.journal:
                enhanced = set(enhance)
                cur.executemany(
                    "INSERT INTO rr_memory_journal (namespace, edge_id, op, query) "
                    "VALUES (%s, %s, %s, %s)",
                    [(ns, e, "e" if e in enhanced else "p", q_hat) for e in sorted(new)],
                )

        self._tx(write)
        return result

    def _lock_edges(self, cur: psycopg.Cursor, ids: list[str]) -> None:
        """Lock the edge rows in id order (no deadlock between writers); unknown ids raise."""
        cur.execute(
            "SELECT id FROM rr_edges WHERE namespace = %s AND id = ANY(%s) ORDER BY id FOR UPDATE",
            (self.namespace, ids),
        )
        missing = set(ids) - {r[0] for r in cur}
        if missing:
            raise UnknownNodeError(f"unknown edge id {min(missing)!r}")

    def memory_writes(self, edge_ids: Sequence[str]) -> dict[str, int]:
        """How many memory writes each edge received since its memory row was created."""
        with self._cursor() as cur:
            cur.execute(
                "SELECT edge_id, writes FROM rr_edge_memory "
                "WHERE namespace = %s AND edge_id = ANY(%s)",
                (self.namespace, list(edge_ids)),
            )
            return {r[0]: int(r[1]) for r in cur}

    def touched_edges(self) -> int:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT count(*) FROM rr_edge_memory WHERE namespace = %s", (self.namespace,)
            ).fetchone()
        return int(row[0])  # type: ignore[index]

    def top_memory(self, query: np.ndarray | None, k: int) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        with self._cursor() as cur:
            if query is None:
                cur.execute(
                    "SELECT edge_id, vector_norm(vec) AS s FROM rr_edge_memory "
                    "WHERE namespace = %s ORDER BY s DESC, edge_id LIMIT %s",
                    (self.namespace, k),
                )
            else:
                cur.execute(
                    "SELECT edge_id, -(vec <#> %(q)s) AS s FROM rr_edge_memory "
                    "WHERE namespace = %(ns)s ORDER BY s DESC, edge_id LIMIT %(k)s",
                    {"q": mem.unit(query), "ns": self.namespace, "k": k},
                )
            return [(r[0], float(r[1])) for r in cur]

    def reset_memory(self, *, all_namespaces: bool = False) -> int:
        """Forget the memory of this namespace (or, with ``all_namespaces``, of every tenant
        in the database). Returns the edges reset."""
        with self._cursor() as cur:
            if all_namespaces:
                cur.execute("DELETE FROM rr_edge_memory")
            else:
                cur.execute("DELETE FROM rr_edge_memory WHERE namespace = %s", (self.namespace,))
            return cur.rowcount

    def namespaces(self) -> list[str]:
        """Every namespace (tenant) this database holds."""
        with self._cursor() as cur:
            cur.execute("SELECT namespace FROM rr_namespaces ORDER BY namespace")
            return [r[0] for r in cur]

    def decay_memory(self, factor: float) -> int:
        if not 0.0 <= factor <= 1.0:
            raise ValueError("decay factor must be in [0, 1]")
        with self._cursor() as cur:  # one UPDATE: row locks serialise it with update_memory
            cur.execute(
                "UPDATE rr_edge_memory SET vec = vec * array_fill(%s::real, "
                "ARRAY[vector_dims(vec)])::vector, updated_at = now() "
                "WHERE namespace = %s",
                (factor, self.namespace),
            )
            return cur.rowcount

    def export_memory(self) -> dict[str, list[float]]:
        with self._cursor() as cur:
            cur.execute(
                "SELECT edge_id, vec FROM rr_edge_memory WHERE namespace = %s ORDER BY edge_id",
                (self.namespace,),
            )
            return {r[0]: r[1].astype(float).tolist() for r in cur}

    def import_memory(self, vectors: dict[str, list[float]]) -> int:
        rows = []
        for eid, v in vectors.items():
            arr = np.asarray(v, dtype=np.float32)
            if arr.shape != (self.dim,) or not np.all(np.isfinite(arr)):
                raise EmbeddingError(f"memory vector of {eid} has shape {arr.shape}")
            rows.append((self.namespace, eid, arr))
        if not rows:
            return 0

        def write(cur: psycopg.Cursor) -> None:
            self._lock_edges(cur, sorted(vectors))
            cur.executemany(
                "INSERT INTO rr_edge_memory (namespace, edge_id, vec) VALUES (%s, %s, %s) "
                "ON CONFLICT (namespace, edge_id) DO UPDATE SET vec = EXCLUDED.vec, "
                "updated_at = now()",
                rows,
            )

        self._tx(write)
        return len(rows)

    # --- traces ---------------------------------------------------------------------------------
    def save_trace(self, trace: dict) -> None:
        self._saved_traces += 1
        trim = self.max_traces is not None and self._saved_traces % 100 == 1

        def write(cur: psycopg.Cursor) -> None:
            cur.execute(
                "INSERT INTO rr_traces (namespace, id, data) VALUES (%s, %s, %s) "
                "ON CONFLICT (namespace, id) DO UPDATE SET data = EXCLUDED.data",
                (self.namespace, trace["trace_id"], Jsonb(trace)),
            )
            if trim:  # now and then: keep the newest ``max_traces`` (approximately)
                cur.execute(
                    "DELETE FROM rr_traces WHERE namespace = %(ns)s AND seq <= ("
                    "SELECT seq FROM rr_traces WHERE namespace = %(ns)s "
                    "ORDER BY seq DESC OFFSET %(n)s LIMIT 1)",
                    {"ns": self.namespace, "n": self.max_traces},
                )

        self._tx(write)

    def load_trace(self, trace_id: str) -> dict | None:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT data FROM rr_traces WHERE namespace = %s AND id = %s",
                (self.namespace, trace_id),
            ).fetchone()
        return row[0] if row else None

    def flush(self) -> None:
        return None  # every write is committed when its method returns

    # --- settings ---------------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        """JSON settings kept with this namespace (e.g. the embedding model, engine config):
        what a saved directory holds for the embedded store."""
        with self._cursor() as cur:
            cur.execute(
                "SELECT key, value FROM rr_settings WHERE namespace = %s", (self.namespace,)
            )
            return {r[0]: r[1] for r in cur}

    def update_settings(self, values: dict[str, Any]) -> None:
        """Set (overwrite) settings of this namespace; values must be JSON-serialisable."""

        def write(cur: psycopg.Cursor) -> None:
            cur.executemany(
                "INSERT INTO rr_settings (namespace, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value",
                [(self.namespace, k, Jsonb(v)) for k, v in values.items()],
            )

        if values:
            self._tx(write)


_NEIGHBORS = """
SELECT id, u, v, kind, text FROM rr_edges WHERE namespace = %(ns)s AND u = %(n)s
UNION SELECT id, u, v, kind, text FROM rr_edges WHERE namespace = %(ns)s AND v = %(n)s
ORDER BY id
"""

_ORPHAN_ENTITIES = """
WITH m AS (
  SELECT v AS ent FROM rr_edges WHERE namespace = %(ns)s AND kind = 'mention' AND u = ANY(%(doomed)s)
  UNION SELECT u FROM rr_edges WHERE namespace = %(ns)s AND kind = 'mention' AND v = ANY(%(doomed)s)
)
SELECT n.id FROM m JOIN rr_nodes n ON n.namespace = %(ns)s AND n.id = m.ent AND n.kind = 'entity'
WHERE NOT EXISTS (
  SELECT 1 FROM rr_edges e WHERE e.namespace = %(ns)s AND e.kind = 'mention'
    AND (e.u = n.id OR e.v = n.id)
    AND (CASE WHEN e.u = n.id THEN e.v ELSE e.u END) <> ALL(%(doomed)s))
"""


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
    cur: psycopg.Cursor, table: str, cols: Sequence[str], rows: list[tuple], conflict: str
) -> list[tuple]:
    """COPY ``rows`` into a temporary twin of ``table``, then INSERT ... SELECT ``conflict``."""
    if not rows:
        return []
    stage = f"_stage_{table}"
    collist = ", ".join(cols)
    cur.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {stage} "
        f"(LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
    )
    with cur.copy(f"COPY {stage} ({collist}) FROM STDIN") as copy:
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


def _norm(name: str) -> str:
    return " ".join(name.lower().split())


def _redact(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    if "://" in dsn and "@" in dsn:
        scheme, rest = dsn.split("://", 1)
        cred, host = rest.rsplit("@", 1)
        return f"{scheme}://{cred.split(':', 1)[0]}@{host}"
    return dsn
