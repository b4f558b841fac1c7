"""docs/method.md §2.3 / §3 memory math, with property tests."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from remindrag_integrations.core.memory import math as mem

DIM = 8
finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=32)
vectors = arrays(np.float32, DIM, elements=finite)


def unit_query(x: np.ndarray) -> np.ndarray:
    q = mem.unit(x)
    return q if np.any(q) else np.eye(DIM, dtype=np.float32)[0]


def small(v: np.ndarray) -> np.ndarray:
    """A memory vector as it can exist: norm at most 1."""
    n = float(np.linalg.norm(v))
    return v / n if n > 1 else v


def test_delta_endpoints() -> None:
    assert mem.delta(0.0) == 2 / math.pi
    assert abs(mem.delta(1.0)) < 1e-12
    assert mem.delta(5.0) == mem.delta(1.0)  # clipped


def test_one_enhance_from_zero_gives_norm_two_over_pi() -> None:
    q = unit_query(np.arange(1, DIM + 1, dtype=np.float32))
    v = mem.enhance(np.zeros(DIM, np.float32), q)
    assert np.isclose(np.linalg.norm(v), 2 / math.pi, atol=1e-6)
    assert np.allclose(v, (2 / math.pi) * q, atol=1e-6)


@settings(max_examples=300, deadline=None)
@given(vectors, st.lists(vectors, min_size=1, max_size=20))
def test_norm_never_exceeds_one(v0: np.ndarray, queries: list[np.ndarray]) -> None:
    v = small(v0)
    for q in queries:
        v = mem.enhance(v, unit_query(q))
        assert np.linalg.norm(v) <= 1.0 + 1e-5
        v = mem.penalise(v, unit_query(q[::-1]))
        assert np.linalg.norm(v) <= 1.0 + 1e-5


@settings(max_examples=300, deadline=None)
@given(vectors, vectors)
def test_penalise_never_increases_alignment_nor_flips_it(v0: np.ndarray, q0: np.ndarray) -> None:
    v, q = small(v0), unit_query(q0)
    before = float(v @ q)
    after = float(mem.penalise(v, q) @ q)
    assert after <= before + 1e-6
    if before > 0:
        assert after >= -1e-6  # shrinks toward 0, never past it
        assert after < before or before < 1e-6 or before > 1 - 1e-6  # δ(1) = 0: saturated
    else:
        assert np.allclose(mem.penalise(v, q), v)


def test_penalise_actually_changes_an_aligned_vector() -> None:
    # the authors' code broadcast a scalar and never changed anything: ours must
    q = unit_query(np.ones(DIM, np.float32))
    v = mem.enhance(np.zeros(DIM, np.float32), q)
    p = mem.penalise(v, q)
    s = float(v @ q)
    assert np.allclose(p, v - mem.delta(s) * s * q, atol=1e-6)
    assert float(p @ q) < s


@settings(max_examples=200, deadline=None)
@given(vectors, vectors, vectors, st.floats(0, 1))
def test_zero_memory_replays_nothing(q0, u0, w0, alpha) -> None:
    q = unit_query(q0)
    scores = mem.replay_scores(q, u0, np.stack([w0, u0]), np.zeros((2, DIM), np.float32), alpha)
    # with v = 0 the score is α·cos ≤ α, below the default λ = 0.55 for the default α = 0.1
    assert np.all(scores <= alpha + 1e-5)
    default = mem.replay_scores(q, u0, np.stack([w0]), np.zeros((1, DIM), np.float32), 0.1)
    assert np.all(default <= 0.55)


def test_one_enhance_lets_the_same_query_replay() -> None:
    q = unit_query(np.arange(DIM, dtype=np.float32))
    v = mem.enhance(np.zeros(DIM, np.float32), q)
    e = np.ones(DIM, np.float32)
    score = mem.replay_scores(q, e, e[None, :], v[None, :], 0.1)[0]
    assert np.isclose(score, 0.1 * 1.0 + 0.9 * 2 / math.pi, atol=1e-5)
    assert score > 0.55


def test_apply_updates_prefers_enhance_when_an_edge_is_named_twice() -> None:
    q = unit_query(np.ones(DIM, np.float32))
    out = mem.apply_updates({}, ["a"], ["a", "b"], q, DIM)
    assert np.isclose(np.linalg.norm(out["a"]), 2 / math.pi, atol=1e-6)
    assert not np.any(out["b"])  # penalising a zero vector leaves it zero


@settings(max_examples=100, deadline=None)
@given(vectors, st.integers(1, 30))
def test_repeated_enhance_saturates_monotonically(q0: np.ndarray, n: int) -> None:
    q = unit_query(q0)
    v = np.zeros(DIM, np.float32)
    norms = []
    for _ in range(n):
        v = mem.enhance(v, q)
        norms.append(float(np.linalg.norm(v)))
    assert all(b >= a - 1e-6 for a, b in zip(norms, norms[1:]))
    assert norms[-1] <= 1.0 + 1e-6
