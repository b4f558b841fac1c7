"""LlamaIndex: memory after the answer, as an instrumentation event handler (see
:mod:`..memory_hooks`)."""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import TYPE_CHECKING, Any, Self

from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.query import QueryEndEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.instrumentation.span import SimpleSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from pydantic import PrivateAttr

from ..core.types import MemoryWrite
from ..memory_hooks import MemoryWriter, log, trace_ids

if TYPE_CHECKING:
    from ..retriever import ReMindRetriever


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

    _writer: MemoryWriter = PrivateAttr()
    _spans: _SpanTree = PrivateAttr()
    _pending: dict[str, tuple[str, ...]] = PrivateAttr(default_factory=dict)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _dispatcher: Any = PrivateAttr(default=None)

    def __init__(self, retriever: ReMindRetriever | None = None, **kwargs: Any) -> None:
        if retriever is not None:
            kwargs["retriever"] = retriever
        super().__init__(**kwargs)
        self._writer = MemoryWriter(self.retriever)
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
        ids = trace_ids([getattr(n.node, "metadata", None) for n in event.nodes])
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


__all__ = ["ReMindMemoryEventHandler"]
