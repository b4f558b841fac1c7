"""Node embeddings of the embedded store in one contiguous matrix (float16 by default).

One row per node, no Python object per vector: a million-edge graph's ~250 K node vectors take
188 MB in float16 instead of ~400 MB as float32 arrays. Rows of deleted nodes are reused. Reads
come back as float32, so callers never see the storage type.

Snapshots (:meth:`EmbeddingTable.pin`) share the matrix: a write after a pin copies the id
maps first, writes only rows no snapshot maps, and holds the rows it frees until no snapshot
older than the write is alive (:meth:`EmbeddingTable.release`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ..core.errors import ConfigError, UnknownNodeError

VectorDtype = Literal["float16", "float32"]
DTYPES: tuple[VectorDtype, ...] = ("float16", "float32")


def check_dtype(dtype: object) -> VectorDtype:
    """``dtype`` if it is a supported storage type, else :class:`ConfigError`."""
    if dtype not in DTYPES:
        raise ConfigError(f"vectors must be one of {DTYPES}, got {dtype!r}")
    return dtype  # type: ignore[return-value]


class EmbeddingTable:
    """Rows of one matrix addressed by node id; grows by doubling."""

    def __init__(self, dtype: VectorDtype = "float16") -> None:
        self.dtype = np.dtype(check_dtype(dtype))
        self._mat = np.zeros((0, 0), dtype=self.dtype)
        self._row: dict[str, int] = {}
        self._ids: list[str | None] = []  # node id of each row (None: free)
        self._free: list[int] = []
        self._used = 0  # rows ever handed out (the high-water mark)
        self._held: list[tuple[int, int]] = []  # (version, row) freed while snapshots live
        self._shared = False  # a snapshot shares ``_row`` / ``_ids``: copy before writing

    def pin(self) -> EmbeddingTable:
        """A read-only copy of the table as it is now, sharing its matrix (see module)."""
        self._shared = True
        return copy.copy(self)

    def _own(self) -> None:
        if self._shared:
            self._row, self._ids, self._shared = dict(self._row), list(self._ids), False

    def __len__(self) -> int:
        return len(self._row)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._row

    def row(self, node_id: str) -> int:
        return self._row[node_id]

    def put(self, node_ids: Sequence[str], vecs: np.ndarray) -> np.ndarray:
        """Store one row per new id (ids already present keep their row); returns the rows."""
        if len(node_ids) and self._mat.shape[1] != vecs.shape[1]:
            if self._used:
                raise ValueError("embedding dimension differs from the stored rows")
            self._mat = np.zeros((0, vecs.shape[1]), dtype=self.dtype)
        rows = np.empty(len(node_ids), dtype=np.int64)
        fresh = [i for i, n in enumerate(node_ids) if n not in self._row]
        if fresh:
            self._own()
        self._reserve(len(fresh) - len(self._free))
        for i in fresh:
            r = self._free.pop() if self._free else self._next()
            self._row[node_ids[i]] = r
            self._ids[r] = node_ids[i]
        for i, n in enumerate(node_ids):
            rows[i] = self._row[n]
        if fresh:
            self._mat[rows[fresh]] = vecs[fresh]
        return rows

    def fill(self, node_ids: Sequence[str], vecs: np.ndarray) -> None:
        """Hold exactly these rows (an empty table: a load from rows already checked), in one
        copy of the matrix rather than row by row."""
        if self._used:
            raise ValueError("fill() needs an empty table")
        self._mat = np.array(vecs, dtype=self.dtype)  # a copy of its own: written later
        self._row = {n: i for i, n in enumerate(node_ids)}
        self._ids = list(node_ids)
        self._used = len(self._ids)

    def _next(self) -> int:
        self._used += 1
        self._ids.append(None)
        return self._used - 1

    def _reserve(self, extra: int) -> None:
        need = self._used + max(extra, 0)
        if need <= len(self._mat):
            return
        grown = np.zeros((max(need, 2 * len(self._mat), 64), self._mat.shape[1]), self.dtype)
        grown[: self._used] = self._mat[: self._used]
        self._mat = grown

    def drop(self, node_ids: Sequence[str], version: int | None = None) -> list[int]:
        """Forget the ids (unknown ones are ignored); returns the rows freed. With a
        ``version`` (the write's, while snapshots are alive) the rows are held until
        :meth:`release` says no snapshot older than it is left; else reusable at once."""
        self._own()
        freed = [self._row.pop(n) for n in node_ids if n in self._row]
        for r in freed:
            self._ids[r] = None
        if version is None:
            self._free.extend(freed)
        else:
            self._held.extend((version, r) for r in freed)
        return freed

    def release(self, oldest: int | None) -> None:
        """Free the held rows no snapshot can read: those freed by a write of a version
        ``<= oldest`` (the oldest live snapshot's version; None: no snapshot alive)."""
        ready = [r for v, r in self._held if oldest is None or v <= oldest]
        if ready:
            self._held = [(v, r) for v, r in self._held if oldest is not None and v > oldest]
            self._free.extend(ready)

    def ids_at(self, rows: np.ndarray) -> list[str | None]:
        """The node id of each row (None: a row this table does not hold)."""
        n = len(self._ids)
        return [self._ids[r] if 0 <= r < n else None for r in rows.tolist()]

    def rows_of(self, node_ids: Sequence[str]) -> np.ndarray:
        try:
            return np.fromiter((self._row[n] for n in node_ids), np.int64, len(node_ids))
        except KeyError as exc:
            raise UnknownNodeError(f"unknown node id {exc.args[0]!r}") from None

    def get(self, node_ids: Sequence[str]) -> np.ndarray:
        """The vectors of ``node_ids`` as float32 rows; an unknown id raises."""
        return self.at(self.rows_of(node_ids))

    def at(self, rows: np.ndarray) -> np.ndarray:
        return self._mat[rows].astype(np.float32)

    def matrix(self) -> np.ndarray:
        """The whole backing matrix (rows of deleted nodes included): read only."""
        return self._mat[: self._used]

    def nbytes(self) -> int:
        return int(self._mat.nbytes)
