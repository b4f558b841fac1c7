"""What a retrieved chunk carries into either framework: its document's metadata, its
provenance and the walk that found it."""

from __future__ import annotations

import json
from typing import Any

from .core.ids import hex_id
from .core.types import RetrievedChunk, Trace

# metadata keys that describe the walk, not the source: hidden from the LLM and the embedder
TRAVERSAL_KEYS = (
    "chunk_id",
    "chunk_index",
    "start",
    "end",
    "score",
    "trace_id",
    "source",
    "_path",
    "_path_edges",
    "_replayed",
)


def chunk_metadata(rc: RetrievedChunk, trace: Trace) -> dict[str, Any]:
    """The JSON-serialisable metadata of one retrieved chunk: its document's metadata, its
    provenance, and the traversal facts (``_path`` seed → chunk, ``_replayed``)."""
    c = rc.chunk
    nodes, edges = path_to(trace.parents, c.id)
    replayed = set(trace.replayed_edges)
    return {
        **c.metadata,
        "doc_id": c.doc_id,
        "chunk_id": c.id,
        "chunk_index": c.index,
        "start": c.start,
        "end": c.end,
        "score": float(rc.score),
        "trace_id": trace.trace_id,
        "source": rc.source,
        "_path": nodes,
        "_path_edges": edges,
        "_replayed": rc.source == "replay" or any(e in replayed for e in edges),
    }


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


def jsonable(metadata: Any) -> dict[str, Any]:
    """Metadata as plain JSON values (the store persists it); odd values become strings."""
    return json.loads(json.dumps(dict(metadata or {}), default=str))


def content_id(text: str) -> str:
    return "doc-" + hex_id(text, n=16)
