"""An approximate nearest-neighbour index over rows of the embedding table (extra ``ann``:
usearch, an HNSW graph; chosen over faiss and hnswlib in ``benchmarks/ann_choice.py``). Keys
are table rows; scores are inner products of unit vectors, i.e. cosines. Callers re-score the
candidates exactly, so the index only has to find them: it holds int8 vectors and 32 links per
node (against float16 and 16: at 140 K MiniLM-like rows and ``ef`` 256, recall of the exact
top-2 0.995 instead of 0.953 in 2.5 ms either way, a 28 % smaller index built 1.5× faster;
``benchmarks/ann_settings.py``, RESULTS §6)."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from ..core.errors import ConfigError, StoreCorruptError

_PARK = 1 << 48  # above any table row
DTYPE = "i8"  # how the index holds its vectors (re-scored from the table's)
CONNECTIVITY = 32  # links per node
# the stores' defaults: a node kind of at least THRESHOLD nodes is searched through an index
# (beam EF), its k x OVERFETCH candidates re-scored exactly (the embedded store's options
# ann_threshold, ann_ef, ann_overfetch; the PostgreSQL store's graph cache)
THRESHOLD = 20_000
EF = 256
OVERFETCH = 8


def available() -> bool:
    """True when the ANN library (extra ``ann``) is installed (nothing is imported)."""
    return importlib.util.find_spec("usearch") is not None


def _index_class() -> Any:
    """usearch's ``Index``. onnxruntime (extra ``fast``) is imported first when installed:
    importing it after usearch's compiled module crashes the process (usearch 2.26,
    onnxruntime 1.32: segmentation fault), the other order works."""
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401
    from usearch.index import Index

    return Index


def require() -> None:
    if not available():
        raise ConfigError(
            "ann=True needs the 'ann' extra (usearch): pip install 'remindrag-integrations[ann]'"
        )


class AnnIndex:
    """One HNSW index; ``ef`` is the search beam width (recall against speed)."""

    def __init__(
        self, dim: int, ef: int, connectivity: int = CONNECTIVITY, dtype: str = DTYPE
    ) -> None:
        self.ef = ef
        self._index: Any = _index_class()(
            ndim=dim, metric="ip", dtype=dtype, connectivity=connectivity, expansion_search=ef
        )

    def __len__(self) -> int:
        return len(self._index)

    def add(self, rows: np.ndarray, vecs: np.ndarray) -> None:
        if len(rows):
            self._index.add(rows.astype(np.uint64), np.ascontiguousarray(vecs, np.float32))

    def remove(self, rows: list[int]) -> None:
        if rows:
            self._index.remove(np.asarray(rows, dtype=np.uint64))

    def search(self, queries: np.ndarray, k: int) -> list[np.ndarray]:
        """Candidate rows for each query (at most ``k``; fewer when the index is smaller)."""
        k = min(k, len(self))
        if k <= 0:
            return [np.zeros(0, np.int64) for _ in queries]
        found = self._index.search(np.ascontiguousarray(queries, np.float32), k, threads=1)
        if len(queries) == 1:  # one query: a flat match list
            return [np.asarray(found.keys, dtype=np.int64)]
        keys = np.asarray(found.keys, dtype=np.int64)
        return [keys[i, : found.counts[i]] for i in range(len(queries))]

    def to_bytes(self) -> bytes:
        return bytes(self._index.save())

    def rekey(self, old: np.ndarray, new: np.ndarray) -> None:
        """Give the vectors stored under keys ``old`` the keys ``new`` (a permutation-safe
        two-step rename through keys no row can have)."""
        if len(old):
            parked = old.astype(np.uint64) + np.uint64(_PARK)
            self._index.rename(old.astype(np.uint64), parked)
            self._index.rename(parked, new.astype(np.uint64))

    @classmethod
    def from_bytes(cls, data: bytes, dim: int, ef: int) -> AnnIndex:
        try:
            index = _index_class().restore(bytearray(data))
        except (RuntimeError, ValueError) as exc:
            raise StoreCorruptError(f"the saved ANN index is unreadable: {exc}") from exc
        if index is None or index.ndim != dim:
            raise StoreCorruptError("the saved ANN index does not match the store")
        out = cls.__new__(cls)
        out.ef = ef
        out._index = index
        out._index.expansion_search = ef
        return out
