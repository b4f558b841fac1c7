"""The reads of the write decisions (:class:`~..writes.WriteReads`) inside one PostgreSQL
transaction: each a single statement; what a write goes on to change is locked (``FOR
UPDATE``, in id order) until it commits."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import psycopg

from ...core.types import Edge, Node


class TxReads:
    """:class:`~..writes.WriteReads` over the cursor ``cur`` of a write's transaction."""

    def __init__(
        self, cur: psycopg.Cursor, namespace: str, dim: int | None, *, lock_edges: bool = False
    ) -> None:
        self.cur, self.ns, self._dim = cur, namespace, dim
        self.lock_edges = lock_edges  # a memory write locks its edges' rows (in id order)

    @property
    def dim(self) -> int | None:
        return self._dim

    def _ids(self, sql: str, ids: Collection[str]) -> set[str]:
        if not ids:
            return set()
        self.cur.execute(sql, (self.ns, sorted(ids)))
        return {r[0] for r in self.cur}

    def held_documents(self, doc_ids: Collection[str]) -> set[str]:
        return self._ids(
            "SELECT id FROM rr_documents WHERE namespace = %s AND id = ANY(%s) "
            "ORDER BY id FOR UPDATE",
            doc_ids,
        )

    def held_nodes(self, node_ids: Collection[str]) -> set[str]:
        return self._ids("SELECT id FROM rr_nodes WHERE namespace = %s AND id = ANY(%s)", node_ids)

    def held_edges(self, edge_ids: Collection[str]) -> set[str]:
        lock = " ORDER BY id FOR UPDATE" if self.lock_edges else ""
        return self._ids(
            "SELECT id FROM rr_edges WHERE namespace = %s AND id = ANY(%s)" + lock, edge_ids
        )

    def document_nodes(self, doc_ids: Collection[str]) -> list[Node]:
        if not doc_ids:
            return []
        self.cur.execute(
            "SELECT id, kind, name, doc_id, chunk_id, aliases FROM rr_nodes WHERE namespace = %s "
            "AND doc_id = ANY(%s) AND kind IN ('chunk', 'anchor') ORDER BY id",
            (self.ns, sorted(doc_ids)),
        )
        return [Node(r[0], r[1], r[2], r[3], r[4], tuple(r[5])) for r in self.cur]

    def edges_at(self, node_ids: Collection[str]) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {n: [] for n in node_ids}
        if not out:
            return out
        self.cur.execute(
            "SELECT id, u, v, kind, text FROM rr_edges WHERE namespace = %(ns)s "
            "AND (u = ANY(%(n)s) OR v = ANY(%(n)s)) ORDER BY id",
            {"ns": self.ns, "n": sorted(out)},
        )
        for r in self.cur:
            e = Edge(*r)
            for end in dict.fromkeys((e.u, e.v)):
                if end in out:
                    out[end].append(e)
        return out

    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]:
        """The nodes, locked: an entity's record (its aliases) is rewritten from what this
        read."""
        if not node_ids:
            return []
        self.cur.execute(
            "SELECT id, kind, name, doc_id, chunk_id, aliases FROM rr_nodes WHERE namespace = %s "
            "AND id = ANY(%s) ORDER BY id FOR UPDATE",
            (self.ns, sorted(set(node_ids))),
        )
        found = {r[0]: Node(r[0], r[1], r[2], r[3], r[4], tuple(r[5])) for r in self.cur}
        return [found[n] for n in node_ids if n in found]

    def held_memory(self, edge_ids: Collection[str]) -> dict[str, np.ndarray]:
        if not edge_ids:
            return {}
        self.cur.execute(
            "SELECT edge_id, vec FROM rr_edge_memory WHERE namespace = %s AND edge_id = ANY(%s) "
            "ORDER BY edge_id FOR UPDATE",
            (self.ns, sorted(edge_ids)),
        )
        return {r[0]: np.asarray(r[1], dtype=np.float32) for r in self.cur}

    def successors(self, edge_ids: list[str]) -> dict[str, str]:
        if not edge_ids:
            return {}
        self.cur.execute(
            "SELECT old_id, new_id FROM rr_edge_moves WHERE namespace = %s AND old_id = ANY(%s)",
            (self.ns, list(edge_ids)),
        )
        return {r[0]: r[1] for r in self.cur}
