"""LlamaIndex: memory after the answer, as an instrumentation event handler (see
:mod:`..memory_hooks`).

LlamaIndex answers through a response synthesizer in every app shape (query engines, chat
engines such as ``ContextChatEngine`` and ``CondensePlusContextChatEngine``, query-engine
tools inside agents), and the synthesizer announces each answer with a ``SynthesizeEndEvent``
whose response carries the source nodes it was written from. The handler memorizes the
ReMindRAG traces those nodes name, with the answer text: the trace is tied to the answer that
used it, whatever runs concurrently. A bare ``retrieve()`` (no answer) writes nothing, and so
does a synthesis that errors.

A fusion retriever (``QueryFusionRetriever``) merges the passage this retriever and another
one both return into one node, which may be the other retriever's, without the trace id: the
handler also notes the nodes each retrieval of this retriever returned (by the node's hash,
which fusions merge on) and reads the trace back from there; a merged node that more than one
unanswered retrieval returned is ambiguous, and the handler says so (a warning) instead of
guessing. One handler is attached per retriever: :meth:`ReMindMemoryEventHandler.of` (what
``retriever.memory_event_handler()`` calls) hands back the one already attached, and
attaching another detaches the first.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Any, ClassVar, Self

from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.instrumentation.events.synthesis import SynthesizeEndEvent
from pydantic import PrivateAttr

from ...core.errors import ConfigError
from ...core.types import MemoryWrite
from ..memory_hooks import Memorizing, MemoryWriter, log, trace_ids
from .spans import listening, traced_write

MAX_NOTED = 4096  # node hashes remembered for fusions that drop the trace id (the newest)


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
    _recent: OrderedDict[str, set[str]] = PrivateAttr()
    _recent_lock: Any = PrivateAttr()
    _said: bool = PrivateAttr()

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
        self._recent, self._recent_lock, self._said = OrderedDict(), threading.Lock(), False

    @classmethod
    def class_name(cls) -> str:
        return "ReMindMemoryEventHandler"

    @property
    def writes(self) -> list[MemoryWrite]:
        return self._writer.writes

    @property
    def errors(self) -> list[BaseException]:
        return self._writer.errors

    @classmethod
    def of(cls, retriever: Memorizing, dispatcher: Any = None) -> ReMindMemoryEventHandler:
        """The handler attached for ``retriever`` on ``dispatcher`` (the root one by
        default), attaching one when there is none: asked for on every request, it is still
        one handler, and a query's work does not grow with the requests served."""
        d = dispatcher or get_dispatcher()
        for h in d.event_handlers:
            if isinstance(h, cls) and h.retriever is retriever:
                return h
        return cls(retriever=retriever).attach(d)

    @property
    def attached(self) -> bool:
        return self._dispatcher is not None

    def attach(self, dispatcher: Any = None) -> Self:
        """Register on ``dispatcher`` (the root one by default); a handler of the same
        retriever attached there before is detached (one per retriever)."""
        d = dispatcher or get_dispatcher()
        for h in list(d.event_handlers):
            if isinstance(h, ReMindMemoryEventHandler) and h is not self:
                if h.retriever is self.retriever:
                    h.detach()
        if self not in d.event_handlers:
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
        if isinstance(event, RetrievalEndEvent):
            self._note(event.nodes)
            return
        if not isinstance(event, SynthesizeEndEvent):
            return
        try:
            self._on_answer(event.response, event.span_id)
        except Exception as exc:  # noqa: BLE001 - the dispatcher would swallow it
            log.warning("ReMindRAG memory handler failed on %s: %s", type(event).__name__, exc)
            self._writer.errors.append(exc)

    def _note(self, nodes: Any) -> None:
        """Note which trace each returned node of this retriever came from, by its hash."""
        for n in nodes or []:
            node = getattr(n, "node", None)
            tid = trace_ids([getattr(node, "metadata", None)])
            key = getattr(node, "hash", None)
            if not tid or not key or not self._writer.owns(tid[0]):
                continue
            with self._recent_lock:
                self._recent.setdefault(key, set()).add(tid[0])
                self._recent.move_to_end(key)
                while len(self._recent) > MAX_NOTED:
                    self._recent.popitem(last=False)

    def _recovered(self, nodes: Any) -> list[str]:
        """The traces of source nodes that lost the trace id (a fusion kept another
        retriever's copy of the passage), read back from the noted hashes; none, with a
        warning, where a node was returned by several retrievals not yet answered."""
        found: set[str] = set()
        for n in nodes:
            node = getattr(n, "node", None)
            if trace_ids([getattr(node, "metadata", None)]):
                continue
            with self._recent_lock:
                got = set(self._recent.get(getattr(node, "hash", None) or "", ()))
            got -= self._writer.claimed
            if len(got) > 1:
                if not self._said:
                    self._said = True
                    message = (
                        "ReMindMemoryEventHandler: an answer's source node lost its ReMindRAG "
                        "trace id (a fusion retriever kept another retriever's copy of the "
                        "passage) and several unanswered retrievals returned it: memory is "
                        "skipped for it. List the ReMindRetriever so that its node is kept "
                        "(last in mode='reciprocal_rerank', first in the other modes)."
                    )
                    log.warning("%s", message)
                    warnings.warn(message, UserWarning, stacklevel=2)
                continue
            found |= got
        return sorted(found)

    def _on_answer(self, response: Any, span_id: str | None = None) -> None:
        nodes = getattr(response, "source_nodes", None) or []
        named = trace_ids([getattr(n.node, "metadata", None) for n in nodes])
        ids = self._writer.claim([*named, *self._recovered(nodes)])
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
