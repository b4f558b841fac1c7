"""Neighbourhoods: what replay and the walk read about a node, for a whole frontier at once.

A remote store answers :meth:`FrontierStore.neighborhoods` in one round trip (PostgreSQL: one
statement); :func:`neighborhoods` falls back to the plain :class:`~.protocols.GraphStore`
reads for stores without it (the embedded store, where a read costs no round trip).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from .protocols import GraphStore
from .types import Edge, Node


@dataclass(frozen=True)
class Neighborhood:
    """A node, its embedding, its edges (ordered by id, as ``neighbors``) with their memory
    rows (zeros for untouched edges), and the node and embedding at the other end of every
    edge that has memory (the ones replay may follow)."""

    node: Node
    embedding: np.ndarray
    edges: tuple[Edge, ...]
    memory: np.ndarray
    remembered: Mapping[str, tuple[Node, np.ndarray]] = field(default_factory=dict)


@runtime_checkable
class FrontierStore(Protocol):
    """A store that reads the neighbourhoods of many nodes in one call."""

    def neighborhoods(self, node_ids: Sequence[str]) -> dict[str, Neighborhood]:
        """The neighbourhood of each distinct node; an unknown node raises
        :class:`~.types.UnknownNodeError`."""
        ...


def neighborhoods(store: GraphStore, node_ids: Sequence[str]) -> dict[str, Neighborhood]:
    """The neighbourhood of each distinct node of ``node_ids``: the store's own batched read
    when it has one, else :func:`read_neighborhoods`."""
    if isinstance(store, FrontierStore):
        return store.neighborhoods(node_ids)
    return read_neighborhoods(store, node_ids)


def read_neighborhoods(store: GraphStore, node_ids: Sequence[str]) -> dict[str, Neighborhood]:
    """Neighbourhoods from the plain store reads (a few calls for the whole frontier, plus
    one ``neighbors`` per node)."""
    ids = list(dict.fromkeys(node_ids))
    if not ids:
        return {}
    nodes = store.get_nodes(ids)
    embs = store.node_embeddings(ids)
    edges = {n: store.neighbors(n) for n in ids}
    flat = [e.id for n in ids for e in edges[n]]
    memory = store.memory(flat) if flat else np.zeros((0, embs.shape[1]), dtype=np.float32)
    rows = dict(zip(flat, memory))
    others = list(dict.fromkeys(e.other(n) for n in ids for e in edges[n] if rows[e.id].any()))
    far = (
        dict(zip(others, zip(store.get_nodes(others), store.node_embeddings(others))))
        if others
        else {}
    )
    out = {}
    for node, emb in zip(nodes, embs):
        mine = edges[node.id]
        mem_rows = np.stack([rows[e.id] for e in mine]) if mine else memory[:0]
        seen = {e.other(node.id) for e, m in zip(mine, mem_rows) if m.any()}
        out[node.id] = Neighborhood(node, emb, tuple(mine), mem_rows, {o: far[o] for o in seen})
    return out
