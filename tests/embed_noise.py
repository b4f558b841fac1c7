"""The suite's processor-drift mode: every vector the packaged embedder returns is moved by a
small seeded relative noise, as another processor's int8 / float kernels would move it.

``REMINDRAG_TEST_EMBED_NOISE=1e-3 pytest -m packaged_embedder`` runs the tests that build their
graphs with the packaged MiniLM under that noise (``make test`` does, after the whole suite);
``tests/conftest.py`` installs it in the test process and, through ``tests/_noise_site``
(a ``sitecustomize`` put first on ``PYTHONPATH``), in every Python subprocess a test starts.

The noise of a text is a function of the text alone (seeded by its hash and
``REMINDRAG_TEST_EMBED_SEED``): the same text gets the same vector in every call and every
process, as on a real processor. Each component is moved by a normal noise of ``scale`` times
the row's norm and the row normalised again, so the cosine of two texts moves by about
``scale`` (its standard deviation) and a row by a relative distance of about ``scale`` × √384:
at 1e-3, ≈ 0.02, thousands of times the float rounding left between x86-64 processors once the
int8 products are exact, a third of what the saturating and exact int8 kernels differ by
(cosine 0.998, ``benchmarks/embedder_drift.py``; docs/offline.md).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

ENV = "REMINDRAG_TEST_EMBED_NOISE"
SEED_ENV = "REMINDRAG_TEST_EMBED_SEED"


def scale_from_env() -> float:
    """The noise scale asked for (0.0: off)."""
    raw = os.environ.get(ENV, "").strip()
    return float(raw) if raw else 0.0


def perturb(texts: Sequence[str], vecs: np.ndarray, scale: float, seed: int = 0) -> np.ndarray:
    """``vecs`` (one row per text), each component moved by ``scale`` of its row's norm
    (seeded by the text), the rows normalised again."""
    out = np.array(vecs, dtype=np.float32, copy=True)
    for i, text in enumerate(texts):
        digest = hashlib.sha256(f"{seed}\x00{text}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        g = rng.standard_normal(out.shape[1]).astype(np.float32)
        row = out[i]
        norm = float(np.linalg.norm(row))
        if norm == 0.0:
            continue
        moved = row + scale * norm * g
        out[i] = moved * (norm / float(np.linalg.norm(moved)))
    return out


def _wrap(embed: Callable[..., np.ndarray], scale: float, seed: int, only: Any) -> Any:
    @functools.wraps(embed)
    def noisy(self: Any, texts: Sequence[str]) -> np.ndarray:
        vecs = embed(self, texts)
        if only is not None and not only(self):
            return vecs
        return perturb(list(texts), vecs, scale, seed)

    noisy.__remindrag_noise__ = scale  # type: ignore[attr-defined]
    return noisy


def install(scale: float | None = None) -> bool:
    """Patch the packaged embedder's classes (both backends) once; True when noise is on."""
    scale = scale_from_env() if scale is None else scale
    if scale <= 0.0:
        return False
    seed = int(os.environ.get(SEED_ENV, "0") or 0)
    from remindrag_integrations.adapters import embeddings, onnx_embedder

    onnx = onnx_embedder.OnnxEmbedder
    if not hasattr(onnx.embed, "__remindrag_noise__"):
        onnx.embed = _wrap(onnx.embed, scale, seed, None)  # type: ignore[method-assign]
    st = embeddings.SentenceTransformerEmbedder
    if not hasattr(st.embed, "__remindrag_noise__"):
        # only the packaged weights: a user's own model is not what drifts between processors
        st.embed = _wrap(st.embed, scale, seed, lambda e: e.is_default)  # type: ignore[method-assign]
    return True
