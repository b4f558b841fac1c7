"""Seed search for the embedded store: node vectors (:mod:`.vectors`) and, per node kind, an
exact scan or an ANN index (:mod:`.ann`).

A kind is searched through the ANN index when ANN is on (``ann=True``, or ``ann=None`` with
the extra installed) and it holds at least ``threshold`` nodes (``ann=True``: any number). The
index is built on the first search that needs it and then follows every insert and delete.
Its candidates are re-scored exactly against the stored vectors. A metadata filter keeps the
ANN path by dropping those of its ``k × overfetch`` candidates that fail; when fewer than
``k`` pass, that query falls back to the exact scan of the kind. Kinds below the
threshold are scanned exactly, from a float32 copy cached per kind set (small by definition).

A snapshot (:meth:`NodeIndex.pin`) sees the members and vectors of its moment: writes after
it copy what they change. The ANN indexes are shared by the store and its snapshots (one
lock guards them and every write): a row freed while a snapshot lives stays in them until
:meth:`NodeIndex.release`, and every reader drops the candidates it does not hold. A
snapshot builds a missing index for the store only while nothing was written since it was
taken; otherwise it scans that kind exactly.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable, Sequence

import numpy as np

from ..core.errors import ConfigError
from ..core.types import Node, NodeKind
from . import ann as ann_mod
from .vectors import EmbeddingTable, VectorDtype

Hits = list[tuple[str, float]]
Passing = Callable[[list[str]], np.ndarray]  # ids -> mask of those the filter keeps
KINDS: tuple[NodeKind, ...] = ("chunk", "anchor", "entity")
_BLOCK = 16_384  # rows per block of an uncached exact scan


def check_options(ann: object, threshold: object, ef: object, overfetch: object) -> None:
    """:class:`ConfigError` for a bad ANN option."""
    if ann not in (None, True, False):
        raise ConfigError(f"ann must be True, False or None (auto), got {ann!r}")
    for name, value, low in (("ann_threshold", threshold, 0), ("ann_ef", ef, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    if isinstance(overfetch, bool) or not isinstance(overfetch, int) or overfetch < 1:
        raise ConfigError(f"ann_overfetch must be an integer >= 1, got {overfetch!r}")
    if ann is True:
        ann_mod.require()


class NodeIndex:
    """Node vectors by id, and top-k search by cosine within node kinds."""

    def __init__(
        self,
        dtype: VectorDtype = "float16",
        ann: bool | None = None,
        threshold: int = ann_mod.THRESHOLD,
        ef: int = ann_mod.EF,
        overfetch: int = ann_mod.OVERFETCH,
    ) -> None:
        check_options(ann, threshold, ef, overfetch)
        self.table = EmbeddingTable(dtype)
        self.ann = ann_mod.available() if ann is None else ann
        self.threshold = 0 if ann is True else threshold
        self.ef, self.overfetch = ef, overfetch
        self._members: dict[NodeKind, dict[str, None]] = {k: {} for k in KINDS}
        self._exact: dict[str, tuple[list[str], np.ndarray]] = {}
        self._ann: dict[NodeKind, ann_mod.AnnIndex] = {}
        self._ann_lock = threading.Lock()  # the ANN indexes are shared by every snapshot
        self._shared = False  # a snapshot shares ``_members``: copy before writing
        self._ann_held: list[tuple[int, NodeKind, int]] = []  # (version, kind, row)
        self._live: NodeIndex | None = None  # a snapshot's store-side index

    def pin(self) -> NodeIndex:
        """A read-only copy of the index as it is now (the caller holds the store's lock)."""
        view = copy.copy(self)
        view.table, view._live = self.table.pin(), self
        self._shared = True
        return view

    def _own(self) -> None:
        if self._shared:
            self._members = {k: dict(v) for k, v in self._members.items()}
            self._shared = False

    # --- contents -------------------------------------------------------------------------
    def put(self, nodes: Sequence[Node], vecs: np.ndarray) -> None:
        """Add the nodes not yet present (present ones keep their vector)."""
        new = [i for i, n in enumerate(nodes) if n.id not in self.table]
        if not new:
            return
        with self._ann_lock:  # a snapshot building an index waits, then sees the change
            self._own()
            rows = self.table.put([nodes[i].id for i in new], vecs[new])
            for kind in KINDS:
                pos = [j for j, i in enumerate(new) if nodes[i].kind == kind]
                self._members[kind].update((nodes[new[j]].id, None) for j in pos)
                if pos and kind in self._ann:
                    self._ann[kind].add(rows[pos], vecs[[new[j] for j in pos]])
            self._exact = {}  # a new dict: snapshots keep theirs

    def fill(self, nodes: Sequence[Node], vecs: np.ndarray) -> None:
        """Hold exactly these nodes (an empty index: a load from rows already checked)."""
        with self._ann_lock:
            self._own()
            self.table.fill([n.id for n in nodes], vecs)
            for n in nodes:
                self._members[n.kind][n.id] = None
            self._exact = {}

    def drop(self, nodes: Sequence[Node], version: int | None = None) -> None:
        """Forget the nodes; ``version``: see :meth:`.EmbeddingTable.drop`."""
        with self._ann_lock:
            self._own()
            for kind in KINDS:
                ids = [n.id for n in nodes if n.kind == kind and n.id in self._members[kind]]
                for i in ids:
                    del self._members[kind][i]
                freed = self.table.drop(ids, version)
                if kind in self._ann and version is not None:  # snapshots may search them
                    self._ann_held += [(version, kind, r) for r in freed]
                elif kind in self._ann:
                    self._ann[kind].remove(freed)
            self._exact = {}

    def release(self, oldest: int | None) -> None:
        """Free the rows held for snapshots older than ``oldest`` (see
        :meth:`.EmbeddingTable.release`), removing them from the ANN indexes first."""
        ready = [(k, r) for v, k, r in self._ann_held if oldest is None or v <= oldest]
        if ready:
            self._ann_held = [h for h in self._ann_held if oldest is not None and h[0] > oldest]
            with self._ann_lock:
                for kind in {k for k, _ in ready}:
                    self._ann[kind].remove([r for k, r in ready if k == kind])
        self.table.release(oldest)

    def get(self, node_ids: Sequence[str]) -> np.ndarray:
        return self.table.get(node_ids)

    def uses_ann(self, kind: NodeKind) -> bool:
        size = len(self._members[kind])
        return self.ann and size > 0 and size >= self.threshold

    # --- search ---------------------------------------------------------------------------
    def search(
        self, queries: np.ndarray, k: int, kinds: Sequence[NodeKind], passing: Passing | None
    ) -> list[Hits]:
        """Top ``k`` (id, cosine) per row of ``queries`` (unit rows), best first."""
        if k <= 0:
            return [[] for _ in queries]
        big = [kd for kd in KINDS if kd in kinds and self.uses_ann(kd)]
        small = [kd for kd in KINDS if kd in kinds and kd not in big]
        parts = [self._ann_search(queries, k, kd, passing) for kd in big]
        if small or not big:
            parts.append(self._exact_search(queries, k, small, passing, cache=True))
        if len(parts) == 1:
            return parts[0]
        return [_best(sum((p[i] for p in parts), []), k) for i in range(len(queries))]

    def _exact_search(
        self,
        queries: np.ndarray,
        k: int,
        kinds: Sequence[NodeKind],
        passing: Passing | None,
        cache: bool,
    ) -> list[Hits]:
        ids, sims = self._scan(queries, kinds, cache)
        if not ids:
            return [[] for _ in queries]
        if passing is not None:
            sims[:, ~passing(ids)] = -np.inf
        if k == 1:  # the best per row in one pass (the earliest of equals, as below)
            best = np.argmax(sims, axis=1)
            values = sims[np.arange(len(sims)), best]
            return [
                [(ids[j], v)] if math.isfinite(v) else []
                for j, v in zip(best.tolist(), values.tolist())
            ]
        out: list[Hits] = []
        for row in sims:
            kk = min(k, int(np.isfinite(row).sum()))
            if kk == 0:
                out.append([])
                continue
            top = np.argpartition(-row, kk - 1)[:kk]
            top = top[np.lexsort((top, -row[top]))]
            out.append([(ids[i], float(row[i])) for i in top])
        return out

    def _scan(
        self, queries: np.ndarray, kinds: Sequence[NodeKind], cache: bool
    ) -> tuple[list[str], np.ndarray]:
        """Every node of ``kinds`` and its cosine to each query (queries × nodes)."""
        key = ",".join(sorted(kinds))
        if key in self._exact:
            ids, mat = self._exact[key]
            return ids, queries @ mat.T
        ids = [i for kd in KINDS if kd in kinds for i in self._members[kd]]
        rows = self.table.rows_of(ids)
        if cache:
            mat = self.table.at(rows)
            self._exact[key] = (ids, mat)
            return ids, queries @ mat.T
        sims = np.empty((len(queries), len(ids)), dtype=np.float32)
        for start in range(0, len(ids), _BLOCK):
            block = self.table.at(rows[start : start + _BLOCK])
            sims[:, start : start + _BLOCK] = queries @ block.T
        return ids, sims

    def _ann_search(
        self, queries: np.ndarray, k: int, kind: NodeKind, passing: Passing | None
    ) -> list[Hits]:
        index = self._index(kind)
        if index is None:  # a snapshot of an older version, and no index built yet
            return self._exact_search(queries, k, (kind,), passing, cache=False)
        # k x overfetch candidates: a filter drops some, and the exact re-scoring corrects
        # the index's int8 ranking (free: the HNSW beam of ``ef`` already holds them)
        fetch = k * self.overfetch
        members = self._members[kind]
        with self._ann_lock:
            found = index.search(queries, fetch)
        out: list[Hits] = []
        for q, rows in zip(queries, found):
            got = self.table.ids_at(rows)  # a snapshot drops rows added or freed after it
            mine = [j for j, i in enumerate(got) if i is not None and i in members]
            if len(mine) < len(got):
                rows = rows[mine]
            ids = [str(got[j]) for j in mine]
            sims = self.table.at(rows) @ q
            if passing is not None and len(ids):
                keep = passing(ids)
                if keep.sum() < k and len(ids) == fetch:  # too few pass: scan this kind
                    out += self._exact_search(q[None, :], k, (kind,), passing, cache=False)
                    continue
                ids, sims = [i for i, ok in zip(ids, keep) if ok], sims[keep]
            out.append(_best(list(zip(ids, map(float, sims))), k))
        return out

    # --- persistence of built indexes ------------------------------------------------------
    def saved_indexes(self) -> dict[NodeKind, tuple[list[str], list[int], bytes]]:
        """Each built ANN index as (its node ids, their keys = table rows, its bytes)."""
        out = {}
        held = {k for _, k, _ in self._ann_held}
        for kind, index in self._ann.items():
            if kind in held:  # it still holds rows of deleted nodes: rebuilt after a load
                continue
            ids = list(self._members[kind])
            out[kind] = (ids, self.table.rows_of(ids).tolist(), index.to_bytes())
        return out

    def adopt_index(self, kind: NodeKind, ids: list[str], keys: list[int], data: bytes) -> bool:
        """Use a saved index of ``kind`` (see :meth:`saved_indexes`) when ANN is on and it
        holds exactly the kind's nodes; else it is ignored (and rebuilt when needed)."""
        members = self._members[kind]
        if not self.ann or not ann_mod.available() or set(ids) != members.keys():
            return False
        if len(keys) != len(ids):
            raise ValueError("saved ANN keys do not match their ids")
        index = ann_mod.AnnIndex.from_bytes(data, self.table.matrix().shape[1], self.ef)
        if len(index) != len(ids):
            raise ValueError("saved ANN index does not hold its ids")
        index.rekey(np.asarray(keys, dtype=np.int64), self.table.rows_of(ids))
        self._ann[kind] = index
        return True

    def _index(self, kind: NodeKind) -> ann_mod.AnnIndex | None:
        """The kind's ANN index, built from the stored vectors on first use; None for a
        snapshot when the store has changed since it was taken and has no index yet (an
        index built from the snapshot would miss the store's later writes)."""
        found = self._ann.get(kind)
        if found is not None:
            return found
        live = self._live or self
        with self._ann_lock:  # writes hold it: none is half done while this looks
            if kind not in self._ann:
                if live._members is not self._members:
                    return None
                rows = self.table.rows_of(list(self._members[kind]))
                index = ann_mod.AnnIndex(self.table.matrix().shape[1], self.ef)
                for start in range(0, len(rows), _BLOCK):
                    block = rows[start : start + _BLOCK]
                    index.add(block, self.table.at(block))
                self._ann[kind] = index
            return self._ann[kind]


def _best(hits: Hits, k: int) -> Hits:
    return sorted(hits, key=lambda h: -h[1])[:k]
