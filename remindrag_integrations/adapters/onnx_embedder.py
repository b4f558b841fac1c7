"""The packaged all-MiniLM-L6-v2 on ``onnxruntime``: sentence-transformers' vectors without
importing torch.

The ONNX graph is exported once from the packaged weights (this needs torch and ``onnx``) into
``~/.cache/remindrag/onnx/<key>/``, where ``key`` depends on the model files and the export
version; every later process loads it in a fraction of a second. Nothing is downloaded.
``onnxruntime`` and ``onnx`` are core dependencies, so a plain install takes this path.

Two graphs are exported: the float32 model (cosine ≥ 0.9999 to sentence-transformers) and an
int8 one (weights of the attention projections and the feed-forward up-projection quantized
per channel, activations dynamically: the CPU's int8 dot products). Texts of at least
``INT8_MIN_TOKENS`` tokens go through the int8 graph (1.4× faster; cosine ≥ 0.99 to float32
on every real text of that length measured, 0.997 on average), shorter ones (entity names, most
questions) through float32, whose vectors the int8 graph would move more (benchmarks/RESULTS.md,
"Indexing throughput"). Which graph a text takes depends only on the text, and the int8 graph
runs one text per call (its activation scale is per call; texts run in parallel, one thread
each), so a text always gets the same vector.
``quantized=False`` (or ``REMINDRAG_EMBEDDER_BACKEND=onnx-fp32``) keeps every text on
float32. Float32 batches are formed by length (sorted, at most ``token_budget`` padded tokens
each), which pads little and keeps each matrix product in cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import EmbeddingError
from .windows import WINDOW_STRIDE, check_long_texts, mean_of_windows

EXPORT_VERSION = 2  # bump when the exported graph changes (2: eager attention, int8 graph)
MODEL_FILE = "model.onnx"
INT8_FILE = "model-int8.onnx"
INT8_MIN_TOKENS = 16  # shorter texts lose more to int8 (cosine down to 0.97 under 8 tokens)
TOKEN_BUDGET = 512  # padded tokens per batch (256-1024 within 5 % of each other)
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
        _quantize(tmp / MODEL_FILE, tmp / INT8_FILE)
        shutil.copy(model_dir / "tokenizer.json", tmp / "tokenizer.json")
        digest = hashlib.sha256((tmp / MODEL_FILE).read_bytes()).hexdigest()
        meta = {
            "version": EXPORT_VERSION,
            "sha256": digest,
            "max_seq_length": max_seq_length,
            "int8": INT8_FILE,
            "int8_min_tokens": INT8_MIN_TOKENS,
        }
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
    # eager attention exports plain MatMul / Softmax, 8 % faster on onnxruntime's CPU kernels
    # than the scaled-dot-product export (same vectors)
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
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


def _quantize(src: Path, out: Path) -> None:
    """The int8 graph: per-channel int8 weights for the query / key / value projections and
    the feed-forward up-projection; the attention output and feed-forward down-projection
    stay float32 (quantizing them too was 2.2× faster than float32 but moved passages to
    cosine 0.989 and names to 0.96)."""
    import onnx

    with _root_logger_kept():  # onnxruntime.quantization calls logging.basicConfig on import
        from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(src)).graph
    weights = {w.name for w in graph.initializer}
    nodes = [
        n.name
        for n in graph.node
        if n.op_type == "MatMul"
        and any(i in weights for i in n.input)
        and ("/attention/self/" in n.name or "/intermediate/" in n.name)
    ]
    if not nodes:
        raise EmbeddingError(f"{src}: no projection to quantize in the exported graph")
    with _root_logger_kept():  # its advice to pre-process, through the root logger
        quantize_dynamic(
            str(src),
            str(out),
            per_channel=True,
            reduce_range=False,
            weight_type=QuantType.QInt8,
            nodes_to_quantize=nodes,
            op_types_to_quantize=["MatMul"],
        )


@contextlib.contextmanager
def _root_logger_kept() -> Iterator[None]:
    """Run code that logs through the root logger (``logging.warning``, which installs a
    handler when the root has none; ``logging.basicConfig``) without a trace: its records
    are dropped, and the root logger's handlers and level are put back as they were, so an
    app's own ``logging.basicConfig`` still works afterwards."""
    root = logging.getLogger()
    handlers, level, disabled = list(root.handlers), root.level, root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(disabled)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


