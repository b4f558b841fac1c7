"""PostgreSQL + pgvector graph store (extra ``postgres``): one database shared by many replicas.

- Every table has a ``namespace`` column (the tenant) and every query filters by it.
- Node embeddings sit in an untyped ``vector`` column with one partial HNSW expression index per
  dimension (cosine), so seed search is an index scan and tenants may use different embedders.
- Edge memory is sparse: a row in ``rr_edge_memory`` exists only once an edge was written.
- Memory writes lock the edge rows (``SELECT ... FOR UPDATE`` in id order, one transaction),
  compute docs/method.md §3 with :func:`remindrag_integrations.memory.apply_updates` and write back, so
  writers in any number of processes serialise per edge and no update is lost.
- Neighbour, memory and embedding lookups are indexed point queries. Through a snapshot, the
  graph a query walks (the push's links, nodes' edges, embeddings and rows) comes from the
  store object's in-process copy, caught up from the change sequence every graph write
  records (:mod:`.graph_cache`), and so do unfiltered seed search (an exact scan of the
  cached entity and anchor vectors) and the prior's whole-graph matrix (``graph_matrix``);
  memory vectors are always read from the database.
  :meth:`~.reads.Reads.neighborhoods` reads a whole frontier (and what memory leads to from
  it) in one statement, so replay costs one round trip.
- A large ``add_graph`` batch (``BulkOptions.rows``) is bulk-loaded: COPY into tables with
  their HNSW, btree and full-text indexes and the edges' foreign keys dropped, all built once
  afterwards, in the batch's transaction; phases reported, a failure rolls all of it back
  (:mod:`.bulk`).
- Foreign keys cascade node → edges → memory, so a deleted node leaves no orphan behind.
- A retrieve reads through :meth:`~.base.PgBase.snapshot`: one ``REPEATABLE READ READ ONLY``
  transaction, so it sees the database of one moment while other connections commit.

``journal=True`` also records every applied memory update (edge, operation, query vector) in
``rr_memory_journal`` in the order it was applied: an audit trail that can be replayed.
"""

from __future__ import annotations

from ..base import BaseGraphStore
from .bulk import BulkOptions
from .graph import GraphWrites
from .lexical import LexicalReads
from .memory import Memory
from .reads import Reads
from .sql import _NEIGHBORS, TABLES
from .traces import Traces

__all__ = ["TABLES", "BulkOptions", "PostgresGraphStore", "_NEIGHBORS"]


class PostgresGraphStore(GraphWrites, Reads, LexicalReads, Memory, Traces, BaseGraphStore):
    """A :class:`~remindrag_integrations.core.store.GraphStore` on PostgreSQL with pgvector.

    ``dsn`` is a libpq connection string (``postgresql://user@host:5432/db``); the schema is
    created on first use. ``dim`` pins the embedding dimension up front (else the first
    :meth:`add_graph` sets it). One store object serves one ``namespace``. ``ef_search`` is
    the HNSW candidate list of seed search (higher: better recall, slower); ``bulk``
    (:class:`BulkOptions`) says when a batch is bulk-loaded and how the index is built. Its parts:
    :mod:`.base` (connections, schema), :mod:`.graph`, :mod:`.reads`, :mod:`.memory`,
    :mod:`.traces` (and settings).
    """

    def documents(self) -> dict[str, tuple[str, dict]]:
        """Every document of the namespace: id -> (content hash, metadata)."""
        with self._cursor() as cur:
            cur.execute(
                "SELECT id, hash, metadata FROM rr_documents WHERE namespace = %s ORDER BY id",
                (self.namespace,),
            )
            return {r[0]: (r[1], dict(r[2] or {})) for r in cur}
