"""LlamaIndex: memory after the answer, as an instrumentation event handler (see
:mod:`..memory_hooks`).

LlamaIndex answers through a response synthesizer in every app shape (query engines, chat
engines such as ``ContextChatEngine`` and ``CondensePlusContextChatEngine``, query-engine
tools inside agents), and the synthesizer announces each answer with a ``SynthesizeEndEvent``
whose response carries the source nodes it was written from. The handler memorizes the
ReMindRAG traces those nodes name, with the answer text: the trace is tied to the answer that
used it, whatever runs concurrently. A bare ``retrieve()`` (no answer) writes nothing, and so
does a synthesis that errors.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Any, ClassVar, Self

from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.synthesis import SynthesizeEndEvent
from pydantic import PrivateAttr

from ...core.errors import ConfigError
from ...core.types import MemoryWrite
from ..memory_hooks import Memorizing, MemoryWriter, log, trace_ids
from .spans import listening, traced_write


class ReMindMemoryEventHandler(BaseEventHandler):
    """LlamaIndex instrumentation handler: after each synthesized answer (query engine, chat
    engine ``chat`` / ``stream_chat`` / ``achat``, a query-engine tool), memorize the traces
    of this retriever whose nodes the answer was written from; a streamed answer is memorized
    once its generator is fully consumed.

    ``ReMindMemoryEventHandler(retriever=r).attach()`` (or ``r.memory_event_handler()``)
    registers it on the root dispatcher; ``detach()`` removes it; it is also a context manager.
    """

    retriever: Any
    traces_nothing: ClassVar[bool] = True  # attached, it does not make the stages spans

    _writer: MemoryWriter = PrivateAttr()
    _dispatcher: Any = PrivateAttr(default=None)

    def __init__(self, retriever: Memorizing | None = None, **kwargs: Any) -> None:
        if retriever is not None:
            kwargs["retriever"] = retriever
        unknown = sorted(set(kwargs) - set(type(self).model_fields))
        if unknown:
            raise ConfigError(
                f"ReMindMemoryEventHandler got unknown argument(s) {', '.join(unknown)}: it "
                "takes retriever= (or use retriever.memory_event_handler())"
            )
        writer = MemoryWriter(kwargs.get("retriever"), "ReMindMemoryEventHandler")
        super().__init__(**kwargs)
        self._writer = writer

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
        self._dispatcher = d
        return self

    def detach(self) -> None:
        d = self._dispatcher
        if d is not None:
            d.event_handlers = [h for h in d.event_handlers if h is not self]
            self._dispatcher = None

    def __enter__(self) -> Self:
        return self if self._dispatcher is not None else self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if not isinstance(event, SynthesizeEndEvent):
            return
        try:
            self._on_answer(event.response, event.span_id)
        except Exception as exc:  # noqa: BLE001 - the dispatcher would swallow it
            log.warning("ReMindRAG memory handler failed on %s: %s", type(event).__name__, exc)
            self._writer.errors.append(exc)

    def _on_answer(self, response: Any, span_id: str | None = None) -> None:
        nodes = getattr(response, "source_nodes", None) or []
        ids = self._writer.claim(trace_ids([getattr(n.node, "metadata", None) for n in nodes]))
        if not ids:
            return
        # the source nodes are what the answer was written from, not what it used: the
        # answer's own word (its citations, else the passages holding it) is the support
        if isinstance(response, StreamingResponse) and response.response_txt is None:
            response.response_gen = self._after_stream(response.response_gen, ids, span_id)
        elif isinstance(response, AsyncStreamingResponse) and response.response_txt is None:
            response.response_gen = self._after_async_stream(response.response_gen, ids, span_id)
        else:
            self._write(ids, str(response), span_id)

    def _write(self, trace_ids: list[str], answer: str, span_id: str | None) -> None:
        """Memorize, as a ``ReMindRAG.memorize`` span under the synthesis's span (``span_id``)
        when a handler listens (:mod:`.spans`)."""
        if span_id is not None and listening():
            traced_write(self._writer, trace_ids, answer, span_id)
        else:
            self._writer.write(trace_ids, answer)

    def _after_stream(
        self, gen: Iterator[str], trace_ids: list[str], span_id: str | None = None
    ) -> Generator[str, None, None]:
        parts: list[str] = []
        for token in gen:
            parts.append(token)
            yield token
        self._write(trace_ids, "".join(parts), span_id)

    async def _after_async_stream(
        self, gen: AsyncIterator[str], trace_ids: list[str], span_id: str | None = None
    ) -> AsyncGenerator[str, None]:
        parts: list[str] = []
        async for token in gen:
            parts.append(token)
            yield token
        self._write(trace_ids, "".join(parts), span_id)


__all__ = ["ReMindMemoryEventHandler"]
