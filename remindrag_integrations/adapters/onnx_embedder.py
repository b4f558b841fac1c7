"""The packaged all-MiniLM-L6-v2 on ``onnxruntime``: the same vectors as sentence-transformers
(cosine ≥ 0.9999 on real passages, ``benchmarks/indexing.py``) without importing torch.

The ONNX graph is exported once from the packaged weights (this needs torch and ``onnx``) into
``~/.cache/remindrag/onnx/<key>/``, where ``key`` depends on the model files and the export
version; every later process loads it in a fraction of a second. Nothing is downloaded.
``onnxruntime`` and ``onnx`` are core dependencies, so a plain install takes this path.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.types import EmbeddingError

EXPORT_VERSION = 1  # bump when the exported graph changes
MODEL_FILE = "model.onnx"
META_FILE = "export.json"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_available() -> bool:
    """Whether ``onnxruntime`` is installed (checked without importing it)."""
    return importlib.util.find_spec("onnxruntime") is not None


def can_export() -> bool:
    """Whether this environment can make the export (torch, onnx and transformers)."""
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "onnx", "transformers"))


def cache_root() -> Path:
    base = os.environ.get("REMINDRAG_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "remindrag"
    )
    return Path(base) / "onnx"


def export_key(model_dir: Path) -> str:
    """A key that changes when the model's weights, config or tokenizer change (sizes and
    modification times: cheap at every start) or when the export does."""
    h = hashlib.sha256(f"v{EXPORT_VERSION}".encode())
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        st = (model_dir / name).stat()
        h.update(f"{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def exported_dir(model_dir: Path) -> Path | None:
    """The finished export for ``model_dir``, or None when there is none yet."""
    out = cache_root() / export_key(model_dir)
    return out if (out / META_FILE).exists() else None


def export(model_dir: Path, max_seq_length: int = 256) -> Path:
    """Export ``model_dir`` (a sentence-transformers BERT model) to ONNX in the cache.
    Written into a temporary directory and renamed, so a crash leaves no half export."""
    done = exported_dir(model_dir)
    if done is not None:
        return done
    for mod in ("torch", "onnx", "transformers"):
        if importlib.util.find_spec(mod) is None:
            raise EmbeddingError(
                f"exporting the embedder to ONNX needs {mod!r} once (a dependency of "
                "remindrag-integrations: reinstall it)"
            )
    target = cache_root() / export_key(model_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        _torch_export(model_dir, tmp / MODEL_FILE)
        shutil.copy(model_dir / "tokenizer.json", tmp / "tokenizer.json")
        digest = hashlib.sha256((tmp / MODEL_FILE).read_bytes()).hexdigest()
        meta = {"version": EXPORT_VERSION, "sha256": digest, "max_seq_length": max_seq_length}
        (tmp / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished first: use its export
            if exported_dir(model_dir) is None:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _torch_export(model_dir: Path, out: Path) -> None:
    import warnings

    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = AutoModel.from_pretrained(str(model_dir))
    model.eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    example = tuple(torch.ones((2, 8), dtype=torch.long) for _ in INPUTS)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "hidden")}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Hidden(),
            example,
            str(out),
            input_names=list(INPUTS),
            output_names=["hidden"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


class OnnxEmbedder:
    """Mean-pooled, L2-normalised sentence embeddings from an exported BERT model on
    ``onnxruntime`` (what the sentence-transformers model computes). Loaded on first use."""

    identity = "all-MiniLM-L6-v2"

    def __init__(self, model_dir: Path, batch_size: int = 32, threads: int | None = None) -> None:
        self.model_dir = Path(model_dir)
        self.batch_size = batch_size
        self.threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._dim: int | None = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                where = export(self.model_dir)
                meta = json.loads((where / META_FILE).read_text(encoding="utf-8"))
                tok = Tokenizer.from_file(str(where / "tokenizer.json"))
                tok.enable_truncation(int(meta["max_seq_length"]))
                tok.enable_padding(pad_id=0, pad_token="[PAD]")
                opts = ort.SessionOptions()
                # no busy-waiting between runs: onnxruntime's threads otherwise spin on the
                # cores after each call, and the query's searches right after an embed (NumPy's
                # BLAS threads) waited for them: a 1,890-row scan took 5.8 ms instead of
                # 0.05 ms; embedding speed is unchanged (benchmarks/RESULTS.md §10)
                opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                if self.threads:
                    opts.intra_op_num_threads = self.threads
                self._session = ort.InferenceSession(
                    str(where / MODEL_FILE), opts, providers=["CPUExecutionProvider"]
                )
                self._tokenizer = tok
            return self._session, self._tokenizer

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        session, tok = self._load()
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")  # little padding
        for i in range(0, len(texts), self.batch_size):
            rows = order[i : i + self.batch_size]
            enc = tok.encode_batch([texts[j] for j in rows])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = session.run(None, feed)[0]
            summed = (hidden * mask[..., None]).sum(axis=1)
            vecs = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            out[rows] = vecs / np.maximum(norms, 1e-12)
        return out

    @property
    def dimension(self) -> int:
        if self._dim is None:
            config = json.loads((self.model_dir / "config.json").read_text(encoding="utf-8"))
            self._dim = int(config["hidden_size"])
        return self._dim
