"""LangChain: memory after the answer, as a callback handler (see :mod:`..memory_hooks`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from ..core.types import MemoryWrite
from ..memory_hooks import MemoryWriter, trace_ids

if TYPE_CHECKING:
    from ..retriever import ReMindRetriever


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


def final_reply(response: Any) -> str | None:
    """The text of a chat model's reply when it answers (no tool calls), else ``None``."""
    generations = getattr(response, "generations", None) or [[]]
    gen = generations[0][0] if generations and generations[0] else None
    message = getattr(gen, "message", None)
    if gen is None or getattr(message, "tool_calls", None):
        return None
    return answer_text(message) if message is not None else getattr(gen, "text", None)


class ReMindMemoryCallback(BaseCallbackHandler):
    """LangChain callback handler: when the outermost run ends with the final answer
    (streaming included), memorize every ReMindRAG trace retrieved inside it, once, with the
    answer text. A run that errors writes nothing. Pass it as ``config={"callbacks": [cb]}``.

    In a bare tool-calling loop the tool call is itself the outermost run: its traces wait for
    the answer, and are written by the next outermost run given this callback that ends with
    one (a chain, or a chat model reply without tool calls), or by :meth:`answered`. Use one
    callback per conversation when several loops run at once.

    ``writes`` lists the :class:`MemoryWrite` s made; ``errors`` what failed while writing.
    """

    def __init__(self, retriever: ReMindRetriever) -> None:
        self._writer = MemoryWriter(retriever)
        self._lock = threading.Lock()
        self._parent: dict[UUID, UUID | None] = {}
        self._pending: dict[UUID, list[str]] = {}  # root run -> trace ids
        self._awaiting: list[str] = []  # traces of finished root tool runs

    def answered(self, answer: str) -> list[MemoryWrite]:
        """Memorize the traces that root tool runs left waiting, with the final ``answer``
        (the one-liner for a loop whose final model call does not get this callback)."""
        with self._lock:
            ids, self._awaiting = self._awaiting, []
        before = len(self.writes)
        self._writer.write(ids, answer)
        return self.writes[before:]

    def _answer(self, trace_ids: list[str], answer: str | None) -> None:
        with self._lock:
            ids = list(dict.fromkeys([*self._awaiting, *trace_ids]))
            self._awaiting = []
        if ids:
            self._writer.write(ids, answer)

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

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_llm_start(
        self,
        serialized: Any,
        prompts: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_llm_end(
        self, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        is_root, _ = self._end(run_id)
        text = final_reply(response) if is_root else None
        if text is not None:
            self._answer([], text)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id)

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
            for t in trace_ids([getattr(d, "metadata", None) for d in documents])
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
        if is_root and outputs is not None:  # None: a stream left unfinished
            if trace_ids or self._awaiting:
                self._answer(trace_ids, answer_text(outputs))

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        is_root, trace_ids = self._end(run_id)
        if is_root and trace_ids:  # a bare tool loop: the answer comes later
            with self._lock:
                self._awaiting.extend(t for t in trace_ids if t not in self._awaiting)

    def _error(self, run_id: UUID) -> None:
        self._end(run_id)  # a root that errored drops its pending traces unwritten

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id)
