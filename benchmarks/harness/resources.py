"""What a bench run uses: ``--llm`` / ``--embedder`` specs, an embedding cache (each text is
embedded once across builds) and a description of the machine."""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def make_llm(spec: str | None) -> Any:
    """The harness's ``--llm`` spec as an LLM: ``oracle`` (the scripted gold navigator,
    :class:`~..testing.OracleLLM`, which only a benchmark can give its gold), else the one
    spec loader the command line and the Python API use
    (:func:`~..adapters.llm_specs.load_llm`: ``none``, ``local:smollm2``,
    ``provider:model``, ...)."""
    if spec == "oracle":
        from remindrag_integrations.testing import OracleLLM

        return OracleLLM()
    from remindrag_integrations.adapters.llm_specs import load_llm

    return load_llm(spec)


class CachedEmbedder:
    """Memoises an embedder by text, so per-question graphs and repeated builds embed each
    passage and entity name once. With ``path`` the cache persists between runs (an ``.npz``
    of sha1 keys and vectors, no pickle; :meth:`persist` merges with what is on disk)."""

    def __init__(self, inner: Any, path: str | os.PathLike[str] | None = None) -> None:
        self.inner = inner
        self.path = Path(path) if path else None
        self.cache: dict[str, np.ndarray] = {}
        self._disk: dict[str, np.ndarray] = self._read() if self.path else {}

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def _read(self) -> dict[str, np.ndarray]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            with np.load(self.path, allow_pickle=False) as z:
                return dict(zip(z["keys"].tolist(), z["vecs"]))
        except (OSError, ValueError, KeyError):
            return {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = []
        for t in dict.fromkeys(t for t in texts if t not in self.cache):
            hit = self._disk.get(self._key(t))
            if hit is None:
                missing.append(t)
            else:
                self.cache[t] = hit
        if missing:
            self.cache.update(zip(missing, np.asarray(self.inner.embed(missing), np.float32)))
        if not texts:
            return np.zeros((0, len(next(iter(self.cache.values()), [0.0]))), np.float32)
        return np.stack([self.cache[t] for t in texts])

    def persist(self) -> None:
        if self.path is None:
            return
        merged = {**self._read(), **{self._key(t): v for t, v in self.cache.items()}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp.npz")
        np.savez(
            tmp, keys=np.array(list(merged), dtype="U40"), vecs=np.stack(list(merged.values()))
        )
        os.replace(tmp, self.path)
        self._disk = merged


def make_embedder(
    spec: str, cache_dir: str | os.PathLike[str] | None = None, long_texts: str = "windows"
) -> CachedEmbedder:
    """``hash`` (tests), ``minilm`` (the packaged default) or a sentence-transformers model;
    with ``cache_dir`` the vectors are kept on disk between runs; ``long_texts``: how the
    packaged model embeds texts longer than its window (``windows``, the default, or
    ``truncate``)."""
    if spec == "hash":
        return CachedEmbedder(_UnitHash())
    from remindrag_integrations.adapters.embeddings import (
        SentenceTransformerEmbedder,
        default_embedder,
    )

    # minilm: the library's default (onnxruntime unless REMINDRAG_EMBEDDER_BACKEND=torch), so
    # the bench times what a user's queries do; each backend keeps its own cache file
    inner = (
        default_embedder(long_texts)
        if spec == "minilm"
        else SentenceTransformerEmbedder(spec, long_texts=long_texts)
    )
    name = spec.replace("/", "_")
    if spec == "minilm" and not isinstance(inner, SentenceTransformerEmbedder):
        name += "-onnx-int8" if getattr(inner, "quantized", False) else "-onnx"
    name += "-win" if long_texts == "windows" else ""  # long texts' vectors differ
    path = Path(cache_dir) / f"{name}.npz" if cache_dir else None
    return CachedEmbedder(inner, path)


class _UnitHash:
    """HashEmbedder with unit rows (dense baselines compare cosines)."""

    def __init__(self) -> None:
        from remindrag_integrations.testing import HashEmbedder

        self.inner = HashEmbedder(256)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        v = self.inner.embed(texts)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def machine() -> dict[str, Any]:
    import os

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "processor": platform.processor(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
