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
from ...core.memory import math as mem
from ...core.types import Chunk, Edge, Node
from .. import validate
from . import bulk
from .base import PgBase, _bulk
from .graph_cache import note_change
from .sql import _ORPHAN_ENTITIES


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
        moves = dict(memory_moves or {})

        def write(cur: psycopg.Cursor) -> dict[str, int]:
            dim = self._set_dim(cur, int(emb.shape[1])) if len(nodes) else self._dim
            validate.edge_endpoints(edges, nodes, lambda ids: self._known(cur, ids))
            large = self.bulk.rows is not None and len(nodes) + len(edges) >= self.bulk.rows
            near: list[str] = []
            carried: dict[str, np.ndarray] = {}
            # nodes whose edges (or aliases) change: the graph cache reads them again
            touched = {x for e in edges for x in (e.u, e.v)} | set(entity_aliases)
            touched.update(n.id for n in nodes)  # their embeddings too (seed search)
            touched.update(c.id for c in chunks)  # and the chunks' rows
            if replace:  # the old versions go in this transaction, but not what the batch uses
                keep = {x for e in edges for x in (e.u, e.v)} | set(entity_aliases)
                near = self._memory_at(cur, sorted(set(replace)))
                carried = self._memory_rows(cur, sorted(moves))
                self._delete(cur, sorted(set(replace)), sorted(keep), touched)
            # after the deletes: they cascade through the foreign keys a bulk load drops
            load = (
                bulk.BulkLoad.start(cur, self.bulk, dim, _new_rows(chunks, nodes, edges))
                if large
                else bulk.BulkLoad.off(self.bulk)
            )
            with load.phase("chunks"):
                self._write_documents(cur, documents, chunks)
            with load.phase("nodes"):
                self._write_nodes(cur, nodes, emb, dim)
                for node_id, aliases in entity_aliases.items():
                    self._add_aliases(cur, node_id, aliases)
            try:
                with load.phase("edges"):
                    _bulk(
                        cur,
                        "rr_edges",
                        ("namespace", "id", "u", "v", "kind", "text"),
                        [(self.namespace, e.id, e.u, e.v, e.kind, e.text) for e in edges],
                        "ON CONFLICT (namespace, id) DO NOTHING",
                    )
            except errors.ForeignKeyViolation as exc:  # a node deleted meanwhile
                raise UnknownNodeError(
                    f"an edge joins unknown node(s): {exc.diag.message_detail}"
                ) from None
            load.finish()
            moved = self._carry(cur, carried, moves)
            kept = len(self._memory_rows(cur, near))
            if touched:  # last: the sequence's row lock is held only until the commit
                note_change(cur, self.namespace, touched)
            return {"kept": kept, "moved": moved, "dropped": len(near) - kept - moved}

        return self._tx(write)

    def _memory_at(self, cur: psycopg.Cursor, docs: list[str]) -> list[str]:
        """Edges with memory at the documents' chunks and anchors."""
        cur.execute(
            "SELECT DISTINCT m.edge_id FROM rr_edge_memory m JOIN rr_edges e "
            "ON e.namespace = m.namespace AND e.id = m.edge_id JOIN rr_nodes n "
            "ON n.namespace = e.namespace AND n.id IN (e.u, e.v) "
            "WHERE m.namespace = %s AND n.doc_id = ANY(%s) AND n.kind IN ('chunk', 'anchor')",
            (self.namespace, docs),
        )
        return [r[0] for r in cur]

    def _memory_rows(self, cur: psycopg.Cursor, edge_ids: list[str]) -> dict[str, np.ndarray]:
        cur.execute(
            "SELECT edge_id, vec FROM rr_edge_memory WHERE namespace = %s AND edge_id = ANY(%s) "
            "ORDER BY edge_id FOR UPDATE",
            (self.namespace, edge_ids),
        )
        return {r[0]: np.asarray(r[1], dtype=np.float32) for r in cur}

    def _carry(
        self, cur: psycopg.Cursor, carried: Mapping[str, np.ndarray], moves: Mapping[str, str]
    ) -> int:
        """Record each removed edge's successor and move its memory there; how many moved."""
        if not moves:
            return 0
        cur.execute(
            "SELECT id FROM rr_edges WHERE namespace = %s AND id = ANY(%s)",
            (self.namespace, sorted({*moves, *moves.values()})),
        )
        exists = {r[0] for r in cur}
        succ = sorted((o, n) for o, n in moves.items() if o not in exists and n in exists)
        cur.executemany(  # replaced edge -> successor, so a racing memory write lands
            "INSERT INTO rr_edge_moves (namespace, old_id, new_id) VALUES (%s, %s, %s) "
            "ON CONFLICT (namespace, old_id) DO UPDATE SET new_id = EXCLUDED.new_id, at = now()",
            [(self.namespace, o, n) for o, n in succ],
        )
        live = {o: v for o, v in carried.items() if o not in exists and moves[o] in exists}
        targets = self._memory_rows(cur, sorted({moves[o] for o in live}))
        for old in sorted(live):
            new = moves[old]
            targets[new] = mem.merge(targets.get(new), live[old])
        cur.executemany(
            "INSERT INTO rr_edge_memory (namespace, edge_id, vec) VALUES (%s, %s, %s) "
            "ON CONFLICT (namespace, edge_id) DO UPDATE SET vec = EXCLUDED.vec, "
            "writes = rr_edge_memory.writes + 1, updated_at = now()",
            [(self.namespace, e, v) for e, v in sorted(targets.items())],
        )
        return len(live)

    def _known(self, cur: psycopg.Cursor, ids: list[str]) -> list[str]:
        cur.execute(
            "SELECT id FROM rr_nodes WHERE namespace = %s AND id = ANY(%s)", (self.namespace, ids)
        )
        return [r[0] for r in cur]

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
                [(self.namespace, norm_name(a), node_id) for a in aliases],
            )

    def delete_documents(self, doc_ids: Iterable[str]) -> dict[str, int]:
        ids = sorted(set(doc_ids))

        def delete(cur: psycopg.Cursor) -> dict[str, int]:
            touched: set[str] = set()
            out = self._delete(cur, ids, [], touched)
            if touched:
                note_change(cur, self.namespace, touched)
            return out

        return self._tx(delete)

    def _delete(
        self, cur: psycopg.Cursor, ids: list[str], keep: list[str], touched: set[str]
    ) -> dict[str, int]:
        """Delete documents (rows locked in id order) with their chunks, anchors and the
        entities left with no mention, except the nodes in ``keep``; the nodes whose edges
        this changes are added to ``touched``."""
        ns = self.namespace
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
        kept = set(keep)
        doomed = [r[0] for r in cur if r[0] not in kept]
        orphans = cur.execute(_ORPHAN_ENTITIES, {"ns": ns, "doomed": doomed})
        doomed += [r[0] for r in orphans if r[0] not in kept]
        cur.execute(
            "SELECT u, v FROM rr_edges WHERE namespace = %(ns)s "
            "AND (u = ANY(%(d)s) OR v = ANY(%(d)s))",
            {"ns": ns, "d": doomed},
        )
        ends = cur.fetchall()
        n_edges = len(ends)
        touched.update(doomed)
        touched.update(x for end in ends for x in end)
        # the foreign keys cascade: edges, their memory and journal, entity names
        cur.execute("DELETE FROM rr_nodes WHERE namespace = %s AND id = ANY(%s)", (ns, doomed))
        n_nodes = cur.rowcount
        cur.execute(
            "DELETE FROM rr_chunks WHERE namespace = %s AND doc_id = ANY(%s) RETURNING id",
            (ns, docs),
        )
        gone = [r[0] for r in cur.fetchall()]
        touched.update(gone)  # the graph cache's copies of their rows go
        n_chunks = len(gone)
        cur.execute("DELETE FROM rr_documents WHERE namespace = %s AND id = ANY(%s)", (ns, docs))
        return {"documents": len(docs), "chunks": n_chunks, "nodes": n_nodes, "edges": int(n_edges)}

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
            note_change(cur, self.namespace, None)
            return out

        result = self._tx(drop)
        self._dim = None
        return result
