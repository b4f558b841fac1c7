"""Named LLMs for the command line: ``--llm`` read as the bench harness reads it
(:func:`~..bench.resources.make_llm`), and the on-disk reply cache around it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.errors import ReMindError


class CLIError(ReMindError):
    """A user error the CLI reports in one line (exit status 2)."""


def load_llm(spec: str | None) -> Any:
    """``oracle`` (the scripted gold navigator of the bench harness), or any spec the
    Python API takes too: :func:`~..bench.resources.make_llm` (the command line sits on
    top of the harness: ``remindrag bench`` is its door, and the harness never imports the
    command line)."""
    from ..bench.resources import make_llm

    return make_llm(spec)


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
