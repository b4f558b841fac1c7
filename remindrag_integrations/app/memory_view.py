"""A self-contained HTML page of where edge memory lives in the whole graph, and which past
queries shaped it (inline SVG, no external assets).

The picture is the graph (all of it when small, else the neighbourhood of the remembered
edges) laid out by networkx; a remembered edge is drawn thicker the stronger its memory, green
where past queries enhanced it, red where they only penalised it. Each remembered edge lists
the queries whose memorized traces wrote to it; a table lists those queries.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..core.store import GraphStore
from ..core.types import Trace
from ..graph_export import to_networkx
from .html_trace import table_rows as _rows

SIZE, PAD, LABEL_ROOM = 900, 30, 150
QUERY_COLOURS = ("#2ca02c", "#1f77b4", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
MAX_DRAWN_NODES = 400
KIND_FILL = {"entity": "#f2c200", "anchor": "#4a90d9", "chunk": "#9a9a9a"}
CSS = """
body{font-family:system-ui,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222}
h1{font-size:20px;margin:0 0 4px} .meta{color:#555;margin-bottom:12px}
table{border-collapse:collapse;margin:8px 0 20px;font-size:13px}
td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} svg text{font-size:10px} .legend span{margin-right:16px}
.graph{overflow-x:auto;max-width:100%}
"""


def shaped_by(traces: list[Trace]) -> dict[str, dict[str, list[str]]]:
    """Per edge: the queries whose memorized traces enhanced it, and those that penalised it."""
    out: dict[str, dict[str, list[str]]] = {}
    for t in traces:
        result = t.memory_result or {}
        for role in ("enhanced", "penalised"):
            for eid in result.get(role, []):
                roles = out.setdefault(eid, {"enhanced": [], "penalised": []})
                if t.query not in roles[role]:
                    roles[role].append(t.query)
    return out


def _drawn(g: Any) -> Any:
    """The part of the graph to draw: all of it when small, else the remembered edges with
    their endpoints (the strongest first, at most ``MAX_DRAWN_NODES`` nodes)."""
    if g.number_of_nodes() <= MAX_DRAWN_NODES:
        return g
    remembered = sorted(
        ((d["memory"], u, v, k) for u, v, k, d in g.edges(keys=True, data=True) if d["memory"]),
        reverse=True,
    )
    nodes: set[str] = set()
    for _, u, v, _k in remembered:
        if len(nodes | {u, v}) > MAX_DRAWN_NODES:
            break
        nodes |= {u, v}
    for n in sorted(nodes):  # their neighbourhood, faint, while there is room
        extra = set(g.neighbors(n)) - nodes
        if len(nodes) + len(extra) > MAX_DRAWN_NODES:
            continue
        nodes |= extra
    return g.subgraph(nodes)


def _label(d: dict[str, Any]) -> str:
    text = f"chunk of {d['document']}" if d["kind"] == "chunk" else str(d["name"])
    return text if len(text) <= 24 else text[:23] + "…"


def _svg(g: Any, shaped: dict[str, dict[str, list[str]]], colour_of: dict[str, str]) -> str:
    import networkx as nx

    pos = nx.spring_layout(g, seed=7) if g.number_of_nodes() else {}
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) or 1.0

    def at(n: str) -> tuple[float, float]:
        x, y = pos[n]
        return (
            round(PAD + (x - min(xs)) / span * (SIZE - 2 * PAD - LABEL_ROOM), 1),
            round(PAD + (y - min(ys)) / span * (SIZE - 2 * PAD), 1),
        )

    top = max((d["memory"] for *_, d in g.edges(keys=True, data=True)), default=0.0) or 1.0
    faint, strong, labelled = [], [], set()
    dotted = ' stroke-dasharray="2 3"'
    for u, v, k, d in g.edges(keys=True, data=True):
        (x1, y1), (x2, y2) = at(u), at(v)
        if not d["memory"]:
            faint.append(
                f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#ccc" stroke-width="0.7"/>'
            )
            continue
        labelled |= {u, v}
        who = shaped.get(k, {"enhanced": [], "penalised": []})
        colour = colour_of.get(who["enhanced"][0], "#2ca02c") if who["enhanced"] else "#d62728"
        tip = f"{d['kind']}: {d['text']} | memory {d['memory']:.3f}"
        tip += "".join(f"\nenhanced by: {q}" for q in who["enhanced"])
        tip += "".join(f"\npenalised by: {q}" for q in who["penalised"])
        strong.append(
            f'<line data-edge="{escape(k)}" data-memory-norm="{d["memory"]:.4f}" '
            f'data-kind="{d["kind"]}" '
            f'data-queries="{len(set(who["enhanced"] + who["penalised"]))}" '
            f'x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" stroke-opacity="0.8" '
            f'stroke-width="{1.5 + 7 * d["memory"] / top:.1f}"'
            f"{dotted if d['kind'] == 'learned' else ''}><title>{escape(tip)}</title></line>"
        )
    dots = []
    for n, d in g.nodes(data=True):
        x, y = at(n)
        r = 5 if n in labelled else 3
        dots.append(
            f'<circle data-node="{escape(n)}" cx="{x}" cy="{y}" r="{r}" '
            f'fill="{KIND_FILL[d["kind"]]}"><title>{escape(d["kind"])}: {escape(d["name"])}'
            f"</title></circle>"
        )
        if n in labelled:
            dots.append(f'<text x="{x + 7}" y="{y + 3}">{escape(_label(d))}</text>')
    return (
        f'<div class="graph"><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {SIZE} {SIZE}" '
        f'style="width:100%;min-width:600px;max-width:{SIZE}px;height:auto">'
        + "\n".join([*faint, *strong, *dots])
        + "</svg></div>"
    )


LEGEND = (
    '<div class="legend">'
    "<span>&#9473; remembered edge, in the colour of the query that enhanced it "
    "(thicker = stronger memory)</span>"
    '<span style="color:#d62728">&#9473; only penalised</span>'
    "<span>&middot;&middot;&middot; learned edge (a link memory made)</span>"
    '<span style="color:#aaa">&#9473; no memory</span>'
    '<span style="color:#f2c200">&#9679; entity</span>'
    '<span style="color:#4a90d9">&#9679; anchor</span>'
    '<span style="color:#9a9a9a">&#9679; chunk</span></div>'
)


def _query_rows(memorized: list[Trace], colour_of: dict[str, str]) -> str:
    return "".join(
        f'<tr><td><span style="color:{colour_of[t.query]}">&#9632;</span> {escape(t.query)}</td>'
        f"<td>{len((t.memory_result or {}).get('enhanced', []))}</td>"
        f"<td>{len((t.memory_result or {}).get('penalised', []))}</td>"
        f"<td>{escape(t.trace_id)}</td></tr>"
        for t in memorized
    )


def _edge_rows(g: Any, edges: list, shaped: dict[str, dict[str, list[str]]]) -> str:
    names = {n: _label(d) for n, d in g.nodes(data=True)}
    cells = []
    for u, v, eid, d in edges:
        who = shaped.get(eid, {"enhanced": [], "penalised": []})
        cells.append(
            [
                f"{d['memory']:.3f}",
                names[u],
                f"{d['kind']}: {d['text']}",
                names[v],
                "; ".join(who["enhanced"]) or "-",
                "; ".join(who["penalised"]) or "-",
            ]
        )
    return _rows(cells)


def render_memory_view(store: GraphStore, traces: list[Trace], top: int = 30) -> str:
    """The whole HTML page for ``store`` and the memorized ``traces`` saved in it; ``top``
    remembered edges are listed in the table."""
    g = to_networkx(store)
    memorized = [t for t in traces if t.memorized]
    shaped = shaped_by(memorized)
    colour_of: dict[str, str] = {}
    for t in memorized:
        colour_of.setdefault(t.query, QUERY_COLOURS[len(colour_of) % len(QUERY_COLOURS)])
    edges = sorted(
        (e for e in g.edges(keys=True, data=True) if e[3]["memory"]),
        key=lambda e: -e[3]["memory"],
    )
    drawn = _drawn(g)
    none_yet = '<tr><td colspan="4">no memorized query yet</td></tr>'
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>ReMindRAG memory ({escape(store.namespace)})</title>
<style>{CSS}</style></head><body>
<h1>Where memory lives</h1>
<div class="meta">namespace {escape(store.namespace)} &middot; {g.number_of_nodes():,} nodes,
{g.number_of_edges():,} edges &middot; {len(edges):,} remembered edges &middot;
{len(memorized)} memorized queries &middot; drawn: {drawn.number_of_nodes():,} nodes</div>
{LEGEND}
{_svg(drawn, shaped, colour_of)}
<h2>Past queries that shaped memory</h2>
<table><tr><th>query</th><th>edges enhanced</th><th>penalised</th><th>trace</th></tr>
{_query_rows(memorized, colour_of) or none_yet}</table>
<h2>Strongest remembered edges</h2>
<table><tr><th>memory</th><th>from</th><th>edge</th><th>to</th><th>enhanced by</th>
<th>penalised by</th></tr>{_edge_rows(g, edges[:top], shaped)}</table>
</body></html>
"""


__all__ = ["render_memory_view", "shaped_by"]
