"""Memory after the answer: a LangChain callback handler and a LlamaIndex instrumentation
event handler that memorize each answered question's retrievals exactly once.

Both follow the same rule: a retrieval belongs to the outermost run (LangChain) or the nearest
query (LlamaIndex) it happened in; when that run ends with an answer, every trace it produced
is memorized with the answer text; when it errors, nothing is written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Self
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.query import QueryEndEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.instrumentation.span import SimpleSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from pydantic import PrivateAttr

from .types import MemoryWrite, UnknownTraceError

if TYPE_CHECKING:
    from .retriever import ReMindRetriever

log = logging.getLogger(__name__)


def _trace_ids(metadatas: Sequence[Any]) -> list[str]:
    ids = (m.get("trace_id") for m in metadatas if isinstance(m, dict))
    return list(dict.fromkeys(t for t in ids if isinstance(t, str)))


class _MemoryWriter:
    """Memorizes traces of one retriever, each at most once, recording writes and errors."""

    def __init__(self, retriever: ReMindRetriever) -> None:
        self.retriever = retriever
        self.writes: list[MemoryWrite] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    def owns(self, trace_id: str) -> bool:
        try:
            self.retriever.engine.trace(trace_id)
        except UnknownTraceError:
            return False
        return True

    def write(self, trace_ids: Sequence[str], answer: str | None) -> None:
        for tid in trace_ids:
            try:
                w = self.retriever.memorize(tid, answer=answer)
            except Exception as exc:  # noqa: BLE001 - a callback must not break the chain
                log.warning("ReMindRAG: memorizing trace %s failed: %s", tid, exc)
                with self._lock:
                    self.errors.append(exc)
                continue
            with self._lock:
                self.writes.append(w)


# ---------------------------------------------------------------------------------------------
# LangChain


def answer_text(outputs: Any) -> str | None:
    """The answer in a chain's final output: a string, a message, or a dict holding one."""
    if isinstance(outputs, str):
        return outputs
    content = getattr(outputs, "content", None)
    if content is not None:
        if isinstance(content, list):
            return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
        return str(content)
    if isinstance(outputs, dict):
        for key in ("answer", "output", "result", "text", "content"):
            if key in outputs:
                return answer_text(outputs[key])
        if isinstance(outputs.get("messages"), list) and outputs["messages"]:
            return answer_text(outputs["messages"][-1])
    return None


