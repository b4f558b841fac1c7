"""The console's action log: who did what, when, and how to undo it, kept in the store.

Each action is one settings row (``console.action.<id>``) of the store the console serves:
the embedded store's ``settings`` table, PostgreSQL's ``rr_settings`` (the namespace's), both
through the :class:`~remindrag_integrations.core.store.SettingsStore` door, so every process
serving the store sees the same log. The memory an undo puts back is kept only for the newest
:data:`KEEP_UNDO` actions (float32, base64), so the log stays small."""

from __future__ import annotations

import base64
import datetime
import threading
import uuid
from typing import Any

import numpy as np

from ...core.errors import ReMindError
from ...core.store import SettingsStore

PREFIX = "console.action."
KEEP_UNDO = 200


class UnknownActionError(ReMindError, KeyError):
    """No action of this id in the log."""


def pack(vectors: dict[str, list[float]]) -> dict[str, str]:
    """Memory vectors as base64 float32 (exact for the store's float32 memory)."""
    return {
        e: base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()
        for e, v in vectors.items()
    }


def unpack(packed: dict[str, str]) -> dict[str, list[float]]:
    return {
        e: np.frombuffer(base64.b64decode(b), dtype="<f4").astype(float).tolist()
        for e, b in packed.items()
    }


class ActionLog:
    """The log over ``store`` (a :class:`SettingsStore`; another store keeps it in this
    process only, and says so in :attr:`kept_in`)."""

    def __init__(self, store: Any) -> None:
        self._store = store if isinstance(store, SettingsStore) else None
        self._local: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def kept_in(self) -> str:
        return "the store's settings" if self._store is not None else "this process only"

    def _rows(self) -> dict[str, dict[str, Any]]:
        found = self._store.settings() if self._store is not None else self._local
        return {k: v for k, v in found.items() if k.startswith(PREFIX) and isinstance(v, dict)}

    def _put(self, rows: dict[str, dict[str, Any]]) -> None:
        if self._store is not None:
            self._store.update_settings(rows)
        else:
            self._local.update(rows)

    def record(
        self, who: str, what: str, args: dict[str, Any], result: dict[str, Any], undo: Any = None
    ) -> dict[str, Any]:
        """Add an action; ``undo`` is what :meth:`undo_of` gives back (None: none)."""
        now = datetime.datetime.now(datetime.UTC)
        action_id = f"{now.strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:6]}"
        row = {
            "id": action_id,
            "who": who,
            "at": now.isoformat(timespec="seconds"),
            "what": what,
            "args": args,
            "result": result,
            "undo": undo,
            "undone": None,
        }
        with self._lock:
            older = sorted(self._rows().items(), reverse=True)[KEEP_UNDO - 1 :]
            expired = {k: {**v, "undo": None} for k, v in older if v.get("undo") is not None}
            self._put({PREFIX + action_id: row, **expired})
        return public(row)

    def get(self, action_id: str) -> dict[str, Any]:
        if not isinstance(action_id, str):
            raise UnknownActionError(f"unknown action {action_id!r}")
        row = self._rows().get(PREFIX + action_id)
        if row is None:
            raise UnknownActionError(f"unknown action {action_id!r}")
        return row

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        rows = sorted(self._rows().items(), reverse=True)[: max(limit, 0)]
        return [public(v) for _, v in rows]

    def mark_undone(self, action_id: str, who: str, by: str) -> dict[str, Any]:
        row = self.get(action_id)
        at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        row = {**row, "undo": None, "undone": {"who": who, "at": at, "by": by}}
        self._put({PREFIX + action_id: row})
        return public(row)


def public(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the page shows it: the undo payload replaced by whether there is one."""
    out = {k: v for k, v in row.items() if k != "undo"}
    out["undoable"] = row.get("undo") is not None and not row.get("undone")
    return out
