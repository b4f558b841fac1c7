"""The whole graph out of a store: as plain lists, or as a ``networkx.MultiGraph`` for your own
analysis and drawing.

Reads go through the :class:`~.core.store.GraphStore` protocol only (``whole_graph()``,
then the memory vectors in one batch), so any store that passes the store contract can be
exported. A store with snapshots is read through one: the graph and its memory are of one
version even while others write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .core.store import GraphStore, reading
from .core.types import Edge, Node

if TYPE_CHECKING:
    import networkx as nx


@dataclass(frozen=True)
class GraphData:
    """Every node and edge of a store's namespace, and the memory norm of every edge."""

    nodes: list[Node]
    edges: list[Edge]
    memory_norm: dict[str, float]


def read_graph(store: GraphStore) -> GraphData:
    """The whole graph of ``store`` (its namespace)."""
    with reading(store) as view:
        nodes, edges = view.whole_graph()
        norms = np.linalg.norm(view.memory([e.id for e in edges]), axis=1) if edges else []
    return GraphData(nodes, edges, {e.id: float(v) for e, v in zip(edges, norms)})


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
