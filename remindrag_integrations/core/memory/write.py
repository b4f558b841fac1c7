"""The one write path of memory (SPEC §3), used by memorize, feedback and teach.

support (a filter's verdict, citations, a user's thumbs, known answers) → bridge: a supporting
chunk the walk never reached is connected by the shortest graph path from the subgraph →
effective edges (on a path from a seed to support) and ineffective ones (the rest of the
subgraph) → one atomic store update (enhance / penalise, :mod:`.math`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from ..ids import anchor_of, is_chunk
from ..protocols import GraphStore
from ..types import MemoryWrite, Trace
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
    cannot be reached within the bounds are left out."""
    targets = {anchor_of(c): c for c in chunk_ids if c not in subgraph}
    prev: Parents = {n: (None, None) for n in subgraph if not is_chunk(n)}
    frontier = deque((n, 0) for n in prev)
    found: list[str] = []
    while frontier and len(found) < len(targets) and len(prev) < max_nodes:
        node, depth = frontier.popleft()
        if depth >= max_depth:
            continue
        for e in store.neighbors(node):
            w = e.other(node)
            if w in prev or is_chunk(w):
                continue
            prev[w] = (node, e.id)
            if w in targets:
                found.append(w)
            frontier.append((w, depth + 1))
    out: Parents = {}
    for anchor in found:
        contains = next(e for e in store.neighbors(anchor) if e.kind == "contains")
        out[targets[anchor]] = (anchor, contains.id)
        node = anchor
        while node not in subgraph:
            out[node] = prev[node]
            node = prev[node][0]  # type: ignore[assignment]
    return out


def write(
    trace: Trace,
    store: GraphStore,
    support: Support,
    *,
    helpful: bool = True,
    max_depth: int = 4,
) -> MemoryWrite:
    """Apply one memory write for ``trace``. Helpful: enhance the paths to ``support`` (bridged
    into the graph when the walk never reached it) and penalise the rest of the subgraph.
    Unhelpful: penalise the paths to ``support``, or, with no support named, every subgraph
    edge. Returns what was done; nothing is written when there is nothing to write."""
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
    effective, ineffective = split_edges(parents, support)
    if not effective:
        return skipped(trace, "no supporting chunk or edge is reachable from the subgraph")
    update(store, effective, ineffective, q)
    reached = [c for c in support.chunks if c in parents]
    edges = [e for e in support.edges if e in set(trace.subgraph_edges)]
    return MemoryWrite(trace.trace_id, True, effective, ineffective, reached, edges)


def update(
    store: GraphStore, enhance: Sequence[str], penalise: Sequence[str], query: np.ndarray
) -> np.ndarray:
    """One atomic SPEC §3 write: the store applies :func:`.math.memory_update` under its lock."""
    fn = memory_update(enhance, penalise, query)
    return store.update_memory(fn.edge_ids, fn)


def skipped(trace: Trace, reason: str) -> MemoryWrite:
    return MemoryWrite(trace.trace_id, False, [], [], [], [], reason)
