"""A move of the guided walk, from a navigator's word to the walk: the one path.

A navigator says :class:`MoveChoice` (stop, or go to a node). The LLM's reply becomes one here
(:func:`read_reply`: the JSON, then the target as a choice number, an id or an exact name);
:func:`resolve` turns any choice into a :class:`LegalMove` or raises :class:`LLMOutputError`,
and :func:`apply` makes a legal move on the walk. The legal forward moves are
:func:`options`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..errors import LLMOutputError
from ..ids import is_chunk, norm_name
from ..memory.math import replay_scores
from ..prompts import extract_json
from ..types import Edge, Move
from ..walk import Walk

FALLBACK_NOTE = "fallback: the zero-token choice after an unusable reply and its re-ask"


@dataclass(frozen=True)
class MoveChoice:
    """A decision: stop (``enough``) or go to ``node``. A navigator's reply may name the
    target by choice label, id or exact name; :func:`resolve` decides the action from where
    the target is (forward to a neighbour, backward to a subgraph node)."""

    enough: bool
    action: str | None = None
    node: str | None = None


@dataclass(frozen=True)
class Option:
    """A forward move: the edge, the neighbour it leads to and its replay score."""

    edge: Edge
    node: str
    score: float


@dataclass(frozen=True)
class LegalMove:
    """A move the walk can make: forward along ``edge`` to an unexplored neighbour, or back
    to a node of the subgraph (``edge`` is None)."""

    node: str
    edge: Edge | None = None

    @property
    def action(self) -> Literal["forward", "backward"]:
        return "backward" if self.edge is None else "forward"


def options(walk: Walk, current: str, limit: int | None = None) -> list[Option]:
    """Forward options from ``current``, best replay score first, one edge per neighbour, at
    most ``limit`` (``max_neighbors_shown`` by default); chunk nodes are never options
    (entering their anchor reads them)."""
    edges = [e for e in walk.frontier(current) if not is_chunk(e.other(current))]
    if not edges:
        return []
    others = [e.other(current) for e in edges]
    scores = replay_scores(  # through the walk's caches: each read once per query
        walk.q_hat,
        walk.reads.embeddings([current])[0],
        walk.reads.embeddings(others),
        walk.reads.memory([e.id for e in edges]),
        walk.cfg.memory.alpha,
    )
    best: dict[str, Option] = {}
    for e, w, s in zip(edges, others, scores):
        if w not in best or s > best[w].score:
            best[w] = Option(e, w, float(s))
    ranked = sorted(best.values(), key=lambda o: -o.score)
    return ranked[: walk.cfg.max_neighbors_shown if limit is None else limit]


_TARGET_KEYS = ("go", "node", "target", "choice", "go_to", "goto", "id")
_MAX_TARGET_CHARS = 200


def parse_move(reply: str) -> MoveChoice:
    """``{"enough": true}`` or a target under ``go`` (also ``node``, ``target``, ``choice``).
    The target is kept as written (a choice number, an id or a name, trimmed); any
    ``action`` the reply states is advisory: the target decides the move."""
    data = extract_json(reply)
    enough = data.get("enough")
    if isinstance(enough, str):
        enough = enough.strip().lower() in ("true", "yes")
    if enough is True:
        return MoveChoice(enough=True)
    target = next((data[k] for k in _TARGET_KEYS if data.get(k) not in (None, "")), None)
    if isinstance(target, bool) or not isinstance(target, str | int | float):
        raise LLMOutputError(
            'the reply names no choice: expected {"enough": false, "go": N}', reply
        )
    text = " ".join(str(target).split())[:_MAX_TARGET_CHARS]
    if not text:
        raise LLMOutputError("the reply names an empty choice", reply)
    action = data.get("action")
    return MoveChoice(
        enough=False, action=str(action).strip().lower() if action else None, node=text
    )


_NUMBER_RE = re.compile(r"^(?:choice|option|n|#)?\s*(\d{1,4})\s*[.):]?$", re.IGNORECASE)


def read_target(target: str, choices: list[tuple[str, str]], walk: Walk) -> str:
    """The node a reply's target means: a choice number (``3``, ``n3``, ``#3``), a node id
    of the subgraph or the choices, or the exact name of one of those nodes."""
    m = _NUMBER_RE.match(target.strip())
    if m:
        i = int(m.group(1))
        if 1 <= i <= len(choices):
            return choices[i - 1][0]
        raise LLMOutputError(f"there is no choice {i}; pick a number from 1 to {len(choices)}")
    listed = [n for n, _ in choices]
    known = listed + [n for n in walk.graph_nodes() if n not in set(listed)]
    if target in known:
        return target
    wanted = norm_name(re.sub(r'^(go back to |passage )|"', "", target.strip()))
    for node in walk.reads.nodes(known):
        if wanted and norm_name(node.name) == wanted:
            return node.id
    raise LLMOutputError(f"{target!r} is not one of the choices")


def read_reply(reply: str, choices: list[tuple[str, str]], walk: Walk) -> MoveChoice:
    """The choice an LLM's reply makes among the numbered ``choices`` (node, line)."""
    move = parse_move(reply)
    if move.enough:
        return move
    return MoveChoice(enough=False, node=read_target(move.node or "", choices, walk))


def resolve(walk: Walk, choice: MoveChoice, current: str, opts: list[Option]) -> LegalMove:
    """The move a "go to ``choice.node``" means, whatever action the reply stated: forward
    when the target is an unexplored neighbour, backward when it is a subgraph node (a model
    naming an already visited node as "forward" means to go back there). Raises
    :class:`LLMOutputError` for any other target."""
    node = choice.node or ""
    for o in opts:
        if o.node == node:
            return LegalMove(node, o.edge)
    if node == current:
        raise LLMOutputError(f"the walk is already at {node}; pick another choice")
    if node in walk.parents and not is_chunk(node):
        return LegalMove(node)
    raise LLMOutputError(
        f"{node} is neither an unexplored neighbour of {current} nor a node of the subgraph"
    )


def apply(walk: Walk, move: LegalMove, current: str, note: str = "") -> str:
    """Make a legal move from ``current``; returns the new current node."""
    edge = move.edge
    if edge is not None:
        walk.add(move.node, current, edge, "traversal")
        walk.hops += 1
    edge_id = edge.id if edge is not None else None
    walk.moves.append(Move(len(walk.moves), move.action, move.node, current, edge_id, note))
    return move.node
