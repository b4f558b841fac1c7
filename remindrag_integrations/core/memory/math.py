"""The memory math of docs/method.md §2.3 and §3, as pure numpy functions.

All vectors are float arrays of the embedding dimension; ``q_hat`` is the unit query embedding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import EmbeddingError


def unit(x: np.ndarray) -> np.ndarray:
    """``x`` scaled to norm 1 (zero stays zero)."""
    x = np.asarray(x, dtype=np.float32)
    n = float(np.linalg.norm(x))
    return x / n if n > 0 else x


def unit_rows(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


def delta(x: float) -> float:
    """δ(x) = (2/π)·cos(π/2 · x), clipped to x in [0, 1] (so δ(1) = 0, δ(0) = 2/π)."""
    x = min(max(float(x), 0.0), 1.0)
    return (2.0 / math.pi) * math.cos(math.pi / 2.0 * x)


def enhance(v: np.ndarray, q_hat: np.ndarray) -> np.ndarray:
    """Effective edge: v ← v + δ(‖v‖)·q̂. The norm never exceeds 1."""
    v = np.asarray(v, dtype=np.float32)
    out = v + delta(float(np.linalg.norm(v))) * np.asarray(q_hat, dtype=np.float32)
    n = float(np.linalg.norm(out))
    return out / n if n > 1.0 else out  # float rounding only; the math keeps ‖v‖ ≤ 1


def penalise(v: np.ndarray, q_hat: np.ndarray) -> np.ndarray:
    """Ineffective edge: with s = v·q̂ > 0, v ← v − δ(s)·s·q̂; otherwise unchanged.

    Since 0 < δ(s) ≤ 2/π < 1 the component along q̂ shrinks but never flips sign.
    """
    v = np.asarray(v, dtype=np.float32)
    q_hat = np.asarray(q_hat, dtype=np.float32)
    s = float(v @ q_hat)
    if s <= 0.0:
        return v
    return v - np.float32(delta(s) * s) * q_hat


def replay_scores(
    q_hat: np.ndarray,
    from_emb: np.ndarray,
    to_embs: np.ndarray,
    memories: np.ndarray,
    alpha: float,
) -> np.ndarray:
    """score = α·cos(e_u, e_w) + (1 − α)·(q̂ · v_uw) for each candidate row."""
    if len(to_embs) == 0:
        return np.zeros(0, dtype=np.float32)
    cos = unit_rows(to_embs) @ unit(from_emb)
    mem = np.asarray(memories, dtype=np.float32) @ np.asarray(q_hat, dtype=np.float32)
    return (alpha * cos + (1.0 - alpha) * mem).astype(np.float32)


def apply_updates(
    vectors: dict[str, np.ndarray],
    enhance_ids: Sequence[str],
    penalise_ids: Sequence[str],
    q_hat: np.ndarray,
    dim: int,
) -> dict[str, np.ndarray]:
    """New vectors for the named edges (``vectors`` holds the current ones; missing = 0)."""
    out: dict[str, np.ndarray] = {}
    zero = np.zeros(dim, dtype=np.float32)
    for eid in enhance_ids:
        out[eid] = enhance(vectors.get(eid, zero), q_hat)
    for eid in penalise_ids:
        if eid not in out:
            out[eid] = penalise(vectors.get(eid, zero), q_hat)
    return out


def merge(current: np.ndarray | None, moved: np.ndarray) -> np.ndarray:
    """An edge's memory after another edge's memory ``moved`` into it (a document update):
    their sum, scaled back to norm 1 if it is longer (memory's norm never exceeds 1)."""
    out = np.asarray(moved, dtype=np.float32) + (0 if current is None else current)
    n = float(np.linalg.norm(out))
    return (out / n if n > 1.0 else out).astype(np.float32)


def replay_bound(alpha: float, lam: float) -> float:
    """The least ``q̂ · v`` with which an edge can pass replay: since cos(e_u, e_w) ≤ 1, the
    score can exceed λ only if α + (1 − α)·(q̂ · v) > λ. Edges below it are skipped before
    any node embedding is read. (Kept next to :func:`replay_scores`: change one, change
    both.)"""
    if alpha >= 1.0:
        return math.inf
    return (lam - alpha) / (1.0 - alpha)


def memory_evidence(alignment: np.ndarray, alpha: float, lam: float) -> np.ndarray:
    """How strongly memory vouches for each chunk: ``q̂ · v`` of the contains edge that leads
    to it, where that edge passes replay (see :func:`replay_bound`), else 0."""
    a = np.asarray(alignment, dtype=np.float32)
    return np.where(a > replay_bound(alpha, lam), a, 0.0).astype(np.float32)


def rank_scores(cosines: np.ndarray, evidence: np.ndarray, weight: float) -> np.ndarray:
    """The final ranking score of retrieved chunks: cosine to the query plus ``weight`` times
    the memory evidence. With weight ≥ 1 a vouched chunk (evidence > 0.5 at the default α, λ)
    outranks every unvouched one whose cosine is not higher by that margin."""
    return (np.asarray(cosines, np.float32) + weight * np.asarray(evidence, np.float32)).astype(
        np.float32
    )


class MemoryUpdate:
    """One memory write as a function over the current vectors: ``fn(current) -> new``, with
    ``current`` the ``[n, dim]`` rows of :attr:`edge_ids` (zeros for untouched edges). A store
    applies it atomically (:meth:`GraphStore.update_memory`), so the math stays here and no
    concurrent write is lost. An edge both enhanced and penalised is enhanced."""

    def __init__(self, enhance_ids: Sequence[str], penalise_ids: Sequence[str], q_hat: np.ndarray):
        self.q_hat = unit(q_hat)
        self.ops: dict[str, str] = {e: "p" for e in penalise_ids}
        self.ops.update({e: "e" for e in enhance_ids})
        self.edge_ids: list[str] = sorted(self.ops)

    @property
    def enhanced(self) -> int:
        return sum(1 for op in self.ops.values() if op == "e")

    @property
    def penalised(self) -> int:
        return len(self.ops) - self.enhanced

    def __call__(self, current: np.ndarray) -> np.ndarray:
        out = np.array(current, dtype=np.float32, copy=True)
        for i, eid in enumerate(self.edge_ids):
            step = enhance if self.ops[eid] == "e" else penalise
            out[i] = step(out[i], self.q_hat)
        return out


def memory_update(
    enhance_ids: Sequence[str], penalise_ids: Sequence[str], query: np.ndarray
) -> MemoryUpdate:
    """The function of one docs/method.md §3 write: enhance ``enhance_ids`` and penalise the others
    along the unit ``query``. Pass it with its ``edge_ids`` to ``store.update_memory``."""
    return MemoryUpdate(enhance_ids, penalise_ids, query)


def memory_vector(edge_id: str, vector: object, dim: int | None) -> np.ndarray:
    """One memory vector given from outside (an import, an undo): numbers, finite, of the
    store's dimension, norm at most 1 (the memory math never leaves the unit ball)."""
    try:
        arr = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EmbeddingError(f"memory vector of {edge_id} is not a list of numbers") from exc
    if arr.shape != (dim,):
        raise EmbeddingError(f"memory vector of {edge_id} has shape {arr.shape}, want ({dim},)")
    if not np.all(np.isfinite(arr)):
        raise EmbeddingError(
            f"memory vector of {edge_id} holds NaN or infinity: the file is damaged; export "
            "the memory again, or leave this edge out"
        )
    if float(np.linalg.norm(arr.astype(np.float64))) > 1.0 + 1e-3:
        raise EmbeddingError(f"memory vector of {edge_id} has norm > 1")
    return arr
