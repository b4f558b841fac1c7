"""The whole graph out of a store: as plain lists, or as a ``networkx.MultiGraph`` for your own
analysis and drawing.

Reads go through the :class:`~.core.protocols.GraphStore` protocol only (every node of every
kind by a top-k search as wide as the graph, the edges from each node's neighbours, memory
vectors in one batch), so any store that passes the store contract can be exported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .core.protocols import GraphStore
from .core.types import Edge, Node, NodeKind

if TYPE_CHECKING:
    import networkx as nx

KINDS: tuple[NodeKind, ...] = ("chunk", "anchor", "entity")


@dataclass(frozen=True)
class GraphData:
    """Every node and edge of a store's namespace, and the memory norm of every edge."""

    nodes: list[Node]
    edges: list[Edge]
    memory_norm: dict[str, float]


def read_graph(store: GraphStore) -> GraphData:
    """The whole graph of ``store`` (its namespace)."""
    counts = store.counts()
    total = sum(counts.get(k, 0) for k in ("chunks", "anchors", "entities"))
    if not total or store.dim is None:
        return GraphData([], [], {})
    probe = np.zeros(store.dim, dtype=np.float32)
    probe[0] = 1.0
    ids = [i for i, _ in store.search(probe, total, KINDS)]
    nodes = store.get_nodes(ids)
    edges: dict[str, Edge] = {}
    for n in ids:
        for e in store.neighbors(n):
            edges.setdefault(e.id, e)
    edge_list = list(edges.values())
    norms = np.linalg.norm(store.memory([e.id for e in edge_list]), axis=1) if edge_list else []
    return GraphData(nodes, edge_list, {e.id: float(v) for e, v in zip(edge_list, norms)})


def to_networkx(store: GraphStore) -> nx.MultiGraph:
    """The graph as an undirected ``networkx.MultiGraph``: nodes carry ``kind``, ``name`` and
    ``document`` (the document id of a chunk or anchor, else ``None``); edges are keyed by
    their id and carry ``kind``, ``text`` and ``memory`` (the norm of the edge's memory
    vector: 0 for an edge no past query shaped)."""
    import networkx as nx

    data = read_graph(store)
    g = nx.MultiGraph(namespace=store.namespace)
    for n in data.nodes:
        g.add_node(n.id, kind=n.kind, name=n.name, document=n.doc_id)
    for e in data.edges:
        g.add_edge(e.u, e.v, key=e.id, kind=e.kind, text=e.text, memory=data.memory_norm[e.id])
    return g


__all__ = ["GraphData", "read_graph", "to_networkx"]
