"""LlamaIndex: each stage of a retrieval as an instrumentation span under the retriever's.

LlamaIndex's ``BaseRetriever.retrieve`` is a dispatcher span; each stage (:mod:`...core.observe`)
opens a child span of it, ``ReMindRAG.<stage>-<uuid>`` (OpenInference names the span
``ReMindRAG.<stage>``), whose input is what the stage starts from and whose result is what it
counted (passages, hops, replayed edges, tokens) and the ids it made (the trace id, the
passages'): a span handler (OpenInference's, Langfuse's, a user's) sees the nesting. When a
stage ends, a :class:`ReMindStageEvent` carrying the same counts goes to the event handlers.
:func:`listening` says whether any handler is attached: when none is, the retriever passes no
observer and nothing here runs.
"""

from __future__ import annotations

import inspect
import uuid
from typing import Any

from llama_index.core.instrumentation import Dispatcher, NullEventHandler, NullSpanHandler
from llama_index.core.instrumentation import get_dispatcher as _get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span import active_span_id

from ..memory_hooks import MemoryWriter

dispatcher = _get_dispatcher("remindrag_integrations")
PREFIX = "ReMindRAG."


class ReMindStageEvent(BaseEvent):
    """One stage of a retrieval ended: ``stage`` (``seed_search``, ``walk``, ...), the
    ``stage_span_id`` of its span, and what it counted (``outputs``: ``passages``,
    ``hops``, ``replayed_edges``, ``tokens``, ``trace_id``, ``passage_ids``, ... as the
    stage has them). Its own ``span_id`` is left empty: the event is a record for event
    handlers, not an update of the span (which carries the same counts as its result)."""

    stage: str
    stage_span_id: str
    outputs: dict[str, Any]

    @classmethod
    def class_name(cls) -> str:
        return "ReMindStageEvent"


def _chain(d: Dispatcher) -> list[Dispatcher]:
    """``d`` and the dispatchers its events propagate to."""
    out: list[Dispatcher] = []
    c: Dispatcher | None = d
    while c is not None:
        out.append(c)
        if not c.propagate or c.parent_name == c.name or c.manager is None:
            break
        c = c.manager.dispatchers.get(c.parent_name)
    return out


def _quiet(handler: Any) -> bool:
    """An event handler that records no trace: LlamaIndex's null one, or one that says so
    (``traces_nothing``, the memory hook)."""
    return isinstance(handler, NullEventHandler) or bool(getattr(handler, "traces_nothing", False))


def listening(d: Dispatcher = dispatcher) -> bool:
    """Whether a span or event handler (other than LlamaIndex's null ones and the memory
    hook) would see a stage."""
    for c in _chain(d):
        if any(not isinstance(h, NullSpanHandler) for h in c.span_handlers):
            return True
        if any(not _quiet(h) for h in c.event_handlers):
            return True
    return False


def _stage_args(**inputs: Any) -> None:
    """What a stage span's arguments are bound to (the stage's inputs)."""


_SIGNATURE = inspect.signature(_stage_args)


class LlamaIndexStages:
    """An :class:`~...core.observe.Observer` that opens a dispatcher span per stage, the
    first under ``parent_id`` (the retriever's span), each LLM-free (the engine's LLM calls
    under LlamaIndex are its own spans)."""

    def __init__(self, parent_id: str | None, d: Dispatcher = dispatcher) -> None:
        self._d = d
        self._open: list[tuple[str, inspect.BoundArguments]] = []
        self._parent = parent_id

    def start(self, stage: str, inputs: dict[str, Any]) -> None:
        parent = self._open[-1][0] if self._open else self._parent
        span_id = f"{PREFIX}{stage}-{uuid.uuid4()}"
        bound = _SIGNATURE.bind(**inputs)
        self._d.span_enter(id_=span_id, bound_args=bound, parent_id=parent)
        self._open.append((span_id, bound))

    def end(self, stage: str, outputs: dict[str, Any], error: BaseException | None = None) -> None:
        span_id, bound = self._open.pop()
        if error is not None:
            self._d.span_drop(id_=span_id, bound_args=bound, err=error)
            return
        self._d.event(
            ReMindStageEvent(stage=stage, stage_span_id=span_id, outputs=outputs, span_id=None)
        )
        self._d.span_exit(id_=span_id, bound_args=bound, result=dict(outputs))


def traced_write(writer: MemoryWriter, trace_ids: list[str], answer: str, parent_id: str) -> None:
    """The memory write after an answer (``writer.write``) as a ``ReMindRAG.memorize`` span
    under ``parent_id`` (the synthesis's span): its result counts the writes applied, the
    edges enhanced and penalised, and names the traces and supporting passages."""
    stages = LlamaIndexStages(parent_id)
    stages.start("memorize", {"trace_ids": list(trace_ids)})
    done, failed = len(writer.writes), len(writer.errors)
    try:
        writer.write(trace_ids, answer)
    except BaseException as exc:
        stages.end("memorize", {}, exc)
        raise
    new = writer.writes[done:]
    stages.end(
        "memorize",
        {
            "trace_ids": [w.trace_id for w in new],
            "applied": sum(w.applied for w in new),
            "enhanced_edges": sum(len(w.enhanced) for w in new),
            "penalised_edges": sum(len(w.penalised) for w in new),
            "supporting_chunks": [c for w in new for c in w.supporting_chunks],
            "errors": len(writer.errors) - failed,
        },
    )


def current_span() -> str | None:
    """The active LlamaIndex span (the retriever's, inside ``_retrieve``)."""
    return active_span_id.get()
