"""What a retrieved chunk carries into either framework: its document's metadata, its
provenance and the walk that found it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.store import GraphStore
from ..core.types import Retrieval, RetrievedChunk, Trace

NAMESPACE = "remindrag"
"""The one metadata key the library writes: everything it adds to a result lives under
``metadata["remindrag"]``; the document's own metadata keys are returned untouched. (A stored
document keeps its LlamaIndex display settings there: :mod:`.llama_index.convert`.)"""


def chunk_metadata(
    rc: RetrievedChunk, trace: Trace, names: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The JSON-serialisable metadata of one retrieved chunk: its document's metadata as
    given, plus ``metadata["remindrag"]``: ``doc_id``, ``chunk_id``, ``chunk_index``,
    ``start`` / ``end`` (offsets in the document), ``score`` (the relevance in [0, 1] one
    cutoff reads the same on every question: docs/retriever.md#scores), ``rank_score`` (the
    fused score the ranking sorts by), ``trace_id``, ``found_by``
    (seed, replay, traversal or dense_fill), ``path`` (node names seed → chunk), ``path_ids``,
    ``path_edges`` and ``replayed`` (whether remembered edges led there)."""
    c = rc.chunk
    nodes, edges = path_to(trace.parents, c.id)
    replayed = set(trace.replayed_edges)
    names = names or {}
    own = {
        "doc_id": c.doc_id,
        "chunk_id": c.id,
        "chunk_index": c.index,
        "start": c.start,
        "end": c.end,
        "score": float(rc.score),
        "rank_score": float(rc.rank_score if rc.rank_score is not None else rc.score),
        "trace_id": trace.trace_id,
        "found_by": rc.source,
        "path": [names.get(n, n) for n in nodes],
        "path_ids": nodes,
        "path_edges": edges,
        "replayed": rc.source == "replay" or any(e in replayed for e in edges),
    }
    return {**c.metadata, NAMESPACE: own}


def own_metadata(metadata: Any) -> dict[str, Any]:
    """What the library added to a result's metadata (``{}`` for anything else)."""
    own = metadata.get(NAMESPACE) if isinstance(metadata, Mapping) else None
    return own if isinstance(own, dict) else {}


def path_names(store: GraphStore, retrieval: Retrieval) -> dict[str, str]:
    """Node id -> name for every node on the paths to the retrieved chunks (one store call)."""
    ids = list(
        dict.fromkeys(
            n for rc in retrieval.chunks for n in path_to(retrieval.trace.parents, rc.chunk.id)[0]
        )
    )
    return {n.id: n.name for n in store.get_nodes(ids)} if ids else {}


def path_to(
    parents: dict[str, tuple[str | None, str | None]], node: str
) -> tuple[list[str], list[str]]:
    """Nodes and edges from the seed to ``node`` in a trace's subgraph (empty if absent)."""
    nodes: list[str] = []
    edges: list[str] = []
    seen: set[str] = set()
    cur: str | None = node
    while cur is not None and cur in parents and cur not in seen:
        seen.add(cur)
        nodes.append(cur)
        cur, edge = parents[cur]
        if edge is not None:
            edges.append(edge)
    return nodes[::-1], edges[::-1]
