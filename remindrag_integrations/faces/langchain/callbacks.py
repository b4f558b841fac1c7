"""LangChain: memory after the answer, as a callback handler (see :mod:`..memory_hooks`)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from ...core.types import MemoryWrite
from ..memory_hooks import Memorizing, MemoryWriter, log, trace_ids


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
    if isinstance(outputs, list) and outputs and hasattr(outputs[-1], "content"):
        return answer_text(outputs[-1])  # a conversation: its last message
    return None


def final_reply(response: Any) -> str | None:
    """The text of a chat model's reply when it answers (no tool calls), else ``None``."""
    generations = getattr(response, "generations", None) or [[]]
    gen = generations[0][0] if generations and generations[0] else None
    message = getattr(gen, "message", None)
    if gen is None or getattr(message, "tool_calls", None):
        return None
    return answer_text(message) if message is not None else getattr(gen, "text", None)


def turn_texts(obj: Any) -> list[str]:
    """The texts of what a run is given for the current turn: every string inside ``obj``
    (a prompt, a dict of inputs, messages with their content and tool calls' arguments); of a
    conversation (a list of messages), only its last human message and what follows it."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in turn_texts(v)]
    if isinstance(obj, (list, tuple)):
        items = list(obj)
        humans = [i for i, m in enumerate(items) if getattr(m, "type", None) == "human"]
        return [t for m in items[humans[-1] if humans else 0 :] for t in turn_texts(m)]
    content = getattr(obj, "content", None)
    if content is None:
        return []
    calls = [c.get("args") for c in getattr(obj, "tool_calls", None) or []]
    return [*turn_texts(content), *turn_texts(calls)]


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


MAX_WAITING = 100  # traces kept waiting for an answer at most (the newest)
RETRIEVER_ONLY = (
    "ReMindMemoryCallback is attached to the retriever only (retriever.with_config("
    "callbacks=[cb]), or the retriever's own callbacks inside a chain): LangChain shows it the "
    "retrieval but not the answer the chain writes afterwards, so it cannot memorize by "
    "itself. Pass it to the whole chain instead: chain.invoke(q, config={'callbacks': [cb]}). "
    "Meanwhile the retrieval's trace waits: cb.answered(answer_text) memorizes it, as does "
    "the next run given this callback that ends with an answer."
)
BARE_RETRIEVAL = (
    "ReMindMemoryCallback saw a retrieval that is not part of an answering run "
    "(retriever.invoke(q, config={'callbacks': [cb]})): there is no answer to learn from "
    "yet. Its trace waits for one: pass the callback to the model call that answers "
    "(llm.invoke(prompt, config={'callbacks': [cb]})) or call cb.answered(answer_text); "
    "or pass it to a chain that retrieves and answers."
)


class ReMindMemoryCallback(BaseCallbackHandler):
    """LangChain callback handler: when the outermost run ends with the final answer
    (streaming included), memorize every ReMindRAG trace retrieved inside it, once, with the
    answer text (the answer decides what is remembered: :meth:`ReMindRAG.memorize`). A run
    that errors writes nothing. Pass it to the chain: ``config={"callbacks": [cb]}`` on
    ``invoke`` / ``ainvoke`` / ``stream`` / ``astream`` / ``batch``.

    A retrieval whose answer this callback does not see waits for it, and the callback says
    so once (a :class:`UserWarning`): a tool call in a bare tool-calling loop (the answer is
    a later model reply), a bare ``retriever.invoke(q, config={"callbacks": [cb]})``, and a
    callback attached to the retriever alone (``retriever.with_config(callbacks=[cb])``,
    which LangChain never shows the chain's answer). The waiting traces are written by the
    next outermost run given this callback that ends with an answer (a chain, or a chat
    model reply without tool calls), or by :meth:`answered`. Use one callback per
    conversation when several run at once.

    **A trace is learned only with its own answer.** A waiting trace is paired by its
    question: an outermost run given this callback (a chain, a model call) that starts a turn
    whose input does not hold the trace's question (of a conversation, the last human message
    and what follows it: the tool calls' arguments, the tool results) supersedes it, and an
    outermost model call or chain that fails drops the traces waiting for it. Dropped traces
    are never memorized: ``dropped`` maps each to its reason (also logged).

    ``writes`` lists the :class:`MemoryWrite` s made; ``errors`` what failed while writing.
    """

    traces_nothing = True  # attached alone, it does not make the stages runs

    def __init__(self, retriever: Memorizing) -> None:
        self._writer = MemoryWriter(retriever, "ReMindMemoryCallback")
        self._lock = threading.Lock()
        self._parent: dict[UUID, UUID | None] = {}
        self._outside: set[UUID] = set()  # runs whose parent this callback was not shown
        self._pending: dict[UUID, list[str]] = {}  # root run -> trace ids
        self._awaiting: list[str] = []  # traces of finished root tool runs
        self._said: set[str] = set()  # the warnings given once
        self.dropped: dict[str, str] = {}  # trace id -> why it was never memorized

    def answered(self, answer: str) -> list[MemoryWrite]:
        """Memorize the traces waiting for an answer (a tool loop's, a bare retrieval's, a
        retriever-only callback's) with the final ``answer``."""
        with self._lock:
            ids, self._awaiting = self._awaiting, []
        before = len(self.writes)
        self._write(ids, answer)
        return self.writes[before:]

    @property
    def waiting(self) -> list[str]:
        """The trace ids waiting for an answer (see the class doc)."""
        with self._lock:
            return list(self._awaiting)

    def _say_once(self, message: str) -> None:
        with self._lock:
            if message in self._said:
                return
            self._said.add(message)
        log.warning("%s", message)
        warnings.warn(message, UserWarning, stacklevel=2)

    def _drop(self, trace_ids: Sequence[str], reason: str) -> None:
        with self._lock:
            for t in trace_ids:
                self.dropped[t] = reason
            for t in list(self.dropped)[:-MAX_WAITING]:  # the newest reasons are kept
                del self.dropped[t]
        for t in trace_ids:
            log.info("ReMindRAG: trace %s is not memorized: %s", t, reason)

    def _fail_turn(self) -> None:
        """An outermost model call or chain failed: the traces waiting for it are dropped."""
        with self._lock:
            ids, self._awaiting = self._awaiting, []
        self._drop(ids, "its turn failed (the model call or chain that would answer it raised)")

    def _new_turn(self, given: Any) -> None:
        """An outermost run starts with ``given``: the waiting traces whose question it does
        not hold belong to a turn that was abandoned, and are dropped."""
        with self._lock:
            if not self._awaiting:
                return
            waiting = list(self._awaiting)
        text = _norm(" ".join(turn_texts(given)))
        stale = []
        for tid in waiting:
            try:
                question = _norm(self._writer.retriever.engine.trace(tid).query)
            except Exception:  # noqa: BLE001 - a trace gone from the engine: nothing to pair
                question = ""
            if not question or question not in text:
                stale.append(tid)
        if stale:
            with self._lock:
                self._awaiting = [t for t in self._awaiting if t not in stale]
            self._drop(
                stale,
                "superseded: a new turn began whose input does not hold its question, before "
                "an answer to it came",
            )

    def _await(self, trace_ids: list[str]) -> None:
        with self._lock:
            self._awaiting.extend(t for t in trace_ids if t not in self._awaiting)
            del self._awaiting[:-MAX_WAITING]  # retrievals no answer ever came for: the oldest go

    def _answer(self, trace_ids: list[str], answer: str | None) -> None:
        with self._lock:
            ids = list(dict.fromkeys([*self._awaiting, *trace_ids]))
            self._awaiting = []
        if ids and answer is None:
            self._say_once(
                "ReMindMemoryCallback found no answer text in the chain's output (a string, "
                "a message, a list of messages, or a dict with 'answer', 'output', 'result', "
                "'text', 'content' or 'messages'): its retrievals are not memorized. Call "
                "retriever.memorize(trace_id, answer=...) yourself."
            )
            return
        if ids:
            self._write(ids, answer)

    def _write(self, trace_ids: list[str], answer: str | None) -> None:
        """Memorize, as a ``ReMindRAG.memorize`` run when a tracer is set up for the whole
        process (LangSmith's environment tracing, an OpenTelemetry instrumentor such as
        OpenInference's): the answer's run has ended, so the write is a root run of its own,
        with the counts of :func:`~..llama_index.spans.traced_write` as its outputs. With
        no such tracer nothing is made."""
        from langchain_core.callbacks import CallbackManager

        manager = CallbackManager.configure()
        if not trace_ids or not any(
            not getattr(h, "traces_nothing", False) for h in manager.handlers
        ):
            self._writer.write(trace_ids, answer)
            return
        manager.add_metadata({"remindrag.stage": "memorize"}, inherit=False)
        run = manager.on_chain_start(
            None, {"trace_ids": list(trace_ids)}, name="ReMindRAG.memorize"
        )
        done, failed = len(self.writes), len(self.errors)
        try:
            self._writer.write(trace_ids, answer)
        except BaseException as exc:
            run.on_chain_error(exc)
            raise
        new = self.writes[done:]
        run.on_chain_end(
            {
                "trace_ids": [w.trace_id for w in new],
                "applied": sum(w.applied for w in new),
                "enhanced_edges": sum(len(w.enhanced) for w in new),
                "penalised_edges": sum(len(w.penalised) for w in new),
                "supporting_chunks": [c for w in new for c in w.supporting_chunks],
                "errors": len(self.errors) - failed,
            }
        )

    @property
    def retriever(self) -> Memorizing:
        return self._writer.retriever

    @property
    def writes(self) -> list[MemoryWrite]:
        return self._writer.writes

    @property
    def errors(self) -> list[BaseException]:
        return self._writer.errors

    # run tree bookkeeping
    def _start(self, run_id: UUID, parent_run_id: UUID | None) -> bool:
        """Note a run; whether it is the outermost one this callback sees."""
        with self._lock:
            known = parent_run_id in self._parent
            self._parent[run_id] = parent_run_id if known else None
            if parent_run_id is not None and not known:  # attached below the outermost run
                self._outside.add(run_id)
            return not known

    def _root(self, run_id: UUID) -> UUID:
        while (parent := self._parent.get(run_id)) is not None:
            run_id = parent
        return run_id

    def _end(self, run_id: UUID) -> tuple[bool, list[str]]:
        """Forget a run; for a root run, also hand back its pending trace ids."""
        with self._lock:
            self._outside.discard(run_id)
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
        if self._start(run_id, parent_run_id):
            self._new_turn(inputs)

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
        if self._start(run_id, parent_run_id):
            self._new_turn(messages[-1] if messages else [])

    def on_llm_start(
        self,
        serialized: Any,
        prompts: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if self._start(run_id, parent_run_id):
            self._new_turn(prompts)

    def on_llm_end(
        self, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        is_root, _ = self._end(run_id)
        text = final_reply(response) if is_root else None
        if text is not None:
            self._answer([], text)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id, fails_turn=True)

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
            outside = run_id in self._outside
            if root != run_id:  # inside a run this callback sees: its answer comes at its end
                pending = self._pending.setdefault(root, [])
                pending.extend(t for t in ids if t not in pending)
        self._end(run_id)
        if root == run_id and ids:  # no answer around it that this callback can see
            self._await(ids)
            self._say_once(RETRIEVER_ONLY if outside else BARE_RETRIEVAL)

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

    def _error(self, run_id: UUID, fails_turn: bool = False) -> None:
        is_root, pending = self._end(run_id)  # a root that errored drops its pending traces
        if is_root:
            self._drop(pending, "its run failed")
            if fails_turn:
                self._fail_turn()

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id, fails_turn=True)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._error(run_id)
