"""The deterministic bag-of-words embedder: the store contract's graph takes its vectors from it,
and :mod:`remindrag_integrations.testing` ships it for users' tests (no model needed)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

_TOKEN_RE = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Deterministic bag-of-words embedder: each lower-cased word (and word bigram) is hashed
    into ``dim`` buckets with a sign. Similar word sets give similar vectors; no model needed."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    def _bucket(self, token: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        return h % self.dim, (1.0 if (h >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            words = _TOKEN_RE.findall(t.lower())
            for tok in [*words, *(a + " " + b for a, b in zip(words, words[1:]))]:
                j, sign = self._bucket(tok)
                out[i, j] += sign
            if not words:
                out[i, 0] = 1.0
        return out