class OnnxEmbedder:
    """Mean-pooled, L2-normalised sentence embeddings from an exported BERT model on
    ``onnxruntime`` (what the sentence-transformers model computes). Loaded on first use."""

    identity = "all-MiniLM-L6-v2"
    exact_int8 = True
    """Exact integer products on every x86 processor (see :meth:`_int8_session`)."""
    cpu_bound = True
    """It computes on this machine's CPU (an insert does not embed ahead by default:
    ``IndexConfig.embed_ahead``)."""

    def __init__(
        self,
        model_dir: Path,
        batch_size: int = 128,
        threads: int | None = None,
        quantized: bool = True,
        token_budget: int = TOKEN_BUDGET,
        long_texts: str = "windows",
    ) -> None:
        self.model_dir = Path(model_dir)
        self.batch_size = batch_size  # texts per batch at most
        self.threads = threads
        self.quantized = quantized
        self.token_budget = token_budget
        self.long_texts = check_long_texts(long_texts)
        self._session: Any = None
        self._int8: Any = None
        self._int8_file: Path | None = None  # None: no int8 graph (or quantized=False)
        self._int8_min_tokens = INT8_MIN_TOKENS
        self._tokenizer: Any = None
        self._dim: int | None = None
        self._lock = threading.Lock()

    def _new_session(self, path: Path, threads: int | None = None, exact_int8: bool = False) -> Any:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if exact_int8:
            opts.add_session_config_entry("session.x64quantprecision", "1")
        # no busy-waiting between runs: onnxruntime's threads otherwise spin on the
        # cores after each call, and the query's searches right after an embed (NumPy's
        # BLAS threads) waited for them: a 1,890-row scan took 5.8 ms instead of
        # 0.05 ms; embedding speed is unchanged (benchmarks/RESULTS.md §10)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads or self.threads:
            opts.intra_op_num_threads = threads or self.threads
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                from tokenizers import Tokenizer

                where = export(self.model_dir)
                meta = json.loads((where / META_FILE).read_text(encoding="utf-8"))
                tok = Tokenizer.from_file(str(where / "tokenizer.json"))
                # a longer text's further windows in each encoding's ``overflowing``
                tok.enable_truncation(int(meta["max_seq_length"]), stride=WINDOW_STRIDE)
                tok.no_padding()  # batches are padded here, to their own longest text
                if self.quantized and meta.get("int8"):
                    self._int8_file = where / meta["int8"]
                    self._int8_min_tokens = int(meta["int8_min_tokens"])
                self._session = self._new_session(where / MODEL_FILE)
                self._tokenizer = tok
            return self._session, self._tokenizer

    def _int8_session(self, path: Path) -> Any:
        """The int8 graph's session (one thread per call), created on the first text long
        enough for it. Its integer products are exact on every x86 processor
        (``session.x64quantprecision``: where onnxruntime's uint8 × int8 kernel sums pairs in
        16 bits and can saturate — AVX2, AVX-512 without VNNI — it runs the exact uint8 ×
        uint8 kernel instead, what a VNNI processor computes anyway), so a passage gets the
        same vector on any x86-64 machine up to float rounding (docs/offline.md, "Another
        processor"; 1.09–1.10× the int8 CPU where it applies)."""
        with self._lock:
            if self._int8 is None:
                self._int8 = self._new_session(path, threads=1, exact_int8=self.exact_int8)
            return self._int8

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        session, tok = self._load()
        enc = tok.encode_batch(list(texts))
        if self.long_texts == "truncate" or not any(e.overflowing for e in enc):
            return self._embed_encoded(session, enc)
        windows = [w for e in enc for w in e.overflowing]
        owner = list(range(len(enc))) + [i for i, e in enumerate(enc) for _ in e.overflowing]
        pieces = np.fromiter((len(e.ids) for e in enc + windows), dtype=np.int64)
        vecs = self._embed_encoded(session, enc + windows)
        return mean_of_windows(vecs, owner, pieces, len(enc))

    def _embed_encoded(self, session: Any, enc: list[Any]) -> np.ndarray:
        """One unit vector per encoding (one window of a text)."""
        lens = np.fromiter((len(e.ids) for e in enc), dtype=np.int64, count=len(enc))
        out = np.zeros((len(enc), self.dimension), dtype=np.float32)
        order = np.argsort(lens, kind="stable")  # batches of similar length pad little
        int8_file, cut = self._int8_file, len(order)
        if int8_file is not None:
            cut = int(np.searchsorted(lens[order], self._int8_min_tokens))
        for rows in _batches(order[:cut], lens, self.batch_size, self.token_budget):
            out[rows] = _pooled(session, *_padded([enc[j].ids for j in rows]))
        long = order[cut:].tolist()
        if long and int8_file is not None:
            # the int8 graph runs one text per call (its activations get one scale per call,
            # so a batch would make a text's vector depend on its neighbours), on one thread
            # per call and as many calls at once as there are threads
            int8 = self._int8_session(int8_file)

            def one(j: int) -> np.ndarray:
                return _pooled(int8, *_padded([enc[j].ids]))[0]

            if len(long) == 1 or self._workers() == 1:
                out[long] = [one(j) for j in long]
            else:
                with ThreadPoolExecutor(self._workers()) as pool:
                    out[long] = list(pool.map(one, long))
        return out

    def _workers(self) -> int:
        """Parallel int8 calls: ``threads``, else the CPUs this process may run on."""
        if self.threads:
            return self.threads
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            return os.cpu_count() or 1

    @property
    def dimension(self) -> int:
        if self._dim is None:
            config = json.loads((self.model_dir / "config.json").read_text(encoding="utf-8"))
            self._dim = int(config["hidden_size"])
        return self._dim


def _pooled(session: Any, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors under ``mask``, L2-normalised: one row per text."""
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    hidden = session.run(None, feed)[0]
    vecs = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
    return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


def _padded(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids padded to the longest row, and the mask of the real tokens."""
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


def _batches(rows: np.ndarray, lens: np.ndarray, most: int, budget: int) -> list[np.ndarray]:
    """``rows`` (sorted by length) cut into batches of at most ``most`` texts and, past the
    first text, at most ``budget`` padded tokens."""
    out, start = [], 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or i - start >= most or (i - start + 1) * lens[rows[i]] > budget:
            out.append(rows[start:i])
            start = i
    return out
