"""The command line's LLM: the on-disk reply cache around what ``--llm`` names (read by the
one spec loader, :func:`~..adapters.llm_specs.load_llm`, which the Python API's
``llm="local:smollm2"`` uses too), and the CLI's one-line error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.errors import ReMindError


class CLIError(ReMindError):
    """A user error the CLI reports in one line (exit status 2)."""


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
