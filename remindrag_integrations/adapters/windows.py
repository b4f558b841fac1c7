"""Texts longer than an embedding model's window: every window embedded, their vectors
averaged (what the packaged embedder does on both backends)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..core.errors import ConfigError

# A text longer than the model's window (256 word pieces for MiniLM): "windows" embeds every
# window of it (consecutive windows share WINDOW_STRIDE pieces) and averages them, weighted
# by their pieces; "truncate" embeds its first window only, as sentence-transformers does
LONG_TEXTS = ("windows", "truncate")
WINDOW_STRIDE = 32


def check_long_texts(value: str) -> str:
    if value not in LONG_TEXTS:
        raise ConfigError(f"long_texts must be 'windows' or 'truncate', not {value!r}")
    return value


def mean_of_windows(
    vecs: np.ndarray, owner: Sequence[int], pieces: np.ndarray, n: int
) -> np.ndarray:
    """One unit vector per text from the unit vectors of its windows (``owner[i]``: the text
    of window ``i``), each weighted by its word pieces: the mean pooling of the whole text,
    up to the overlaps and each window's own context."""
    out = np.zeros((n, vecs.shape[1]), dtype=np.float32)
    np.add.at(out, np.asarray(owner), vecs * pieces[:, None].astype(np.float32))
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
