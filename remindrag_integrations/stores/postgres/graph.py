"""Graph writes of the PostgreSQL store: documents, chunks, nodes, edges; deletes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import psycopg
from psycopg import errors
from psycopg.types.json import Jsonb

from ...core.errors import UnknownNodeError
from ...core.ids import norm_name
from ...core.types import Chunk, Edge, Node
from .. import validate, writes
from . import bulk
from .base import PgBase, _bulk
from .graph_cache import note_change
from .write_reads import TxReads


def _new_rows(chunks: Sequence[Chunk], nodes: Sequence[Node], edges: Sequence[Edge]) -> dict:
    """A batch's rows per table, and under ``vectors`` its nodes the HNSW index holds."""
    vectors = sum(n.kind != "chunk" for n in nodes)
    return {
        "rr_chunks": len(chunks),
        "rr_nodes": len(nodes),
        "rr_edges": len(edges),
        "vectors": vectors,
    }


class GraphWrites(PgBase):
    """Adding and deleting documents with their graph, each in one transaction."""

    def add_graph(
        self,
        *,
        documents: Sequence[tuple[str, str, dict]],
        chunks: Sequence[Chunk],
        nodes: Sequence[Node],
        embeddings: np.ndarray,
        edges: Sequence[Edge],
        entity_aliases: Mapping[str, Sequence[str]],
        replace: Sequence[str] = (),
        memory_moves: Mapping[str, str] | None = None,
    ) -> dict[str, int]:
        emb = validate.graph_embeddings(nodes, embeddings, None)

        def write(cur: psycopg.Cursor) -> dict[str, int]:
            dim = self._set_dim(cur, int(emb.shape[1])) if len(nodes) else self._dim
            change, report = writes.add_graph(  # the semantics every store shares
                TxReads(cur, self.namespace, dim),
                documents=documents,
                chunks=chunks,
                nodes=nodes,
                embeddings=emb,
                edges=edges,
                entity_aliases=entity_aliases,
                replace=replace,
                memory_moves=memory_moves,
            )
            self._store(cur, change, dim)
            return report

        return self._tx(write)

    def _store(self, cur: psycopg.Cursor, change: writes.Change, dim: int | None) -> None:
        """Write a change (:mod:`..writes` decided it) in the caller's transaction: the
        removals (the foreign keys cascade), then the rows, bulk-loaded when the batch is
        large (:mod:`.bulk`)."""
        ns = self.namespace
        # nodes whose edges (or aliases) change: the graph cache reads them again
        touched = {x for e in change.edges for x in (e.u, e.v)} | {n for _, n in change.names}
        touched.update(n.id for n in change.nodes)  # their embeddings too (seed search)
        touched.update(c.id for c in change.chunks)  # and the chunks' rows
        forgot: set[str] = set()  # memory rows the removals take
        if change.drop_nodes or change.drop_edges or change.drop_documents:
            forgot = self._drop(cur, change, touched)
        new = [n for n in change.nodes if n.id in change.vectors]
        records = [n for n in change.nodes if n.id not in change.vectors]
        rows = len(new) + len(change.edges)
        load = (
            bulk.BulkLoad.start(cur, self.bulk, dim, _new_rows(change.chunks, new, change.edges))
            if self.bulk.rows is not None and rows >= self.bulk.rows
            else bulk.BulkLoad.off(self.bulk)
        )
        with load.phase("chunks"):
            self._write_documents(cur, change.documents, change.chunks)
        with load.phase("nodes"):
            emb = np.stack([change.vectors[n.id] for n in new]) if new else np.zeros((0, 0))
            self._write_nodes(cur, new, emb, dim)
            if records:  # entities whose aliases grew (their rows are locked)
                cur.executemany(
                    "UPDATE rr_nodes SET aliases = %s::text[] WHERE namespace = %s AND id = %s",
                    [(list(n.aliases), ns, n.id) for n in records],
                )
            if change.names:
                cur.executemany(
                    "INSERT INTO rr_entity_names (namespace, name, node_id) "
                    "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    [(ns, norm_name(a), n) for a, n in change.names],
                )
        try:
            with load.phase("edges"):
                _bulk(
                    cur,
                    "rr_edges",
                    ("namespace", "id", "u", "v", "kind", "text"),
                    [(ns, e.id, e.u, e.v, e.kind, e.text) for e in change.edges],
                    "ON CONFLICT (namespace, id) DO NOTHING",
                )
        except errors.ForeignKeyViolation as exc:  # a node deleted meanwhile
            raise UnknownNodeError(
                f"an edge joins unknown node(s): {exc.diag.message_detail}"
            ) from None
        load.finish()
        if change.successors:  # replaced edge -> successor, so a racing memory write lands
            cur.executemany(
                "INSERT INTO rr_edge_moves (namespace, old_id, new_id) VALUES (%s, %s, %s) "
                "ON CONFLICT (namespace, old_id) DO UPDATE SET new_id = EXCLUDED.new_id, "
                "at = now()",
                [(ns, o, n) for o, n in sorted(change.successors.items())],
            )
        write_memory(cur, ns, change.memory)
        if touched or forgot or change.memory:  # last: the row lock held only to the commit
            note_change(cur, ns, touched, memory=forgot | set(change.memory))

    def _drop(self, cur: psycopg.Cursor, change: writes.Change, touched: set[str]) -> set[str]:
        """The removals of a change; the nodes whose edges change are added to ``touched``.
        Returns the edges whose memory rows went (deleted here, not by the cascade, so the
        graph cache learns which)."""
        ns = self.namespace
        dead = sorted(change.drop_edges)
        doomed = sorted(change.drop_nodes)
        cur.execute(
            "DELETE FROM rr_edge_memory m WHERE m.namespace = %(ns)s AND m.edge_id IN ("
            "SELECT e.id FROM rr_edges e WHERE e.namespace = %(ns)s AND e.id = ANY(%(dead)s) "
            "UNION SELECT e.id FROM rr_edges e "
            "WHERE e.namespace = %(ns)s AND e.u = ANY(%(doomed)s) "
            "UNION SELECT e.id FROM rr_edges e "
            "WHERE e.namespace = %(ns)s AND e.v = ANY(%(doomed)s)"
            ") RETURNING m.edge_id",
            {"ns": ns, "dead": dead, "doomed": doomed},
        )
        forgot = {r[0] for r in cur.fetchall()}
        if dead:
            cur.execute(
                "SELECT u, v FROM rr_edges WHERE namespace = %s AND id = ANY(%s)", (ns, dead)
            )
            touched.update(x for end in cur.fetchall() for x in end)
            cur.execute("DELETE FROM rr_edges WHERE namespace = %s AND id = ANY(%s)", (ns, dead))
        touched.update(doomed)
        # the foreign keys cascade: edges, their memory and journal, entity names
        cur.execute("DELETE FROM rr_nodes WHERE namespace = %s AND id = ANY(%s)", (ns, doomed))
        docs = sorted(change.drop_documents)
        cur.execute(
            "DELETE FROM rr_chunks WHERE namespace = %s AND doc_id = ANY(%s) RETURNING id",
            (ns, docs),
        )
        touched.update(r[0] for r in cur.fetchall())  # the graph cache's copies of their rows go
        cur.execute("DELETE FROM rr_documents WHERE namespace = %s AND id = ANY(%s)", (ns, docs))
        return forgot

    def _write_documents(
        self,
        cur: psycopg.Cursor,
        documents: Sequence[tuple[str, str, dict]],
        chunks: Sequence[Chunk],
    ) -> None:
        ns = self.namespace
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

    def _write_nodes(
        self, cur: psycopg.Cursor, nodes: Sequence[Node], emb: np.ndarray, dim: int | None
    ) -> None:
        ns = self.namespace
        cols = ("namespace", "id", "kind", "name", "doc_id", "chunk_id", "aliases", "dim")
        new = _bulk(
            cur,
            "rr_nodes",
            (*cols, "embedding"),
            [
                (ns, n.id, n.kind, n.name, n.doc_id, n.chunk_id, list(n.aliases), dim, row)
                for n, row in zip(nodes, emb)
            ],
            "ON CONFLICT (namespace, id) DO NOTHING RETURNING id, kind, name",
            ("text", "text", "text", "text", "text", "text", "text[]", "int4", "vector"),
        )
        added = {nid for nid, kind, _ in new if kind == "entity"}
        names = [(ns, norm_name(n.name), n.id) for n in nodes if n.id in added]
        if names:
            cur.executemany(
                "INSERT INTO rr_entity_names (namespace, name, node_id) VALUES (%s, %s, %s) "
                "ON CONFLICT (namespace, name) DO UPDATE SET node_id = EXCLUDED.node_id",
                names,
            )
        aliases = [(ns, norm_name(a), n.id) for n in nodes if n.id in added for a in n.aliases]
        if aliases:
            cur.executemany(
                "INSERT INTO rr_entity_names (namespace, name, node_id) "
                "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                aliases,
            )

    def delete_documents(self, doc_ids: Iterable[str]) -> dict[str, int]:
        ids = set(doc_ids)

        def delete(cur: psycopg.Cursor) -> dict[str, int]:
            change, counts = writes.delete_documents(TxReads(cur, self.namespace, self._dim), ids)
            if counts["documents"]:
                self._store(cur, change, self._dim)
            return counts

        return self._tx(delete)

    def drop_namespace(self) -> dict[str, int]:
        """Delete everything this namespace holds (graph, memory, traces); other tenants
        are untouched. Returns rows removed per table."""

        def drop(cur: psycopg.Cursor) -> dict[str, int]:
            out = {}
            for table in (
                "rr_edge_moves",
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
            note_change(cur, self.namespace, None, memory=None)
            return out

        result = self._tx(drop)
        self._dim = None
        return result


def write_memory(cur: psycopg.Cursor, ns: str, rows: Mapping[str, np.ndarray | None]) -> None:
    """Write a change's memory rows in id order (None: the row goes)."""
    put = [(ns, e, v) for e, v in sorted(rows.items()) if v is not None]
    gone = sorted(e for e, v in rows.items() if v is None)
    if gone:
        cur.execute(
            "DELETE FROM rr_edge_memory WHERE namespace = %s AND edge_id = ANY(%s)", (ns, gone)
        )
    if put:
        cur.executemany(
            "INSERT INTO rr_edge_memory (namespace, edge_id, vec) VALUES (%s, %s, %s) "
            "ON CONFLICT (namespace, edge_id) DO UPDATE SET vec = EXCLUDED.vec, "
            "writes = rr_edge_memory.writes + 1, updated_at = now()",
            put,
        )
