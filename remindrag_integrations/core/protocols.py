"""The plug points: a chat LLM and an embedder here; the graph store and its optional
capabilities in :mod:`.store`, their one door.

Adapters for LangChain / LlamaIndex objects live in ``adapters/``; stores in ``stores/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["ChatLLM", "Completion", "Embedder"]


@dataclass(frozen=True)
class Completion:
    """One LLM reply with its token usage (from the provider, else counted)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool = False  # served from a response cache: no LLM call, no tokens spent
    # prompt tokens the provider read from its prompt / prefix cache (part of prompt_tokens)
    cached_prompt_tokens: int = 0


@runtime_checkable
class ChatLLM(Protocol):
    """A chat model reduced to what the engine needs: one user prompt in, one reply out."""

    def complete(self, prompt: str) -> Completion: ...

    async def acomplete(self, prompt: str) -> Completion: ...


@runtime_checkable
class Embedder(Protocol):
    """Texts in, one row per text out (any float dtype; the engine normalises)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...
