"""The LLM navigator: renders the traversal prompt, asks, parses the reply into a move."""

from __future__ import annotations

from ..ids import is_chunk
from ..prompts import TRAVERSAL_PROMPT, parse_move
from ..steps import Ask, Step
from ..types import Node
from ..walk import Walk, path_triples
from . import Option


def _describe(node: Node) -> str:
    return f"{node.id} ({node.kind}): {node.name}"


def render(
    walk: Walk, template: str, query: str, current: str, opts: list[Option], feedback: str
) -> str:
    cfg = walk.cfg
    chunks = (
        "\n".join(
            f"[{cid}] {' '.join(walk.chunk(cid).text.split())[: cfg.chunk_chars_in_prompt]}"
            for cid in walk.chunk_ids
        )
        or "(none yet)"
    )
    triples = "\n".join(f"- {t.relation}" for t in path_triples(walk)) or "(none yet)"
    subgraph = "\n".join(f"- {_describe(n)}" for n in walk.nodes(walk.graph_nodes()))
    option_nodes = walk.nodes([o.node for o in opts])
    neighbours = (
        "\n".join(
            f"- {o.node} ({n.kind}: {n.name}) | {o.edge.text} | {o.score:.2f}"
            for o, n in zip(opts, option_nodes)
        )
        or "(no unexplored neighbours: move backward or stop)"
    )
    return template.format(
        query=query,
        chunks=chunks,
        triples=triples,
        subgraph=subgraph,
        current=_describe(walk.nodes([current])[0]),
        neighbours=neighbours,
        feedback=f"\nNote: {feedback}\n" if feedback else "",
    )


class LLMNavigator:
    """Asks the LLM for each move with the (replaceable) traversal prompt."""

    def __init__(self, template: str = TRAVERSAL_PROMPT) -> None:
        self.template = template

    def decide(
        self, walk: Walk, query: str, current: str, opts: list[Option], feedback: str
    ) -> Step:
        prompt = render(walk, self.template, query, current, opts, feedback)
        context = {
            "query": query,
            "current": current,
            "options": [o.node for o in opts],
            "subgraph": [n for n in walk.parents if not is_chunk(n)],
            "chunks": walk.chunk_ids,
        }
        reply = yield Ask("traversal", prompt, context)
        return parse_move(reply or "")
