"""The one write path of memory (docs/method.md §3), used by memorize, feedback and teach.

support (a filter's verdict, citations, a user's thumbs, known answers) → bridge: a supporting
chunk the walk never reached is connected by the shortest graph path from the subgraph; one
the graph has no such path to gets a **learned edge** from each seed to its anchor (kind
``learned``, id ``l-…``: a link memory made, followed by replay only) → effective edges (on a
path from a seed to support) and ineffective ones (the rest of the subgraph) → one atomic
store update (enhance / penalise, :mod:`.math`; the learned edges are added in that same
update).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import UnknownNodeError
from ..frontier import AdjacencyStore, adjacency
from ..ids import anchor_of, contains_edge_of, edge_id, is_chunk
from ..store import GraphStore, reading
from ..types import Edge, MemoryWrite, Trace
from ..walk import Parents
from .filter import Support
from .math import memory_update


def path_to_seed(parents: Parents, node: str) -> list[str]:
    """Edges from ``node`` back to the seed it grew from (the subgraph is a forest)."""
    edges: list[str] = []
    seen = set()
    while node in parents and node not in seen:
        seen.add(node)
        parent, edge = parents[node]
        if edge is None:
            break
        edges.append(edge)
        node = parent  # type: ignore[assignment]
    return edges


def split_edges(parents: Parents, support: Support) -> tuple[list[str], list[str]]:
    """(effective, ineffective) subgraph edges: effective ones lie on a path from a seed to a
    supporting chunk or edge; every other subgraph edge is ineffective."""
    child_of_edge = {e: n for n, (_, e) in parents.items() if e is not None}
    effective: dict[str, None] = {}
    targets = [c for c in support.chunks if c in parents]
    targets += [child_of_edge[e] for e in support.edges if e in child_of_edge]
    for node in targets:
        for e in path_to_seed(parents, node):
            effective[e] = None
    ineffective = [e for e in child_of_edge if e not in effective]
    return list(effective), ineffective


def bridge_paths(
    store: GraphStore,
    subgraph: Parents,
    chunk_ids: Sequence[str],
    max_depth: int,
    max_nodes: int = 20_000,
) -> Parents:
    """Parent entries that connect chunks outside the subgraph to it: for each chunk the
    shortest graph path (at most ``max_depth`` hops, chunk nodes never passed through) from
    any subgraph node to the chunk's anchor, then the anchor's contains edge. Chunks that
    cannot be reached within the bounds are left out.

    Breadth first, one level at a time: the edges of a level's nodes are one read
    (:func:`..frontier.adjacency`), on a store with batched reads through one snapshot
    (PostgreSQL: from its graph cache, no statement, where it was a statement per node:
    thousands for one write, issue 49); the nodes are visited in the same order as node by
    node, so the paths are the same."""
    targets = {anchor_of(c): c for c in chunk_ids if c not in subgraph}
    if not targets:
        return {}
    if not isinstance(store, AdjacencyStore):  # reads cost no round trip: no snapshot
        return _bridge(store, subgraph, targets, max_depth, max_nodes)
    with reading(store) as view:
        return _bridge(view, subgraph, targets, max_depth, max_nodes)


def _bridge(
    store: GraphStore, subgraph: Parents, targets: dict[str, str], max_depth: int, max_nodes: int
) -> Parents:
    prev: Parents = {n: (None, None) for n in subgraph if not is_chunk(n)}
    level, depth = list(prev), 0
    found: list[str] = []
    while level and depth < max_depth and len(found) < len(targets) and len(prev) < max_nodes:
        around = _edges_of(store, level)
        nxt: list[str] = []
        for node in level:
            if len(found) >= len(targets) or len(prev) >= max_nodes:
                break
            for e in around.get(node, ()):  # a node a document edit removed: no edges
                w = e.other(node)
                if w in prev or is_chunk(w):
                    continue
                prev[w] = (node, e.id)
                if w in targets:
                    found.append(w)
                nxt.append(w)
        level, depth = nxt, depth + 1
    out: Parents = {}
    anchors = _edges_of(store, found)
    for anchor in found:
        contains = next((e for e in anchors.get(anchor, ()) if e.kind == "contains"), None)
        if contains is None:  # an anchor without its chunk: nothing to reach
            continue
        out[targets[anchor]] = (anchor, contains.id)
        node = anchor
        while node not in subgraph:
            out[node] = prev[node]
            node = prev[node][0]  # type: ignore[assignment]
    return out


def _edges_of(store: GraphStore, node_ids: Sequence[str]) -> dict[str, list[Edge]]:
    """The edges of each node, in one read; nodes a document edit removed since the
    retrieval are left out (read node by node only then)."""
    if not node_ids:
        return {}
    try:
        return adjacency(store, node_ids)
    except UnknownNodeError:
        out: dict[str, list[Edge]] = {}
        for n in dict.fromkeys(node_ids):
            try:
                out[n] = store.neighbors(n)
            except UnknownNodeError:
                continue
        return out


LEARNED_TEXT = "remembered link"


def learned_links(seeds: Sequence[str], chunk_ids: Sequence[str]) -> tuple[list[Edge], Parents]:
    """A learned edge from every seed (not a chunk) to the anchor of every chunk, and parent
    entries that reach each chunk through one of them and its contains edge."""
    links: list[Edge] = []
    parents: Parents = {}
    starts = [s for s in seeds if not is_chunk(s)]
    for c in chunk_ids:
        a = anchor_of(c)
        for s in starts:
            if s != a:
                links.append(Edge(edge_id("learned", s, a), s, a, "learned", LEARNED_TEXT))
                parents.setdefault(a, (s, links[-1].id))
        if a in parents or a in starts:
            parents[c] = (a, contains_edge_of(c))
    return links, parents


def write(
    trace: Trace,
    store: GraphStore,
    support: Support,
    *,
    helpful: bool = True,
    max_depth: int = 4,
    penalise: bool = True,
    link_from: Sequence[str] | None = None,
) -> MemoryWrite:
    """Apply one memory write for ``trace``. Helpful: enhance the paths to ``support`` (bridged
    into the graph when the walk never reached it, else linked by learned edges from the
    seeds, or from ``link_from``) and, with ``penalise`` (a judge's or a user's word),
    penalise the rest of the subgraph. Unhelpful: penalise the paths to ``support``, or, with
    no support named, every subgraph edge. Returns what was done; nothing is written when
    there is nothing to write."""
    q = np.asarray(trace.query_embedding, dtype=np.float32)
    if not helpful:
        effective, _ = split_edges(trace.parents, support)
        bad = effective if (support.chunks or support.edges) else trace.subgraph_edges
        if not bad:
            return skipped(trace, "nothing was traversed")
        update(store, [], bad, q)
        return MemoryWrite(trace.trace_id, True, [], bad, [], [])
    outside = [c for c in support.chunks if c not in trace.parents]
    parents = {**trace.parents, **bridge_paths(store, trace.parents, outside, max_depth)}
    far = [c for c in outside if c not in parents]
    links, linked = learned_links(trace.seeds if link_from is None else link_from, far)
    parents = {**linked, **parents}
    effective, ineffective = split_edges(parents, support)
    effective += [e.id for e in links if e.id not in effective]
    if not effective:
        return skipped(trace, "no supporting chunk or edge is reachable from the subgraph")
    chosen = set(effective)
    ineffective = [e for e in ineffective if e not in chosen] if penalise else []
    update(store, effective, ineffective, q, links)
    reached = [c for c in support.chunks if c in parents]
    edges = [e for e in support.edges if e in set(trace.subgraph_edges)]
    made = [e.id for e in links]
    return MemoryWrite(trace.trace_id, True, effective, ineffective, reached, edges, linked=made)


def update(
    store: GraphStore,
    enhance: Sequence[str],
    penalise: Sequence[str],
    query: np.ndarray,
    links: Sequence[Edge] = (),
) -> np.ndarray:
    """One atomic docs/method.md §3 write: the store adds ``links`` and applies
    :func:`.math.memory_update` under its lock."""
    fn = memory_update(enhance, penalise, query)
    return store.update_memory(fn.edge_ids, fn, links)


def skipped(trace: Trace, reason: str) -> MemoryWrite:
    return MemoryWrite(trace.trace_id, False, [], [], [], [], reason)
