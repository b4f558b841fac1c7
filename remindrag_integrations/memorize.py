"""Memorization after the answer (SPEC §3): which edges were effective, and the filter step."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from .llms import Ask, Step
from .prompts import FILTER_PROMPT, parse_filter
from .protocols import GraphStore
from .types import LLMError, LLMOutputError, Trace


def path_to_seed(parents: dict[str, tuple[str | None, str | None]], node: str) -> list[str]:
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


def split_edges(
    parents: dict[str, tuple[str | None, str | None]],
    supporting_chunks: Iterable[str],
    supporting_edges: Iterable[str],
) -> tuple[list[str], list[str]]:
    """(effective, ineffective) subgraph edges: effective ones lie on a path from a seed to a
    supporting chunk or edge; every other subgraph edge is ineffective."""
    child_of_edge = {e: n for n, (_, e) in parents.items() if e is not None}
    effective: dict[str, None] = {}
    targets = [c for c in supporting_chunks if c in parents]
    targets += [child_of_edge[e] for e in supporting_edges if e in child_of_edge]
    for node in targets:
        for e in path_to_seed(parents, node):
            effective[e] = None
    ineffective = [e for e in child_of_edge if e not in effective]
    return list(effective), ineffective


def bridge_paths(
    store: GraphStore,
    subgraph: dict[str, tuple[str | None, str | None]],
    chunk_ids: Sequence[str],
    max_depth: int,
    max_nodes: int = 20_000,
) -> dict[str, tuple[str | None, str | None]]:
    """Parent entries that connect chunks outside the subgraph to it: for each chunk the
    shortest graph path (at most ``max_depth`` hops, chunk nodes never passed through) from
    any subgraph node to the chunk's anchor, then the anchor's contains edge. Chunks that
    cannot be reached within the bounds are left out."""
    targets = {"a-" + c[2:]: c for c in chunk_ids if c not in subgraph}
    prev: dict[str, tuple[str | None, str | None]] = {
        n: (None, None) for n in subgraph if not n.startswith("c-")
    }
    frontier = deque((n, 0) for n in prev)
    found: list[str] = []
    while frontier and len(found) < len(targets) and len(prev) < max_nodes:
        node, depth = frontier.popleft()
        if depth >= max_depth:
            continue
        for e in store.neighbors(node):
            w = e.other(node)
            if w in prev or w.startswith("c-"):
                continue
            prev[w] = (node, e.id)
            if w in targets:
                found.append(w)
            frontier.append((w, depth + 1))
    out: dict[str, tuple[str | None, str | None]] = {}
    for anchor in found:
        contains = next(e for e in store.neighbors(anchor) if e.kind == "contains")
        out[targets[anchor]] = (anchor, contains.id)
        node = anchor
        while node not in subgraph:
            out[node] = prev[node]
            node = prev[node][0]  # type: ignore[assignment]
    return out


def filter_step(
    trace: Trace,
    store: GraphStore,
    answer: str,
    chunk_chars: int,
    chunk_scores: dict[str, float],
    template: str = FILTER_PROMPT,
) -> Step:
    """Ask which chunks and edges supported the answer; returns (chunk ids, edge ids) that are
    in the subgraph. An unusable reply is re-asked once, then treated as 'no support'."""
    chunks = (
        "\n".join(
            f"[{cid}] {' '.join(store.get_chunk(cid).text.split())[:chunk_chars]}"
            for cid in trace.chunk_ids
        )
        or "(none)"
    )
    lines = []
    for node, (parent, eid) in trace.parents.items():
        if eid is None:
            continue
        e = store.get_edge(eid)
        lines.append(
            f"- {eid} | {store.get_node(parent).name} | {e.text} | "  # type: ignore[arg-type]
            f"{store.get_node(node).name}"
        )
    prompt = template.format(
        query=trace.query,
        answer=answer or "(not given)",
        chunks=chunks,
        edges="\n".join(lines) or "(none)",
    )
    context = {"chunk_scores": chunk_scores, "answer": answer}
    problem = ""
    for attempt in range(2):
        text = (
            prompt
            if attempt == 0
            else prompt + f"\nYour previous reply was unusable "
            f"({problem}). Reply with the JSON object only.\n"
        )
        try:
            reply = yield Ask("memorize", text, context)
            chunk_ids, edge_ids = parse_filter(reply or "")
            subgraph_edges = set(trace.subgraph_edges)
            return (
                [c for c in chunk_ids if c in trace.parents],
                [e for e in edge_ids if e in subgraph_edges],
            )
        except LLMOutputError as exc:
            problem = str(exc)
        except LLMError:
            return [], []
    return [], []
