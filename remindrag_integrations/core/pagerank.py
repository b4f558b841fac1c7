"""The prior's personalised PageRank, written once: the graph it spreads over as rows of
neighbours (:class:`Links`) and the power iteration over them (:func:`pagerank`); the forward
push over the same rows is :func:`.push.push`.

:class:`Links` is filled from whatever the store offers: the whole-graph matrix a store keeps
(:meth:`Links.of_matrix`, the embedded store: data only, its rows as they are) or the walk's
reads of the question's local graph (:meth:`Links.of_rows` for the neighbourhood,
:class:`.push.Local` for the push, which reads as it goes). Either way the graph is the
spread's: entities and anchors and the corpus's edges between them (no chunk ends, no
learned edges), and an entity with more than ``prior.max_degree`` edges (a hub) keeps what
reaches it and spreads nothing (a local read leaves a hub's edges out; over a matrix a hub's
row spreads over 0 edges).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .store import GraphMatrixView


class Links:
    """A graph as rows of neighbours, CSR-like: row ``i`` (node ``ids[i]``, ``pos`` the other
    way) has the entries ``flat[start[i]:end[i]]`` (neighbour rows), ``weight`` the edges
    behind each entry (None: one each), and hands its mass over ``spread[i]`` edges (its
    entries' weights summed; 0: it spreads nothing, a hub). A push counts a row once it has
    read it (:meth:`fetch`: ``read``); ``shut``: the rows a metadata filter shuts out (read,
    they take no mass; None: none). ``product``: ``y ↦ A y`` over all rows, the
    store's own sparse product of its symmetric matrix (else a gather over the entries)."""

    def __init__(
        self,
        ids: Sequence[str],
        pos: Mapping[str, int],
        start: np.ndarray,
        end: np.ndarray,
        flat: np.ndarray,
        spread: np.ndarray,
        *,
        weight: np.ndarray | None = None,
        product: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        self.ids, self.pos = ids, pos
        self.start, self.end, self.flat, self.spread = start, end, flat, spread
        self.weight, self.product = weight, product
        self.read = np.zeros(len(ids), bool)
        self.shut: np.ndarray | None = None

    @classmethod
    def of_matrix(cls, m: GraphMatrixView, max_degree: int) -> Links:
        """The rows of a store's whole-graph matrix, as they are (no copy); an entity of
        more than ``max_degree`` edges spreads nothing. None read yet."""
        a, spread = m.adjacency, m.degree
        hubs = spread > max_degree
        if hubs.any():
            spread = np.where(hubs & m.entities, 0, spread)
        return cls(
            m.ids,
            m.pos,
            a.indptr[:-1],
            a.indptr[1:],
            a.indices,
            spread,
            weight=a.data,
            product=a.__matmul__,
        )

    @classmethod
    def of_rows(
        cls, ids: Sequence[str], pos: Mapping[str, int], count: Sequence[int], flat: Sequence[int]
    ) -> Links:
        """Rows read already: ``ids`` (``pos`` the other way), how many neighbours each has
        (one entry per edge; a hub: none) and their rows, row after row."""
        end = np.cumsum(np.asarray(count, np.int64))
        spread = np.diff(end, prepend=0)
        links = cls(ids, pos, end - spread, end, np.asarray(flat, np.int64), spread)
        links.read[:] = True
        return links

    def entries(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """How many entries each of ``rows`` has, and the flat positions of all of them (row
        by row, in one gather)."""
        count = self.end[rows] - self.start[rows]
        at = np.repeat(self.start[rows] - np.cumsum(count) + count, count)
        return count, at + np.arange(count.sum())

    def see(self, nodes: Sequence[str]) -> None:
        """Make rows of ``nodes`` that have none (:class:`.push.Local` does; a whole-graph
        matrix has every row it will have)."""

    def fetch(self, rows: np.ndarray) -> None:
        """Read ``rows`` (their entries are all here already: count them read)."""
        self.read[rows] = True


def restart_vector(
    links: Links, restart: Mapping[str, float], dtype: type | np.dtype = np.float64
) -> np.ndarray:
    """``restart`` over the rows (nodes they do not have left out, no negative mass),
    normalised to 1; all zero when no mass is left."""
    p = np.zeros(len(links.ids), dtype)
    for node, mass in restart.items():
        if node in links.pos:
            p[links.pos[node]] = max(mass, 0.0)
    total = p.sum()
    return p / total if total > 0 else np.zeros_like(p)


def pagerank(
    links: Links, restart: Mapping[str, float], damping: float, iterations: int
) -> np.ndarray:
    """Personalised PageRank mass of every row from ``restart`` by the power iteration
    ``x ← (1 - damping) p + damping A D⁻¹ x`` (``iterations`` steps; D: what each row spreads
    over, a hub nothing: what reaches it is lost, as is what reaches a row without entries).
    In the dtype of the rows' spread (the embedded store's float32 matrix stays float32)."""
    spread = links.spread
    out = np.zeros(len(spread), np.result_type(spread, np.float32))  # ints: float64
    inv = np.divide(1.0, spread, out=out, where=spread > 0)
    p = restart_vector(links, restart, inv.dtype)
    if not p.any():
        return p
    flow = links.product or _gather(links)
    x = p.copy()
    for _ in range(iterations):
        x = (1.0 - damping) * p + damping * flow(x * inv)
    return x


def _gather(links: Links) -> Callable[[np.ndarray], np.ndarray]:
    """``y ↦`` what every row receives along the entries (row i gives ``y[i]`` to each of its
    entries' rows, times the entry's weight)."""
    n = len(links.ids)
    rows = np.arange(n)
    count, at = links.entries(rows)
    src, dst = np.repeat(rows, count), links.flat[at]
    w = links.weight[at] if links.weight is not None else None

    def flow(y: np.ndarray) -> np.ndarray:
        given = y[src] if w is None else y[src] * w
        return np.bincount(dst, weights=given, minlength=n)

    return flow
