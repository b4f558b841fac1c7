"""LLM adapters (LangChain chat models, LlamaIndex LLMs, plain callables) and the drivers that
run the engine's sans-IO steps against an LLM or the zero-token navigator.

Frameworks are never imported at module import: adapters recognise objects by duck typing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .embeddings import embed_checked
from .protocols import ChatLLM, Completion, Embedder
from .text import count_tokens
from .types import ConfigError, CostLedger, LLMError, LLMTimeoutError

_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="remindrag-llm")


def _counted(
    prompt: str, text: str, prompt_tokens: int | None = None, completion_tokens: int | None = None
) -> Completion:
    return Completion(
        text=text,
        prompt_tokens=prompt_tokens if prompt_tokens else count_tokens(prompt),
        completion_tokens=completion_tokens if completion_tokens else count_tokens(text),
    )


class CallableLLM:
    """A plain ``str -> str`` function (sync or async) as a :class:`ChatLLM`."""

    def __init__(self, fn: Callable[[str], str] | Callable[[str], Awaitable[str]]) -> None:
        self.fn = fn

    def complete(self, prompt: str) -> Completion:
        out = self.fn(prompt)
        if inspect.isawaitable(out):
            out = asyncio.run(_await(out))
        return _counted(prompt, _as_text(out))

    async def acomplete(self, prompt: str) -> Completion:
        if inspect.iscoroutinefunction(self.fn):
            return _counted(prompt, _as_text(await self.fn(prompt)))
        return await asyncio.to_thread(self.complete, prompt)


async def _await(x: Awaitable[Any]) -> Any:
    return await x


def _as_text(out: Any) -> str:
    if isinstance(out, str):
        return out
    raise LLMError(f"the LLM returned {type(out).__name__}, expected str")


class LangChainLLM:
    """Any LangChain ``BaseChatModel`` (or LLM runnable). Token usage comes from the message's
    ``usage_metadata`` when the provider reports it. ``callbacks`` are passed to every call so
    the calls appear as children of the caller's run."""

    def __init__(self, model: Any, callbacks: Any = None) -> None:
        self.model = model
        self.callbacks = callbacks

    def with_callbacks(self, callbacks: Any) -> LangChainLLM:
        return LangChainLLM(self.model, callbacks)

    def _config(self) -> dict[str, Any]:
        return {"callbacks": self.callbacks} if self.callbacks is not None else {}

    @staticmethod
    def _messages(prompt: str) -> list[Any]:
        from langchain_core.messages import HumanMessage

        return [HumanMessage(content=prompt)]

    def _completion(self, prompt: str, msg: Any) -> Completion:
        content = getattr(msg, "content", msg)
        if isinstance(content, list):  # content blocks
            content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
        usage = getattr(msg, "usage_metadata", None) or {}
        return _counted(prompt, str(content), usage.get("input_tokens"), usage.get("output_tokens"))

    def complete(self, prompt: str) -> Completion:
        return self._completion(prompt, self.model.invoke(self._messages(prompt), self._config()))

    async def acomplete(self, prompt: str) -> Completion:
        msg = await self.model.ainvoke(self._messages(prompt), self._config())
        return self._completion(prompt, msg)


