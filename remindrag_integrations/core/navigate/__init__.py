"""The guided walk (SPEC §2.4): while the navigator says the subgraph is not enough, it picks
a forward move (an unexplored neighbour of the current node) or a backward move (any subgraph
node). The loop, its bounds and the validation of every move live here; *what* to pick is a
:class:`Navigator`: the LLM (:mod:`.llm`) or the zero-token policy (:mod:`.zero_token`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..ids import is_chunk
from ..memory.math import replay_scores
from ..prompts import MoveChoice
from ..steps import Step
from ..types import Edge, LLMError, LLMOutputError, Move
from ..walk import Walk


@dataclass(frozen=True)
class Option:
    """A forward move: the edge, the neighbour it leads to and its replay score."""

    edge: Edge
    node: str
    score: float


class Navigator(Protocol):
    def decide(
        self, walk: Walk, query: str, current: str, options: list[Option], feedback: str
    ) -> Step:
        """A step that returns the :class:`MoveChoice` for this position (it may ask an LLM;
        ``feedback`` says why the previous choice was rejected)."""
        ...


def options(walk: Walk, current: str) -> list[Option]:
    """Forward options from ``current``, best replay score first, one edge per neighbour;
    chunk nodes are never options (entering their anchor reads them)."""
    edges = [e for e in walk.frontier(current) if not is_chunk(e.other(current))]
    if not edges:
        return []
    others = [e.other(current) for e in edges]
    scores = replay_scores(
        walk.q_hat,
        walk.store.node_embeddings([current])[0],
        walk.store.node_embeddings(others),
        walk.store.memory([e.id for e in edges]),
        walk.cfg.alpha,
    )
    best: dict[str, Option] = {}
    for e, w, s in zip(edges, others, scores):
        if w not in best or s > best[w].score:
            best[w] = Option(e, w, float(s))
    ranked = sorted(best.values(), key=lambda o: -o.score)
    return ranked[: walk.cfg.max_neighbors_shown]


def apply(walk: Walk, choice: MoveChoice, current: str, opts: list[Option]) -> str:
    """Apply a move; returns the new current node or raises :class:`LLMOutputError`."""
    node = choice.node or ""
    if choice.action == "forward":
        legal = {o.node: o.edge for o in opts}
        if node not in legal:
            raise LLMOutputError(
                f"{node} is not an unexplored neighbour of {current}; "
                "pick a forward id from the neighbour list"
            )
        walk.add(node, current, legal[node], "traversal")
        walk.hops += 1
        walk.moves.append(Move(len(walk.moves), "forward", node, current, legal[node].id))
        return node
    if node not in walk.parents or is_chunk(node):
        raise LLMOutputError(
            f"{node} is not a node of the subgraph; a backward move must "
            "name one of the listed subgraph nodes"
        )
    walk.moves.append(Move(len(walk.moves), "backward", node, current))
    return node


def navigate(walk: Walk, query: str, navigator: Navigator) -> Step:
    """Walk until the navigator says enough, ``max_hops`` new nodes, ``max_iterations``
    decisions, nothing left to explore, or a failed re-ask; ``walk.stop_reason`` says which."""
    cfg = walk.cfg
    current = next(iter(walk.parents))
    feedback = ""
    while True:
        if walk.hops >= cfg.max_hops:
            walk.stop_reason = "max_hops"
            return
        if walk.asks >= cfg.max_iterations:
            walk.stop_reason = "max_iterations"
            return
        opts = options(walk, current)
        if not opts and not any(walk.frontier(n) for n in walk.parents):
            walk.stop_reason = "exhausted"
            return
        walk.asks += 1
        try:
            choice = yield from navigator.decide(walk, query, current, opts, feedback)
            if choice.enough:
                walk.stop_reason = "enough"
                return
            current = apply(walk, choice, current, opts)
            feedback = ""
        except LLMOutputError as exc:
            walk.moves.append(Move(len(walk.moves), "invalid", None, current, None, str(exc)))
            if feedback:
                walk.stop_reason = "invalid_llm_output"
                return
            feedback = f"your last reply was rejected: {exc}"
        except LLMError as exc:
            walk.stop_reason = f"llm_error: {exc}"
            return
