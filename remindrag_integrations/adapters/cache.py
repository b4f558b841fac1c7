"""An on-disk LLM response cache, so re-indexing or re-running a benchmark pays once.

:class:`CachedLLM` wraps any :class:`~.protocols.ChatLLM`. Replies are stored one JSON file
per key, ``sha256(model id + prompt)``, under ``directory/ab/abcdef....json``; writes are
atomic (temporary file + rename), so concurrent runs may share a directory. An unreadable
entry is ignored with a warning and overwritten by the next reply. A reply served from the
cache is marked ``cached=True`` and costs no LLM call in the engine's ledger.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import warnings
from pathlib import Path

from ..core.protocols import ChatLLM, Completion

FORMAT = 1


def cache_key(model_id: str, prompt: str) -> str:
    """The entry name of ``prompt`` sent to ``model_id``."""
    return hashlib.sha256(f"{model_id}\x00{prompt}".encode()).hexdigest()


class ResponseCache:
    """A directory of JSON replies keyed by :func:`cache_key`."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or data.get("key") != key:
                raise ValueError("wrong format or key")
            return Completion(
                str(data["text"]),
                int(data["prompt_tokens"]),
                int(data["completion_tokens"]),
                cached=True,
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"ignoring unreadable LLM cache entry {path}: {exc}", stacklevel=2)
            return None

    def put(self, key: str, completion: Completion) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "format": FORMAT,
            "key": key,
            "text": completion.text,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("??/*.json"))


class CachedLLM:
    """A :class:`ChatLLM` that answers repeated prompts from a :class:`ResponseCache`.

    ``model_id`` must name everything that changes the reply (model, file, temperature): two
    models sharing a directory never see each other's replies. ``hits`` and ``misses`` count
    this object's lookups.
    """

    def __init__(self, llm: ChatLLM, directory: str | os.PathLike[str], model_id: str) -> None:
        self.llm = llm
        self.cache = ResponseCache(directory)
        self.model_id = model_id
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def _lookup(self, prompt: str) -> tuple[str, Completion | None]:
        key = cache_key(self.model_id, prompt)
        found = self.cache.get(key)
        with self._lock:
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
        return key, found

    def complete(self, prompt: str) -> Completion:
        key, found = self._lookup(prompt)
        if found is not None:
            return found
        reply = self.llm.complete(prompt)
        self.cache.put(key, reply)
        return reply

    async def acomplete(self, prompt: str) -> Completion:
        key, found = self._lookup(prompt)
        if found is not None:
            return found
        reply = await self.llm.acomplete(prompt)
        self.cache.put(key, reply)
        return reply


__all__ = ["CachedLLM", "ResponseCache", "cache_key"]