class ReMindMemoryCallback(BaseCallbackHandler):
    """LangChain callback handler: when the outermost run ends with the final answer
    (streaming included), memorize every ReMindRAG trace retrieved inside it, once, with the
    answer text. A run that errors writes nothing. Pass it as ``config={"callbacks": [cb]}``.

    ``writes`` lists the :class:`MemoryWrite` s made; ``errors`` what failed while writing.
    """

    def __init__(self, retriever: ReMindRetriever) -> None:
        self._writer = _MemoryWriter(retriever)
        self._lock = threading.Lock()
        self._parent: dict[UUID, UUID | None] = {}
        self._pending: dict[UUID, list[str]] = {}  # root run -> trace ids

    @property
    def retriever(self) -> ReMindRetriever:
        return self._writer.retriever

    @property
    def writes(self) -> list[MemoryWrite]:
        return self._writer.writes

    @property
    def errors(self) -> list[BaseException]:
        return self._writer.errors

    # run tree bookkeeping
    def _start(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        with self._lock:
            self._parent[run_id] = parent_run_id if parent_run_id in self._parent else None

    def _root(self, run_id: UUID) -> UUID:
        while (parent := self._parent.get(run_id)) is not None:
            run_id = parent
        return run_id

    def _end(self, run_id: UUID) -> tuple[bool, list[str]]:
        """Forget a run; for a root run, also hand back its pending trace ids."""
        with self._lock:
            is_root = self._parent.pop(run_id, None) is None
            return is_root, self._pending.pop(run_id, []) if is_root else []

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_tool_start(
        self,
        serialized: Any,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_retriever_start(
        self,
        serialized: Any,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_retriever_end(
        self,
        documents: Sequence[Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        ids = [
            t
            for t in _trace_ids([getattr(d, "metadata", None) for d in documents])
            if self._writer.owns(t)
        ]
        with self._lock:
            root = self._root(run_id)
            if root != run_id:  # a bare retriever call has no answer to learn from
                pending = self._pending.setdefault(root, [])
                pending.extend(t for t in ids if t not in pending)
        self._end(run_id)

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        is_root, trace_ids = self._end(run_id)
        if is_root and trace_ids and outputs is not None:  # None: a stream left unfinished
            self._writer.write(trace_ids, answer_text(outputs))

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._end(run_id)

    def _error(self, run_id: UUID) -> None:
        self._end(run_id)  # a root that errored drops its pending traces unwritten

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id)


# ---------------------------------------------------------------------------------------------
# LlamaIndex


class _SpanTree(BaseSpanHandler[SimpleSpan]):
    """Keeps the open spans' parents so an event can be placed inside its query; tells the
    owner when a span closes."""

    _on_close: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "ReMindSpanTree"

    def new_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Any = None,
        parent_span_id: str | None = None,
        tags: Any = None,
        **kwargs: Any,
    ) -> SimpleSpan:
        return SimpleSpan(id_=id_, parent_id=parent_span_id)

    def prepare_to_exit_span(
        self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any
    ) -> SimpleSpan | None:
        return self._close(id_, errored=False)

    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Any = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> SimpleSpan | None:
        return self._close(id_, errored=True)

    def _close(self, id_: str, errored: bool) -> SimpleSpan | None:
        if self._on_close is not None:
            self._on_close(id_, errored)
        return self.open_spans.get(id_)

    def ancestors(self, span_id: str | None) -> tuple[str, ...]:
        """The open spans above ``span_id`` (not including it), innermost first."""
        out: list[str] = []
        span = self.open_spans.get(span_id) if span_id else None
        while span is not None and span.parent_id and span.parent_id not in out:
            out.append(span.parent_id)
            span = self.open_spans.get(span.parent_id)
        return tuple(out)


class ReMindMemoryEventHandler(BaseEventHandler):
    """LlamaIndex instrumentation handler: on ``QueryEndEvent`` it memorizes the ReMindRAG
    traces retrieved inside that query with the response text; a streaming response is
    memorized once its generator is fully consumed. A query that errors writes nothing.

    ``ReMindMemoryEventHandler(retriever=r).attach()`` registers it (and the span tracker it
    needs) on the root dispatcher; ``detach()`` removes both.
    """

    retriever: Any

    _writer: _MemoryWriter = PrivateAttr()
    _spans: _SpanTree = PrivateAttr()
    _pending: dict[str, tuple[str, ...]] = PrivateAttr(default_factory=dict)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _dispatcher: Any = PrivateAttr(default=None)

    def __init__(self, retriever: ReMindRetriever | None = None, **kwargs: Any) -> None:
        if retriever is not None:
            kwargs["retriever"] = retriever
        super().__init__(**kwargs)
        self._writer = _MemoryWriter(self.retriever)
        self._spans = _SpanTree(
            open_spans={}, completed_spans=[], dropped_spans=[], current_span_ids={}
        )
        self._spans._on_close = self._span_closed

    @classmethod
    def class_name(cls) -> str:
        return "ReMindMemoryEventHandler"

    @property
    def writes(self) -> list[MemoryWrite]:
        return self._writer.writes

    @property
    def errors(self) -> list[BaseException]:
        return self._writer.errors

    def attach(self, dispatcher: Any = None) -> Self:
        d = dispatcher or get_dispatcher()
        d.add_event_handler(self)
        d.add_span_handler(self._spans)
        self._dispatcher = d
        return self

    def detach(self) -> None:
        d = self._dispatcher
        if d is not None:
            d.event_handlers = [h for h in d.event_handlers if h is not self]
            d.span_handlers = [h for h in d.span_handlers if h is not self._spans]
            self._dispatcher = None

    def __enter__(self) -> Self:
        return self if self._dispatcher is not None else self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        try:
            if isinstance(event, RetrievalEndEvent):
                self._on_retrieval(event)
            elif isinstance(event, QueryEndEvent):
                self._on_query_end(event)
        except Exception as exc:  # noqa: BLE001 - the dispatcher would swallow it
            log.warning("ReMindRAG memory handler failed on %s: %s", type(event).__name__, exc)
            self._writer.errors.append(exc)

    def _on_retrieval(self, event: RetrievalEndEvent) -> None:
        above = self._spans.ancestors(event.span_id)
        if not above:  # a bare retrieve() call: no answer will follow
            return
        ids = _trace_ids([getattr(n.node, "metadata", None) for n in event.nodes])
        with self._lock:
            for tid in ids:
                if self._writer.owns(tid):
                    self._pending[tid] = above

    def _claim(self, span_id: str | None, outermost: bool = False) -> list[str]:
        with self._lock:
            mine = [
                t
                for t, above in self._pending.items()
                if (above[-1] == span_id if outermost else span_id in above)
            ]
            for t in mine:
                del self._pending[t]
        return mine

    def _span_closed(self, span_id: str, errored: bool) -> None:
        # retrievals inside a span that errored are dropped, and so are those still unanswered
        # when their outermost span closes
        self._claim(span_id, outermost=not errored)

    def _on_query_end(self, event: QueryEndEvent) -> None:
        trace_ids = self._claim(event.span_id)
        if not trace_ids:
            return
        response = event.response
        if isinstance(response, StreamingResponse) and response.response_txt is None:
            response.response_gen = self._after_stream(response.response_gen, trace_ids)
        elif isinstance(response, AsyncStreamingResponse) and response.response_txt is None:
            response.response_gen = self._after_async_stream(response.response_gen, trace_ids)
        else:
            self._writer.write(trace_ids, str(response))

    def _after_stream(self, gen: Iterator[str], trace_ids: list[str]) -> Generator[str, None, None]:
        parts: list[str] = []
        for token in gen:
            parts.append(token)
            yield token
        self._writer.write(trace_ids, "".join(parts))

    async def _after_async_stream(
        self, gen: AsyncIterator[str], trace_ids: list[str]
    ) -> AsyncGenerator[str, None]:
        parts: list[str] = []
        async for token in gen:
            parts.append(token)
            yield token
        self._writer.write(trace_ids, "".join(parts))


__all__ = ["ReMindMemoryCallback", "ReMindMemoryEventHandler", "answer_text"]
