"""The LLM navigator: renders the traversal prompt, asks, reads the reply as a choice
(:func:`.move.read_reply`).

The prompt is laid out for prefix caches (llama.cpp's evaluated prefix, providers' prompt
caches): instructions and question first, then an append-only log of the walk (what was read,
where the walk went), and the current choices last, so consecutive steps of one query share
everything but their tail. Choices carry short numbered labels; ids and exact names are
accepted too. They are ordered by the zero-token navigator's value, its own pick marked.
"""

from __future__ import annotations

import numpy as np

from ..ids import is_chunk
from ..prompts import TRAVERSAL_PROMPT
from ..steps import Ask, Step
from ..types import Node
from ..walk import Walk
from .move import FALLBACK_NOTE, MoveChoice, Option, read_reply
from .zero_token import Values, ZeroTokenNavigator


def _label(node: Node) -> str:
    if node.kind == "anchor":
        return f'passage "{node.name}"'
    return f"{node.name} ({node.kind})"


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _text(walk: Walk, chunk_id: str) -> str:
    return " ".join(walk.reads.chunk(chunk_id).text.split())[: walk.cfg.prompt.chunk_chars]


def _read_line(walk: Walk, node: Node) -> list[str]:
    if node.kind == "anchor" and node.chunk_id and node.chunk_id in walk.sources:
        return [f"  read: {_text(walk, node.chunk_id)}"]
    return []


def walk_log(walk: Walk) -> str:
    """The walk so far, one line per event, in the order it happened (append-only)."""
    moved = {m.node_id for m in walk.moves if m.action in ("forward", "read")}
    lines: list[str] = []
    initial = [n for n in walk.parents if n not in moved and not is_chunk(n)]
    for node in walk.reads.nodes(initial):
        how = "start" if walk.parents[node.id][0] is None else "from memory"
        lines += [f"- {how}: {_label(node)}", *_read_line(walk, node)]
    for m in walk.moves:
        if m.action not in ("forward", "backward") or m.node_id is None:
            continue
        (node,) = walk.reads.nodes([m.node_id])
        note = " (suggested move, after an unusable reply)" if m.note == FALLBACK_NOTE else ""
        if m.action == "backward":
            lines.append(f"- went back to {_label(node)}{note}")
            continue
        edge = walk.reads.edge(m.edge_id) if m.edge_id else None
        via = f', via "{_short(edge.text)}"' if edge and edge.kind == "relation" else ""
        lines += [f"- went to {_label(node)}{via}{note}", *_read_line(walk, node)]
    return "\n".join(lines) or "(nothing yet)"


def _choices(values: Values, current: str, opts: list[Option]) -> list[tuple[str, str]]:
    """(node, line) for every choice: forward options by zero-token value, then the subgraph
    nodes worth going back to."""
    walk, value = values.walk, values.value
    cfg = walk.cfg
    fwd = sorted(opts, key=lambda o: -value(o.node))
    memory = walk.store.memory([o.edge.id for o in fwd]) if fwd else np.zeros((0, 1))
    nodes = walk.reads.nodes([o.node for o in fwd])
    out = []
    for o, node, mem in zip(fwd, nodes, memory):
        via = f', via "{_short(o.edge.text)}"' if o.edge.kind == "relation" else ""
        remembered = f" [memory {o.score:+.2f}]" if np.any(mem) else ""
        out.append((o.node, f"{_label(node)}{via}{remembered}"))
    back: list[tuple[float, str, int]] = []
    for n in walk.graph_nodes():
        if n == current:
            continue
        others = [w for e in walk.frontier(n) if not is_chunk(w := e.other(n))]
        if others:
            back.append((max(value(w) for w in others), n, len(others)))
    back.sort(key=lambda t: -t[0])
    back = back[: cfg.prompt.max_back_choices]
    for (_, n, count), node in zip(back, walk.reads.nodes([b[1] for b in back])):
        out.append((n, f"go back to {_label(node)} ({count} unexplored neighbours)"))
    return out


def render_choices(
    walk: Walk, current: str, choices: list[tuple[str, str]], suggested: MoveChoice
) -> str:
    (here,) = walk.reads.nodes([current])
    lines = [f"You are at: {_label(here)}.", "Choices:"]
    lines += [f"{i}. {line}" for i, (_, line) in enumerate(choices, 1)]
    if not choices:
        lines.append("(none: nothing left to explore)")
    numbers = {n: i for i, (n, _) in enumerate(choices, 1)}
    if suggested.enough:
        hint = f"stop ({len(walk.chunk_ids)} passages read)"
    else:
        hint = str(numbers.get(suggested.node or "", "stop"))
    by = "similarity" if walk.prior is None else "the graph"
    lines.append(f"Suggested by {by}: {hint}")
    return "\n".join(lines)


class LLMNavigator:
    """Asks the LLM for each move with the (replaceable) traversal prompt."""

    spends_tokens = True

    def __init__(self, template: str = TRAVERSAL_PROMPT) -> None:
        self.template = template
        self.suggest = ZeroTokenNavigator()  # orders the choices and marks its own pick

    def decide(
        self, walk: Walk, query: str, current: str, opts: list[Option], feedback: str
    ) -> Step:
        values = self.suggest.values(walk)
        choices = _choices(values, current, opts)
        suggested = self.suggest.choose(walk, current, opts)
        if feedback:
            feedback = (
                f"\nNote: {feedback}. Legal replies: "
                + ", ".join(f'{{"enough": false, "go": {i}}}' for i in range(1, len(choices) + 1))
                + ', or {"enough": true}.\n'
            )
        prompt = self.template.format(
            query=query,
            walk=walk_log(walk),
            choices=render_choices(walk, current, choices, suggested),
            feedback=feedback,
        )
        context = {
            "query": query,
            "current": current,
            "options": [o.node for o in opts],
            "choices": [n for n, _ in choices],
            "subgraph": walk.graph_nodes(),
            "chunks": walk.chunk_ids,
        }
        reply = yield Ask("traversal", prompt, context)
        return read_reply(reply or "", choices, walk)
