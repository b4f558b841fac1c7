"""Traces and per-namespace settings on PostgreSQL."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from .base import PgBase


class Traces(PgBase):
    """Persisted traces (newest kept) and JSON settings of the namespace."""

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

        if trim:
            self._tx(write)
        else:  # one statement: atomic on its own, one round trip (no BEGIN, no COMMIT)
            with self._cursor() as cur:
                write(cur)

    claim_timeout = 600.0  # seconds after which a claim of a crashed writer may be taken over

    def claim_trace(self, trace_id: str) -> bool:
        """Mark the trace claimed (with the time) unless it is memorized or claimed within
        :attr:`claim_timeout` seconds: one atomic UPDATE, so one caller wins."""
        with self._cursor() as cur:
            cur.execute(
                "UPDATE rr_traces SET data = data || jsonb_build_object('claimed', "
                "extract(epoch FROM clock_timestamp())) WHERE namespace = %s AND id = %s "
                "AND coalesce(data->>'memorized', 'false') <> 'true' AND (NOT (data ? 'claimed')"
                " OR (data->>'claimed')::float8 < extract(epoch FROM clock_timestamp()) - %s)",
                (self.namespace, trace_id, self.claim_timeout),
            )
            return cur.rowcount == 1

    def release_trace(self, trace_id: str) -> None:
        with self._cursor() as cur:
            cur.execute(
                "UPDATE rr_traces SET data = data - 'claimed' WHERE namespace = %s AND id = %s",
                (self.namespace, trace_id),
            )

    def load_trace(self, trace_id: str) -> dict | None:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT data FROM rr_traces WHERE namespace = %s AND id = %s",
                (self.namespace, trace_id),
            ).fetchone()
        return row[0] if row else None

    def recent_traces(self, limit: int) -> list[dict]:
        with self._cursor() as cur:
            cur.execute(
                "SELECT data FROM rr_traces WHERE namespace = %s ORDER BY seq DESC LIMIT %s",
                (self.namespace, max(int(limit), 0)),
            )
            return [r[0] for r in cur]

    def flush(self) -> None:
        return None  # every write is committed when its method returns

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
