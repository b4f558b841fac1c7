"""The guided walk (docs/method.md §2.4): while the navigator says the subgraph is not enough, it picks
a forward move (an unexplored neighbour of the current node) or a backward move (any subgraph
node). The loop and its bounds live here; what a move is, and how a choice becomes a legal
move or an :class:`LLMOutputError`, in :mod:`.move`; *what* to pick is a :class:`Navigator`:
the LLM (:mod:`.llm`) or the zero-token policy (:mod:`.zero_token`).
"""

from __future__ import annotations

from typing import Protocol

from ..errors import LLMError, LLMOutputError
from ..steps import Step
from ..types import CostLedger, Move
from ..walk import Stop, StopReason, Walk
from .move import FALLBACK_NOTE, MoveChoice, Option, apply, options, resolve
from .zero_token import ZeroTokenNavigator


class Navigator(Protocol):
    # whether its decisions cost tokens: then ``max_neighbors_shown`` caps the choices it is
    # shown and ``max_idle_decisions`` bounds its walk (a zero-token navigator says enough
    # by itself and weighs up to ``ZERO_TOKEN_OPTIONS`` neighbours)
    spends_tokens: bool

    def decide(
        self, walk: Walk, query: str, current: str, options: list[Option], feedback: str
    ) -> Step:
        """A step that returns the :class:`~.move.MoveChoice` for this position (it may ask
        an LLM; ``feedback`` says why the previous choice was rejected)."""
        ...


ZERO_TOKEN_OPTIONS = 30  # neighbours the zero-token navigator weighs (its read-ahead)


def _spent(ledger: CostLedger | None) -> int:
    return ledger.stages["traversal"].tokens if ledger and "traversal" in ledger.stages else 0


def _bound(walk: Walk, spent: int, next_cost: int, idle: int | None) -> StopReason:
    """The bound that ends the walk before the next decision, or ``StopReason.NONE``
    (``idle``: None for a navigator that spends no tokens)."""
    cfg = walk.cfg
    if walk.hops >= cfg.max_hops:
        return StopReason.MAX_HOPS
    if walk.asks >= cfg.max_iterations:
        return StopReason.MAX_ITERATIONS
    if (
        cfg.max_traversal_tokens is not None
        and spent
        and spent + next_cost > cfg.max_traversal_tokens
    ):
        return StopReason.TOKEN_BUDGET
    if idle is not None and idle >= cfg.max_idle_decisions:
        return StopReason.NO_PROGRESS
    return StopReason.NONE


def _fallback(
    walk: Walk, current: str, opts: list[Option], fallback: ZeroTokenNavigator
) -> str | None:
    """The zero-token navigator's move in place of an unusable reply; None when it stops."""
    choice = fallback.choose(walk, current, opts)
    if choice.enough:
        walk.moves.append(Move(len(walk.moves), "stop", None, current, None, FALLBACK_NOTE))
        return None
    return apply(walk, resolve(walk, choice, current, opts), current, FALLBACK_NOTE)


def navigate(
    walk: Walk, query: str, navigator: Navigator, ledger: CostLedger | None = None
) -> Step:
    """Walk until the navigator says enough or a bound ends it (``max_hops`` new nodes,
    ``max_iterations`` decisions, the traversal token budget, ``max_idle_decisions`` without
    a new chunk, nothing left to explore); returns the :class:`~..walk.Stop` that says which. An unusable reply
    gets one re-ask listing why; a second one is replaced by the zero-token choice
    (``on_invalid_move="fallback"``) or stops the walk (``"stop"``)."""
    cfg = walk.cfg
    current = next(iter(walk.parents))
    feedback, spent0, idle = "", _spent(ledger), 0
    fallback: ZeroTokenNavigator | None = None  # made at the first unusable reply
    limit = None if navigator.spends_tokens else ZERO_TOKEN_OPTIONS
    last_cost = growth = 0  # the prompt grows each step: the next call costs about the
    # last one plus the largest growth seen (a step that reads a passage grows it most)
    while True:
        next_cost = last_cost + growth
        idling = idle if navigator.spends_tokens else None
        bound = _bound(walk, _spent(ledger) - spent0, next_cost, idling)
        if bound is not StopReason.NONE:
            return Stop(bound)
        opts = options(walk, current, limit)
        if not opts and not any(walk.frontier(n) for n in walk.graph_nodes()):
            return Stop(StopReason.EXHAUSTED)
        walk.asks += 1
        before, read_before = _spent(ledger), len(walk.chunk_ids)
        try:
            choice = yield from navigator.decide(walk, query, current, opts, feedback)
            if choice.enough:
                return Stop(StopReason.ENOUGH)
            current = apply(walk, resolve(walk, choice, current, opts), current)
            feedback = ""
        except LLMOutputError as exc:
            walk.moves.append(Move(len(walk.moves), "invalid", None, current, None, str(exc)))
            if not feedback:
                feedback = f"your last reply was not usable: {exc}"
            elif cfg.on_invalid_move == "stop":
                return Stop(StopReason.INVALID_LLM_OUTPUT)
            else:
                feedback = ""
                fallback = fallback or ZeroTokenNavigator()
                moved = _fallback(walk, current, opts, fallback)
                if moved is None:
                    return Stop(StopReason.FALLBACK_ENOUGH)
                current = moved
        except LLMError as exc:
            return Stop(StopReason.LLM_ERROR, str(exc))
        cost = _spent(ledger) - before
        growth = max(growth, cost - last_cost) if last_cost else growth
        last_cost = cost
        idle = 0 if len(walk.chunk_ids) > read_before else idle + 1


__all__ = [
    "FALLBACK_NOTE",
    "MoveChoice",
    "Navigator",
    "Option",
    "navigate",
    "options",
]
