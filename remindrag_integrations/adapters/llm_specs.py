"""LLM specs: one parser of the strings that name an LLM, for the Python API
(``ReMindRetriever.from_documents(docs, llm="local:smollm2")``) and the command line's
``--llm`` alike."""

from __future__ import annotations

import importlib.util
from typing import Any

from ..core.errors import ConfigError

SPECS = (
    "'none', 'local:smollm2' (or gemma3, qwen2.5-1.5b, qwen2.5-0.5b, PATH.gguf) or 'provider:model'"
)


def load_llm(spec: str | None) -> Any:
    """The LLM a spec names: ``none`` (``None``: zero-token mode), ``local:smollm2`` /
    ``local:gemma3`` / ``local:qwen2.5-1.5b`` / ``local:qwen2.5-0.5b`` / ``local:PATH.gguf``
    (llama.cpp, extra ``local``), or ``provider:model`` through LangChain's
    ``init_chat_model`` (e.g. ``openai:gpt-4o-mini``, the paper's backbone). A spec that
    cannot load is a :class:`ConfigError` now, not at the first call."""
    if spec is None or spec.lower() == "none":
        return None
    provider, sep, model = spec.partition(":")
    if not sep or not model:
        raise ConfigError(f"LLM spec {spec!r}: expected {SPECS}")
    if provider == "local":
        from .local_llm import LlamaCppChatModel, install_line, resolve_model_path

        resolve_model_path(model)  # fail now, not at the first call
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError(
                f"LLM spec {spec!r} runs on llama-cpp-python, which is not installed: "
                f"{install_line(model)}"
            )
        if model.startswith("qwen2.5-"):  # room for a walk's growing prompt; short replies
            return LlamaCppChatModel(model_path=model, n_ctx=8192, max_tokens=128)
        return LlamaCppChatModel(model_path=model)
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ConfigError(
            f"LLM spec {spec!r} needs LangChain's init_chat_model: pip install langchain "
            f"langchain-{provider} (and that provider's API key)"
        ) from exc
    try:
        return init_chat_model(model, model_provider=provider, temperature=0)
    except Exception as exc:  # missing provider package, missing key, unknown provider
        raise ConfigError(f"LLM spec {spec!r}: {type(exc).__name__}: {exc}") from exc
