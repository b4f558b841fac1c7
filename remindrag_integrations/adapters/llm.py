"""LLM adapters: LangChain chat models, LlamaIndex LLMs and plain callables as a
:class:`~..core.protocols.ChatLLM`.

Frameworks are never imported at module import: adapters recognise objects by duck typing.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.errors import ConfigError, LLMError
from ..core.protocols import ChatLLM, Completion
from ..core.steps import off_loop
from ..core.text import count_tokens


def _counted(
    prompt: str,
    text: str,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    cached_prompt_tokens: int | None = None,
) -> Completion:
    n_prompt = prompt_tokens if prompt_tokens else count_tokens(prompt)
    return Completion(
        text=text,
        prompt_tokens=n_prompt,
        completion_tokens=completion_tokens if completion_tokens else count_tokens(text),
        cached_prompt_tokens=min(_int(cached_prompt_tokens), n_prompt),
    )


def _int(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0


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
        return await off_loop(self.complete, prompt)  # abandoned on timeout, not joined


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
        details = usage.get("input_token_details") or {}
        return _counted(
            prompt,
            str(content),
            usage.get("input_tokens"),
            usage.get("output_tokens"),
            details.get("cache_read"),
        )

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


def _usage_from_raw(raw: Any) -> tuple[int | None, int | None, int | None]:
    """(prompt, completion, cached prompt) tokens of an OpenAI-style ``usage``."""
    usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    if usage is None:
        return None, None, None
    get = usage.get if isinstance(usage, dict) else lambda k: getattr(usage, k, None)
    details = get("prompt_tokens_details")
    cached = (
        details.get("cached_tokens")
        if isinstance(details, dict)
        else getattr(details, "cached_tokens", None)
    )
    return get("prompt_tokens"), get("completion_tokens"), cached


def as_chat_llm(obj: Any) -> ChatLLM | None:
    """Wrap ``obj`` (None, a ChatLLM, LangChain model, LlamaIndex LLM or callable, or a spec
    string like ``"local:smollm2"`` or ``"openai:gpt-4o-mini"``: see :mod:`.llm_specs`)."""
    if isinstance(obj, str):
        from .llm_specs import load_llm

        obj = load_llm(obj)
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


__all__ = ["CallableLLM", "LangChainLLM", "LlamaIndexLLM", "as_chat_llm"]
