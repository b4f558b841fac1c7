"""Named LLMs for the command line and the bench harness: one parser of ``--llm`` specs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.types import ReMindError


class CLIError(ReMindError):
    """A user error the CLI reports in one line (exit status 2)."""


def load_llm(spec: str | None) -> Any:
    """``none`` (zero-token), ``oracle`` (the scripted gold navigator of the bench harness),
    ``local:smollm2`` / ``local:gemma3`` / ``local:qwen2.5-1.5b`` / ``local:qwen2.5-0.5b`` /
    ``local:PATH.gguf``, or ``provider:model`` through
    LangChain's ``init_chat_model`` (e.g. ``openai:gpt-4o-mini``, the paper's backbone)."""
    if spec is None or spec.lower() == "none":
        return None
    if spec == "oracle":
        from ..testing import OracleLLM

        return OracleLLM()
    provider, sep, model = spec.partition(":")
    if not sep or not model:
        raise CLIError(f"--llm {spec!r}: expected 'none', 'local:PATH.gguf' or 'provider:model'")
    if provider == "local":
        try:
            from ..adapters.local_llm import LlamaCppChatModel, resolve_model_path
        except ImportError as exc:
            raise CLIError(f"--llm local:... needs the 'local' extra ({exc})") from exc
        resolve_model_path(model)  # fail now, not at the first call
        if model.startswith("qwen2.5-"):  # room for a walk's growing prompt; short replies
            return LlamaCppChatModel(model_path=model, n_ctx=8192, max_tokens=128)
        return LlamaCppChatModel(model_path=model)
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise CLIError(
            f"--llm {spec}: needs LangChain's init_chat_model: pip install langchain "
            f"langchain-{provider} (and that provider's API key)"
        ) from exc
    try:
        return init_chat_model(model, model_provider=provider, temperature=0)
    except Exception as exc:  # missing provider package, missing key, unknown provider
        raise CLIError(f"--llm {spec}: {type(exc).__name__}: {exc}") from exc


def cached(llm: Any, spec: str, cache_dir: Path | None) -> Any:
    """The engine-facing LLM, wrapped in the on-disk response cache unless disabled."""
    from ..adapters.cache import CachedLLM
    from ..adapters.llm import as_chat_llm

    chat = as_chat_llm(llm)
    if chat is None or cache_dir is None:
        return chat
    # the key covers what changes a reply: the spec and the model's own settings
    params = getattr(llm, "_identifying_params", None) or {}
    model_id = f"{spec} {json.dumps(params, sort_keys=True, default=str)}"
    return CachedLLM(chat, cache_dir, model_id=model_id)
