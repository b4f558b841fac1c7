"""Neighbourhoods: what replay and the walk read about a node, for a whole frontier at once.

A remote store answers :meth:`~.store.FrontierStore.neighborhoods` in one round trip
(PostgreSQL: one statement), and :meth:`~.store.AdjacencyStore.adjacency` (the edges alone, for
the prior's PageRank) too; :func:`neighborhoods` and :func:`adjacency` fall back to the plain
:class:`~.store.GraphStore` reads for stores without them (the embedded store, where a read
costs no round trip). The capabilities and their data (:class:`~.store.Neighborhood`,
:class:`~.store.Follow`) live in :mod:`.store`; they are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .store import AdjacencyStore, Follow, FrontierStore, GraphStore, Neighborhood
from .types import Edge

__all__ = [
    "AdjacencyStore",
    "Follow",
    "FrontierStore",
    "Neighborhood",
    "adjacency",
    "neighborhoods",
    "read_neighborhoods",
]


def adjacency(store: GraphStore, node_ids: Sequence[str]) -> dict[str, list[Edge]]:
    """The edges of each distinct node of ``node_ids``: the store's own batched read when it
    has one, else ``neighbors`` node by node (the embedded store: no round trip)."""
    if isinstance(store, AdjacencyStore):
        return store.adjacency(node_ids)
    return {n: store.neighbors(n) for n in dict.fromkeys(node_ids)}


def neighborhoods(
    store: GraphStore, node_ids: Sequence[str], follow: Follow | None = None
) -> dict[str, Neighborhood]:
    """The neighbourhood of each distinct node of ``node_ids`` (see :class:`Follow`): the
    store's own batched read when it has one, else :func:`read_neighborhoods`."""
    if isinstance(store, FrontierStore):
        return store.neighborhoods(node_ids, follow)
    return read_neighborhoods(store, node_ids, follow)


def read_neighborhoods(
    store: GraphStore, node_ids: Sequence[str], follow: Follow | None = None
) -> dict[str, Neighborhood]:
    """Neighbourhoods from the plain store reads, breadth first along ``follow``."""
    out = _read_level(store, node_ids)
    level, depth = list(out), 0
    while follow is not None and level and depth < follow.max_depth:
        room = follow.max_nodes - (len(out) - len(dict.fromkeys(node_ids)))
        nxt = [o for n in level for o in _followed(out[n], follow) if o not in out][:room]
        out.update(_read_level(store, list(dict.fromkeys(nxt))))
        level, depth = nxt, depth + 1
    return out


def _followed(hood: Neighborhood, follow: Follow) -> list[str]:
    """The other ends of the node's edges whose memory passes ``follow``."""
    align = hood.memory @ follow.query if len(hood.edges) else np.zeros(0)
    return [e.other(hood.node.id) for e, a in zip(hood.edges, align) if a > follow.min_alignment]


def _read_level(store: GraphStore, node_ids: Sequence[str]) -> dict[str, Neighborhood]:
    ids = list(dict.fromkeys(node_ids))
    if not ids:
        return {}
    nodes = store.get_nodes(ids)
    embs = store.node_embeddings(ids)
    edges = adjacency(store, ids)
    flat = [e.id for n in ids for e in edges[n]]
    memory = store.memory(flat) if flat else np.zeros((0, embs.shape[1]), dtype=np.float32)
    # node by node, its edges are one slice of ``flat``; which rows hold memory is one
    # vectorised test (a hub has thousands of edges, nearly all without memory)
    touched = np.asarray(memory.any(axis=1), dtype=bool)
    ends = np.cumsum([0] + [len(edges[n]) for n in ids])
    remembered = {
        n: [edges[n][i].other(n) for i in np.flatnonzero(touched[a:b])]
        for n, a, b in zip(ids, ends[:-1], ends[1:])
    }
    others = list(dict.fromkeys(o for n in ids for o in remembered[n]))
    far = (
        dict(zip(others, zip(store.get_nodes(others), store.node_embeddings(others))))
        if others
        else {}
    )
    out = {}
    for n, node, emb, a, b in zip(ids, nodes, embs, ends[:-1], ends[1:]):
        seen = {o: far[o] for o in remembered[n]}
        out[n] = Neighborhood(node, emb, tuple(edges[n]), memory[a:b], seen)
    return out
