"""Edge memory on PostgreSQL: sparse rows, row-locked atomic updates, admin."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import psycopg
from psycopg import errors

from ...core.arguments import fraction
from ...core.errors import UnknownNodeError
from ...core.memory import math as mem
from ...core.store import MemoryFn
from ...core.types import Edge
from .. import validate, writes
from .base import PgBase
from .graph import write_memory
from .graph_cache import note_change
from .write_reads import TxReads


class Memory(PgBase):
    """Edge memory: reads, atomic updates under row locks, the journal and admin."""

    def memory(self, edge_ids: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(edge_ids), self.dim or 0), dtype=np.float32)
        if not edge_ids:
            return out
        cache = self._cache()  # a snapshot's: from the graph cache when it holds memory
        if cache is not None:
            with cache.lock:
                held = cache.memory if cache.seq == self._graph_seq else None
                if held is not None:
                    for i, eid in enumerate(edge_ids):
                        if (vec := held.get(eid)) is not None:
                            out[i] = vec
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
        self, edge_ids: Sequence[str], fn: MemoryFn, links: Sequence[Edge] = ()
    ) -> np.ndarray:
        ids = validate.memory_ids(edge_ids)
        made = validate.learned_links(links)
        if not ids and not made:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        for _ in range(8):  # an update replaced an edge while this waited for its lock:
            try:  # once it commits, its successor is recorded; write there
                return self._tx(lambda cur: self._update(cur, ids, fn, made))
            except UnknownNodeError:
                if not self._replaced(ids):
                    raise
        return self._tx(lambda cur: self._update(cur, ids, fn, made))

    def _replaced(self, ids: list[str]) -> bool:
        """Whether an update recorded a successor for any of the edges."""
        with self._cursor() as cur:
            return bool(self._successors(cur, ids))

    def _update(
        self, cur: psycopg.Cursor, ids: list[str], fn: MemoryFn, links: Sequence[Edge] = ()
    ) -> np.ndarray:
        """Add the links, then the write :mod:`..writes` decides (every store's semantics),
        its edges and memory rows locked in id order; the journal beside it."""
        ns = self.namespace
        if links:  # first, so a concurrent writer of the same link waits for this one's
            try:
                cur.executemany(
                    "INSERT INTO rr_edges (namespace, id, u, v, kind, text) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, id) DO NOTHING",
                    [(ns, e.id, e.u, e.v, e.kind, e.text) for e in links],
                )
            except errors.ForeignKeyViolation as exc:
                raise UnknownNodeError(
                    f"a learned link joins unknown node(s): {exc.diag.message_detail}"
                ) from None
        reads = TxReads(cur, ns, self.dim or 0, lock_edges=True)
        change, new, ids, fn = writes.update_memory(reads, ids, fn, links)
        write_memory(cur, ns, change.memory)
        if self.journal:  # memory-math writes (docs/method.md §3): the operation and q; other functions: the result
            order = sorted(range(len(ids)), key=ids.__getitem__)
            if isinstance(fn, mem.MemoryUpdate):
                entries = [(ns, ids[i], fn.ops[ids[i]], fn.q_hat) for i in order]
            else:
                entries = [(ns, ids[i], "f", new[i]) for i in order]
            cur.executemany(
                "INSERT INTO rr_memory_journal (namespace, edge_id, op, query) "
                "VALUES (%s, %s, %s, %s)",
                entries,
            )
        # last: the change sequence's row lock is held only until the commit (the graph
        # cache's memory rows and, with links, its links catch up from it)
        if links or change.memory:
            note_change(cur, ns, {x for e in links for x in (e.u, e.v)}, memory=change.memory)
        return new

    def edge_successors(self, edge_ids: Sequence[str]) -> dict[str, str]:
        """The edges a document update replaced, among ``edge_ids``, each with the edge that
        took its place (chains of updates followed)."""
        with self._cursor() as cur:
            return validate.successors(list(edge_ids), lambda xs: self._successors(cur, xs))

    def _successors(self, cur: psycopg.Cursor, ids: list[str]) -> dict[str, str]:
        """Edges a document update replaced, with their successors."""
        cur.execute(
            "SELECT old_id, new_id FROM rr_edge_moves WHERE namespace = %s AND old_id = ANY(%s)",
            (self.namespace, ids),
        )
        return {r[0]: r[1] for r in cur}

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

        def reset(cur: psycopg.Cursor) -> int:
            if all_namespaces:
                cur.execute("DELETE FROM rr_edge_memory")
                gone = cur.rowcount
                cur.execute("SELECT namespace FROM rr_namespaces ORDER BY namespace")
                for (ns,) in cur.fetchall():  # in one order: no deadlock between resets
                    note_change(cur, ns, (), memory=None)
                return gone
            cur.execute("DELETE FROM rr_edge_memory WHERE namespace = %s", (self.namespace,))
            gone = cur.rowcount
            note_change(cur, self.namespace, (), memory=None)
            return gone

        return self._tx(reset)

    def namespaces(self) -> list[str]:
        """Every namespace (tenant) this database holds."""
        with self._cursor() as cur:
            cur.execute("SELECT namespace FROM rr_namespaces ORDER BY namespace")
            return [r[0] for r in cur]

    def decay_memory(self, factor: float) -> int:
        factor = fraction(factor, "the decay factor")

        def decay(cur: psycopg.Cursor) -> int:  # one UPDATE: row locks serialise it
            cur.execute(
                "UPDATE rr_edge_memory SET vec = vec * array_fill(%s::real, "
                "ARRAY[vector_dims(vec)])::vector, updated_at = now() "
                "WHERE namespace = %s",
                (factor, self.namespace),
            )
            changed = cur.rowcount
            if changed:
                note_change(cur, self.namespace, (), memory=None)
            return changed

        return self._tx(decay)

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
            rows.append((self.namespace, eid, validate.memory_vector(eid, v, self.dim)))
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
            note_change(cur, self.namespace, (), memory=sorted(vectors))

        self._tx(write)
        return len(rows)
