"""The schema and the longer SQL statements of the PostgreSQL store."""

from __future__ import annotations

SCHEMA_VERSION = 1
SCHEMA_LOCK = 0x7252_0001  # pg_advisory_xact_lock key: one schema creator at a time

SCHEMA = """
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
CREATE INDEX IF NOT EXISTS rr_documents_meta ON rr_documents USING gin (metadata jsonb_path_ops);
-- the chunks' words kept beside their text: ranking reads them instead of parsing every
-- matching chunk's text again (issue 49; the expression index before this needed that)
ALTER TABLE rr_chunks ADD COLUMN IF NOT EXISTS
  tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED;
DROP INDEX IF EXISTS rr_chunks_fts;
CREATE INDEX IF NOT EXISTS rr_chunks_tsv ON rr_chunks USING gin (tsv);
CREATE TABLE IF NOT EXISTS rr_edge_moves (
  namespace text NOT NULL, old_id text NOT NULL, new_id text NOT NULL,
  at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (namespace, old_id));
CREATE TABLE IF NOT EXISTS rr_graph_seq (namespace text PRIMARY KEY, seq bigint NOT NULL);
CREATE TABLE IF NOT EXISTS rr_graph_changes (
  namespace text NOT NULL, seq bigint NOT NULL, nodes text[], PRIMARY KEY (namespace, seq));
-- the edges whose memory a change of the sequence wrote (NULL: any edge's), for the memory
-- vectors the graph cache holds (.graph_cache); a change without memory writes has no row
CREATE TABLE IF NOT EXISTS rr_memory_changes (
  namespace text NOT NULL, seq bigint NOT NULL, edges text[], PRIMARY KEY (namespace, seq));
"""
LAST_SCHEMA_OBJECT = "rr_memory_changes"  # missing: the schema (or its newest part) is to run

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
    "rr_edge_moves",
    "rr_graph_seq",
    "rr_graph_changes",
    "rr_memory_changes",
)


def hnsw_index_sql(dim: int, m: int = 16, ef_construction: int = 64) -> str:
    """The partial HNSW (cosine) expression index of the entity and anchor nodes of one
    dimension: what seed search and dense fill look for. A chunk node shares its anchor's
    embedding and is never a seed; a search that asks for chunks scans instead."""
    d = int(dim)
    return (
        f"CREATE INDEX IF NOT EXISTS rr_nodes_hnsw_{d} ON rr_nodes USING hnsw "
        f"((embedding::vector({d})) vector_cosine_ops) "
        f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)}) "
        f"WHERE dim = {d} AND kind <> 'chunk'"
    )


_NEIGHBORS = """
SELECT id, u, v, kind, text FROM rr_edges WHERE namespace = %(ns)s AND u = %(n)s
UNION SELECT id, u, v, kind, text FROM rr_edges WHERE namespace = %(ns)s AND v = %(n)s
ORDER BY id
"""

# The edges of many nodes (core/frontier.py: adjacency), one statement: a row per edge and
# end in the list, and a row of NULLs for a node without edges (``known`` tells an unknown one)
_ADJACENCY = """
WITH f(n) AS (SELECT DISTINCT unnest(%(ids)s::text[]))
SELECT f.n, y.id, y.u, y.v, y.kind, y.text,
  CASE WHEN y.id IS NULL THEN EXISTS (
    SELECT 1 FROM rr_nodes x WHERE x.namespace = %(ns)s AND x.id = f.n) END
FROM f LEFT JOIN LATERAL (
  SELECT e.id, e.u, e.v, e.kind, e.text FROM rr_edges e WHERE e.namespace = %(ns)s AND e.u = f.n
  UNION ALL
  SELECT e.id, e.u, e.v, e.kind, e.text FROM rr_edges e
  WHERE e.namespace = %(ns)s AND e.v = f.n AND e.u <> f.n) y ON true
"""

# The prior's push (core/push.py): per node the edge id and the other end of its corpus edges
# to entities and anchors (no chunk ends, no learned edges); no text, no Edge rows
_SPREAD_LINKS = """
WITH f(n) AS (SELECT DISTINCT unnest(%(ids)s::text[]))
SELECT f.n, y.id, y.o FROM f CROSS JOIN LATERAL (
  SELECT e.id, e.v AS o FROM rr_edges e WHERE e.namespace = %(ns)s AND e.u = f.n
    AND e.kind <> 'learned' AND left(e.v, 2) <> 'c-'
  UNION ALL
  SELECT e.id, e.u FROM rr_edges e WHERE e.namespace = %(ns)s AND e.v = f.n AND e.u <> f.n
    AND e.kind <> 'learned' AND left(e.u, 2) <> 'c-') y
"""

# One round trip for a frontier (core/frontier.py): a row per node (edge columns NULL), a row
# per edge with its memory and, for remembered edges, the node at the other end. The LATERAL
# ... LIMIT 1 subqueries keep every lookup an index probe whatever the planner estimates.
_FRONTIER = "f(n) AS (SELECT DISTINCT unnest(%(ids)s::text[]))"
# the frontier and what it reaches through edges whose memory passes q . v > min (nearest first)
_FRONTIER_FOLLOW = """r(n, d) AS (
  SELECT x, 0 FROM unnest(%(ids)s::text[]) x
  UNION
  SELECT y.o, r.d + 1 FROM r, LATERAL (
    SELECT e.v AS o, e.id FROM rr_edges e WHERE e.namespace = %(ns)s AND e.u = r.n
    UNION ALL SELECT e.u, e.id FROM rr_edges e WHERE e.namespace = %(ns)s AND e.v = r.n
  ) y CROSS JOIN LATERAL (
    SELECT 1 FROM rr_edge_memory m WHERE m.namespace = %(ns)s AND m.edge_id = y.id
      AND (m.vec <#> %(q)s::vector) < %(neg)s LIMIT 1) m
  WHERE r.d < %(depth)s
),
f(n) AS (SELECT n FROM r GROUP BY n ORDER BY min(d), n LIMIT %(cap)s)"""
_NEIGHBORHOODS = """
WITH RECURSIVE {frontier},
e AS (
  SELECT f.n, y.* FROM f CROSS JOIN LATERAL (
    SELECT e.id, e.u, e.v, e.kind, e.text, e.v AS o
    FROM rr_edges e WHERE e.namespace = %(ns)s AND e.u = f.n
    UNION ALL
    SELECT e.id, e.u, e.v, e.kind, e.text, e.u
    FROM rr_edges e WHERE e.namespace = %(ns)s AND e.v = f.n AND e.u <> f.n) y
)
SELECT f.n, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::vector,
  x.id, x.kind, x.name, x.doc_id, x.chunk_id, x.aliases, x.embedding
FROM f CROSS JOIN LATERAL (
  SELECT * FROM rr_nodes x WHERE x.namespace = %(ns)s AND x.id = f.n LIMIT 1) x
UNION ALL
SELECT e.n, e.id, e.u, e.v, e.kind, e.text, m.vec,
  o.id, o.kind, o.name, o.doc_id, o.chunk_id, o.aliases, o.embedding
FROM e LEFT JOIN LATERAL (
  SELECT vec FROM rr_edge_memory m WHERE m.namespace = %(ns)s AND m.edge_id = e.id LIMIT 1
) m ON true
LEFT JOIN LATERAL (
  SELECT * FROM rr_nodes o
  WHERE m.vec IS NOT NULL AND o.namespace = %(ns)s AND o.id = e.o LIMIT 1
) o ON true
"""