class LlamaIndexLLM:
    """Any LlamaIndex ``LLM``; usage from ``response.raw`` when present, else counted."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def _completion(self, prompt: str, resp: Any) -> Completion:
        usage = _usage_from_raw(getattr(resp, "raw", None))
        return _counted(prompt, str(getattr(resp, "text", resp) or ""), *usage)

    def complete(self, prompt: str) -> Completion:
        return self._completion(prompt, self.llm.complete(prompt))

    async def acomplete(self, prompt: str) -> Completion:
        return self._completion(prompt, await self.llm.acomplete(prompt))


def _usage_from_raw(raw: Any) -> tuple[int | None, int | None]:
    usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    if usage is None:
        return None, None
    get = usage.get if isinstance(usage, dict) else lambda k: getattr(usage, k, None)
    return get("prompt_tokens"), get("completion_tokens")


def as_chat_llm(obj: Any) -> ChatLLM | None:
    """Wrap ``obj`` (None, a ChatLLM, LangChain model, LlamaIndex LLM or callable)."""
    if obj is None:
        return None
    module = type(obj).__module__
    if module.startswith("langchain") or hasattr(obj, "invoke") and hasattr(obj, "ainvoke"):
        return LangChainLLM(obj)
    if module.startswith("llama_index") or hasattr(obj, "complete") and hasattr(obj, "metadata"):
        return LlamaIndexLLM(obj)
    if isinstance(obj, ChatLLM):
        return obj
    if callable(obj):
        return CallableLLM(obj)
    raise ConfigError(f"cannot use {type(obj).__name__} as an LLM")


# ---------------------------------------------------------------------------------------------
# asking: the engine's steps yield an Ask and receive the reply text


@dataclass(frozen=True)
class Ask:
    """One question the engine needs answered. ``context`` carries the structured facts the
    zero-token navigator decides from; an LLM reads ``prompt``."""

    stage: str
    prompt: str
    context: dict[str, Any] = field(default_factory=dict)


class Decider(Protocol):
    def resolve(self, ask: Ask, ledger: CostLedger) -> str: ...

    async def aresolve(self, ask: Ask, ledger: CostLedger) -> str: ...


class LLMDecider:
    """Answers asks with a chat LLM, enforcing a timeout and recording cost per stage."""

    def __init__(self, llm: ChatLLM, timeout: float | None = None) -> None:
        self.llm = llm
        self.timeout = timeout

    def resolve(self, ask: Ask, ledger: CostLedger) -> str:
        # the worker runs in a copy of the caller's context, so framework tracing that
        # lives in context variables (LlamaIndex spans, LangChain configs) nests correctly
        fut = _POOL.submit(contextvars.copy_context().run, self.llm.complete, ask.prompt)
        try:
            c = fut.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            raise LLMTimeoutError(f"{ask.stage}: no reply within {self.timeout}s") from None
        except LLMError:
            raise
        except Exception as exc:  # the provider's own error type
            raise LLMError(f"{ask.stage}: {type(exc).__name__}: {exc}") from exc
        _record(ledger, ask.stage, c)
        return c.text

    async def aresolve(self, ask: Ask, ledger: CostLedger) -> str:
        try:
            c = await asyncio.wait_for(self.llm.acomplete(ask.prompt), self.timeout)
        except TimeoutError:
            raise LLMTimeoutError(f"{ask.stage}: no reply within {self.timeout}s") from None
        except LLMError:
            raise
        except Exception as exc:
            raise LLMError(f"{ask.stage}: {type(exc).__name__}: {exc}") from exc
        _record(ledger, ask.stage, c)
        return c.text


def _record(ledger: CostLedger, stage: str, c: Completion) -> None:
    if c.cached:  # a cached reply spent nothing
        ledger.record(stage, 0, 0, calls=0)
    else:
        ledger.record(stage, c.prompt_tokens, c.completion_tokens)


@dataclass(frozen=True)
class Embed:
    """A request to embed texts; the reply is a unit-normalised matrix, one row per text."""

    texts: tuple[str, ...]


Step = Generator[Ask | Embed, Any, Any]


def drive(
    step: Step, decider: Decider, ledger: CostLedger, embedder: Embedder, dim: int | None = None
) -> Any:
    """Run a step to completion, answering its requests synchronously. An LLM failure is
    thrown into the step, which decides whether to degrade or re-raise."""
    reply: Any = None
    error: LLMError | None = None
    while True:
        try:
            req = step.throw(error) if error else step.send(reply)
        except StopIteration as stop:
            return stop.value
        try:
            if isinstance(req, Embed):
                reply, error = embed_checked(embedder, req.texts, dim=dim), None
            else:
                reply, error = decider.resolve(req, ledger), None
        except LLMError as exc:
            reply, error = None, exc


@dataclass(frozen=True)
class _Done:
    value: Any


def _advance(step: Step, reply: Any, error: LLMError | None) -> Ask | Embed | _Done:
    try:
        return step.throw(error) if error else step.send(reply)
    except StopIteration as stop:
        return _Done(stop.value)


async def adrive(
    step: Step, decider: Decider, ledger: CostLedger, embedder: Embedder, dim: int | None = None
) -> Any:
    """:func:`drive` for the event loop: LLM asks are awaited, while the step's own work
    between asks (store reads and writes, e.g. PostgreSQL round trips) and embeddings run in
    a worker thread, so nothing blocks the loop."""
    reply: Any = None
    error: LLMError | None = None
    while True:
        # StopIteration cannot cross a Future: the worker hands it back as a value
        req = await asyncio.to_thread(_advance, step, reply, error)
        if isinstance(req, _Done):
            return req.value
        try:
            if isinstance(req, Embed):
                reply = await asyncio.to_thread(embed_checked, embedder, req.texts, dim=dim)
                error = None
            else:
                reply, error = await decider.aresolve(req, ledger), None
        except LLMError as exc:
            reply, error = None, exc


__all__ = [
    "Ask",
    "CallableLLM",
    "Decider",
    "Embed",
    "LLMDecider",
    "LangChainLLM",
    "LlamaIndexLLM",
    "adrive",
    "as_chat_llm",
    "drive",
]
