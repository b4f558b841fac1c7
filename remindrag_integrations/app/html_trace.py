"""A self-contained HTML picture of one retrieval trace (inline SVG, no external assets).

The subgraph is drawn as the forest it is (every node but the seeds was added through one
edge), seeds on the left. Edges show how they were added (memory replay, a forward move of
the navigator, reading an anchor's chunk) and what memorization did to them (enhanced or
penalised); backward moves are dotted arcs.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..core.store import GraphStore
from ..core.types import Node, Trace

COL, ROW, PAD, BOX = 290, 44, 30, 180
KIND_FILL = {"entity": "#fff4c2", "anchor": "#d8ecff", "chunk": "#e8e8e8"}
ADDED_COLOUR = {"replay": "#1f6fd1", "forward": "#e07b00", "read": "#8a8a8a", "other": "#8a8a8a"}
CSS = """
body{font-family:system-ui,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222}
h1{font-size:20px;margin:0 0 4px} .meta{color:#555;margin-bottom:12px}
table{border-collapse:collapse;margin:8px 0 20px;font-size:13px}
td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} svg text{font-size:12px} .legend span{margin-right:16px}
.graph{overflow-x:auto;max-width:100%}
"""


def _depths(trace: Trace) -> dict[str, int]:
    depth: dict[str, int] = {}

    def find(n: str) -> int:
        if n not in depth:
            parent = trace.parents.get(n, (None, None))[0]
            depth[n] = 0  # guards a malformed cycle
            depth[n] = 0 if parent is None or parent not in trace.parents else find(parent) + 1
        return depth[n]

    for n in trace.parents:
        find(n)
    return depth


def layout(trace: Trace) -> dict[str, tuple[float, float]]:
    """(x, y) of every subgraph node: depth gives the column, order of arrival the row."""
    rows: dict[int, int] = {}
    pos: dict[str, tuple[float, float]] = {}
    for n, d in _depths(trace).items():
        pos[n] = (PAD + 90 + d * COL, PAD + 20 + rows.get(d, 0) * ROW)
        rows[d] = rows.get(d, 0) + 1
    return pos


def edge_roles(trace: Trace) -> dict[str, dict[str, Any]]:
    """Per subgraph edge: how it was added (and at which step) and its memory update."""
    forward = {m.edge_id: m.step for m in trace.moves if m.action == "forward"}
    read = {m.edge_id for m in trace.moves if m.action == "read"}
    result = trace.memory_result or {}
    enhanced, penalised = set(result.get("enhanced", [])), set(result.get("penalised", []))
    roles = {}
    for _, eid in trace.parents.values():
        if eid is None:
            continue
        added = (
            "replay"
            if eid in trace.replayed_edges
            else "forward"
            if eid in forward
            else "read"
            if eid in read
            else "other"
        )
        memory = "enhanced" if eid in enhanced else "penalised" if eid in penalised else ""
        roles[eid] = {"added": added, "step": forward.get(eid), "memory": memory}
    return roles


def _edge_svg(
    eid: str, a: tuple[float, float], b: tuple[float, float], role: dict, text: str, kind: str
) -> str:
    """One subgraph edge: coloured by how it was added, marked by what memory did to it
    (a learned edge dotted); ``data-*`` attributes name the edge, its kind and both roles."""
    (x1, y1), (x2, y2) = a, b
    x1, x2 = (x1 + BOX / 2, x2 - BOX / 2) if x2 > x1 else (x1, x2)
    memory = role["memory"]
    tip = escape(f"{text} ({role['added']}{', ' + memory if memory else ''})")
    out = []
    if memory == "enhanced":
        out.append(
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#2ca02c" '
            'stroke-width="9" stroke-opacity="0.45"/>'
        )
    dash = ' stroke-dasharray="6 4"' if memory == "penalised" else ""
    dash = ' stroke-dasharray="2 3"' if kind == "learned" else dash
    colour = "#d62728" if memory == "penalised" else ADDED_COLOUR[role["added"]]
    out.append(
        f'<line data-edge="{escape(eid)}" data-added="{role["added"]}" data-memory="{memory}" '
        f'data-kind="{kind}" '
        f'x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" '
        f'stroke-width="2.2"{dash}><title>{tip}</title></line>'
    )
    if role["step"] is not None:  # at the child's end: one per child row, never overlapping
        mx, my = x2 - 11, y2
        out.append(
            f'<circle cx="{mx}" cy="{my}" r="9" fill="#e07b00"/>'
            f'<text x="{mx}" y="{my + 4}" text-anchor="middle" fill="white" '
            f'font-weight="bold">{role["step"]}</text>'
        )
    return "\n".join(out)


def _node_svg(node: Node, x: float, y: float, seed: bool) -> str:
    text = f"chunk of {node.doc_id}" if node.kind == "chunk" else node.name
    label = text if len(text) <= 28 else text[:27] + "…"
    stroke = 'stroke="#000" stroke-width="3"' if seed else 'stroke="#666" stroke-width="1"'
    rx = 14 if node.kind == "entity" else 4
    return (
        f'<g data-node="{escape(node.id)}" data-seed="{str(seed).lower()}">'
        f"<title>{escape(node.id)} ({node.kind}): {escape(node.name)}</title>"
        f'<rect x="{x - BOX / 2}" y="{y - 14}" width="{BOX}" height="28" '
        f'rx="{rx}" fill="{KIND_FILL[node.kind]}" {stroke}/>'
        f'<text x="{x}" y="{y + 4}" text-anchor="middle">{escape(label)}</text></g>'
    )


def _svg(store: GraphStore, trace: Trace) -> str:
    pos = layout(trace)
    roles = edge_roles(trace)
    width = max((x for x, _ in pos.values()), default=0) + 200
    height = max((y for _, y in pos.values()), default=0) + PAD + 30
    # scales down to the window, never below 60 % (labels stay readable); deeper walks scroll
    floor = round(max(min(width, 720), 0.6 * width))
    style = f"width:100%;min-width:{floor}px;max-width:{width}px;height:auto"
    out = [
        f'<div class="graph"><svg xmlns="http://www.w3.org/2000/svg" style="{style}" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#7b3fb5"/></marker></defs>',
    ]
    for node, (parent, eid) in trace.parents.items():
        if parent is not None and eid is not None and parent in pos:
            edge = store.get_edge(eid)
            text = f"{edge.kind}: {edge.text}"
            out.append(_edge_svg(eid, pos[parent], pos[node], roles[eid], text, edge.kind))
    for m in trace.moves:
        if m.action == "backward" and m.from_node in pos and m.node_id in pos:
            (x1, y1), (x2, y2) = pos[m.from_node], pos[m.node_id]
            out.append(
                f'<path data-backward="{m.step}" '
                f'd="M{x1},{y1} Q{(x1 + x2) / 2 - 60},{(y1 + y2) / 2} {x2},{y2}" '
                'fill="none" stroke="#7b3fb5" stroke-width="1.5" stroke-dasharray="2 3" '
                f'marker-end="url(#arrow)"><title>step {m.step}: backward</title></path>'
            )
    seeds = set(trace.seeds)
    nodes = {n.id: n for n in store.get_nodes(list(pos))}
    out += [_node_svg(nodes[n], x, y, n in seeds) for n, (x, y) in pos.items()]
    out.append("</svg></div>")
    return "\n".join(out)


LEGEND = (
    '<div class="legend">'
    "<span>&#9646; <b>bold border</b>: seed</span>"
    '<span style="color:#1f6fd1">&#9473; replayed from memory</span>'
    '<span style="color:#e07b00">&#9473; forward move (step no.)</span>'
    '<span style="color:#8a8a8a">&#9473; chunk read</span>'
    '<span style="color:#7b3fb5">&#8943; backward move</span>'
    '<span style="color:#2ca02c">&#9608; enhanced</span>'
    '<span style="color:#d62728">- - penalised</span>'
    "<span>&middot;&middot;&middot; learned edge (a link memory made)</span>"
    '<span style="background:#fff4c2">entity</span> '
    '<span style="background:#d8ecff">anchor</span> '
    '<span style="background:#e8e8e8">chunk</span></div>'
)


def table_rows(cells: list[list[str]]) -> str:
    """HTML table rows, every cell escaped."""
    return "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in cells
    )


def _ranking(store: GraphStore, trace: Trace) -> str:
    """The ranking evidence: per returned chunk, its cosine, the prior's lexical and graph
    parts, its memory evidence, its score and (returned chunks) its relevance."""
    ranked = sorted(trace.rank_evidence.items(), key=lambda kv: -kv[1]["score"])
    rows = [
        [
            str(i),
            c,
            store.get_chunk(c).doc_id,
            f"{p['cosine']:.3f}",
            f"{p.get('lexical', 0.0):.3f}",
            f"{p.get('graph', 0.0):.3f}",
            f"{p['memory']:.3f}" if p["memory"] else "",
            f"{p['score']:.3f}",
            f"{p['relevance']:.3f}" if "relevance" in p else "",
        ]
        for i, (c, p) in enumerate(ranked, 1)
    ]
    return (
        "<h2>Ranking</h2><p>score = cosine to the question + prior.lexical_weight &times; "
        "lexical (BM25, scaled to the best hit) + prior.graph_weight &times; graph (PageRank "
        "from the question's entities, scaled to the best passage) + memory.rank_weight "
        "&times; (1 + both weights) &times; memory (how strongly a remembered edge vouches "
        "for the chunk); relevance: what a returned chunk's score is (in [0, 1]; the question's "
        "relevance for the first, falling with the square root of the score's share below; "
        "docs/retriever.md#scores)</p>"
        "<table><tr><th>#</th><th>chunk</th><th>document</th><th>cosine</th><th>lexical</th>"
        "<th>graph</th><th>memory</th>"
        f"<th>score</th><th>relevance</th></tr>{table_rows(rows)}</table>"
    )


def _walker(trace: Trace) -> str:
    """Who walked and why (``trace.navigation``), for the header; '' when nothing was decided."""
    nav = trace.navigation
    if not nav:
        return ""
    who = "the LLM" if nav.get("llm") else "zero-token"
    return f" &middot; walk: {who} ({escape(str(nav.get('reason', '')))})"


def render_trace(store: GraphStore, trace: Trace) -> str:
    """The whole HTML page for ``trace`` (node and edge names are read from ``store``)."""

    def name(node_id: str | None) -> str:
        return store.get_node(node_id).name if node_id else ""

    moves = [
        [str(m.step), m.action, name(m.from_node), name(m.node_id), m.note] for m in trace.moves
    ]
    chunks = [
        [c, store.get_chunk(c).doc_id, " ".join(store.get_chunk(c).text.split())[:200]]
        for c in trace.chunk_ids
    ]
    result = trace.memory_result or {}
    memory = (
        f"{len(result.get('enhanced', []))} edges enhanced, "
        f"{len(result.get('penalised', []))} penalised"
        if trace.memorized
        else "not memorized"
    )
    costs = ", ".join(
        f"{k}: {v.calls} calls / {v.tokens} tokens"
        for k, v in trace.costs.stages.items()
        if v.calls
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ReMindRAG trace {escape(trace.trace_id)}</title>
<style>{CSS}</style></head><body>
<h1>{escape(trace.query)}</h1>
<div class="meta">trace {escape(trace.trace_id)} &middot; {len(trace.seeds)} seeds &middot;
{len(trace.replayed_edges)} replayed edges &middot; {len(trace.moves)} moves &middot;
stop: {escape(trace.stop_reason)} &middot; memory: {memory} &middot;
LLM cost: {escape(costs or "none (zero-token)")}{_walker(trace)}</div>
{LEGEND}
{_svg(store, trace)}
<h2>Moves</h2>
<table><tr><th>step</th><th>action</th><th>from</th><th>to</th><th>note</th></tr>
{table_rows(moves) or '<tr><td colspan="5">no traversal: memory replay or seeds sufficed</td></tr>'}
</table>
{_ranking(store, trace)}
<h2>Chunks in the subgraph</h2>
<table><tr><th>chunk</th><th>document</th><th>text</th></tr>{table_rows(chunks)}</table>
</body></html>
"""


__all__ = ["edge_roles", "layout", "render_trace"]
