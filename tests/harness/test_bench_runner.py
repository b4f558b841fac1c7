"""A tiny benchmark run on tests/data with the hash embedder (offline, a few seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness.cli import main
from benchmarks.harness.data import Dataset, load_dataset
from benchmarks.harness.resources import make_embedder
from benchmarks.harness.runner import Bench, run_learning_curve, run_retrieval
from benchmarks.harness.scale import measure_point

DATA = Path(__file__).resolve().parents[1] / "data"
METHODS = ["bm25", "dense", "ppr", "remindrag"]


@pytest.fixture()
def hotpot_ds(hotpot: tuple[list[dict], dict[str, dict]]) -> Dataset:
    qs, rows = hotpot
    return Dataset("hotpotqa_train100_sample", qs[:6], rows)


def test_per_question_run_scores_every_method(hotpot_ds: Dataset) -> None:
    res = run_retrieval(hotpot_ds, "per-question", METHODS, "none", make_embedder("hash"))
    assert len(res["records"]) == 6 * len(METHODS)
    for m in ("bm25", "dense"):
        # ten passages per question and k = 10: every passage comes back, recall@10 is 1
        assert res["summary"][m]["recall@10"] == 1.0
    for m in METHODS:
        s = res["summary"][m]
        assert 0.0 <= s["recall@2"] <= s["recall@5"] <= s["recall@10"] <= 1.0
        lo, hi = s["recall@5_ci"]
        assert lo <= s["recall@5"] <= hi
    ours = res["summary"]["remindrag"]
    assert ours["calls_per_query"] == 0  # zero-token mode spends no tokens
    assert set(ours["latency_ms"]) >= {"seed_search", "replay", "bookkeeping"}
    assert res["indexing"]["graphs"] == 6
    assert set(res["paired"]) == {"remindrag-bm25", "remindrag-dense", "remindrag-ppr"}
    for m in METHODS:  # CPU time beside the wall clock, which a loaded machine stretches
        cpu = res["summary"][m]["latency_ms"]["cpu"]
        assert 0.0 <= cpu["p50"] <= cpu["p95"]
    from benchmarks.harness.report import to_markdown

    assert to_markdown(res).count(" (CPU ") == len(METHODS)


def test_a_baseline_is_timed_without_building_its_index(
    hotpot_ds: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per question every question builds its own BM25 index: the build is not the query's
    latency (it was, and per-question baselines looked 10-50x slower than pooled ones)."""
    import time

    from benchmarks.harness import runner

    class SlowToBuild(runner.BM25Baseline):
        def __init__(self, chunks: list) -> None:
            time.sleep(0.25)
            super().__init__(chunks)

    monkeypatch.setattr(runner, "BM25Baseline", SlowToBuild)
    res = run_retrieval(hotpot_ds, "per-question", ["bm25"], "none", make_embedder("hash"))
    assert res["summary"]["bm25"]["latency_ms"]["non_llm_total"]["p95"] < 200.0
    for rec in res["records"]:  # what each baseline returned, by chunk id
        assert 0 < len(rec["retrieved"]) <= res["k"]


def test_gold_chunks_follow_the_text_rule(hotpot_ds: Dataset) -> None:
    bench = Bench(hotpot_ds, "pooled", "none", make_embedder("hash"))
    for q in hotpot_ds.questions:
        gold = bench.gold_chunk_ids(q)
        kb = bench.kbs[q["qid"]]
        docs = {c.id: c.doc_id for c in kb.chunks}
        # passages are one chunk each: the text rule finds exactly the gold passages' chunks
        assert sorted(docs[c] for c in gold) == sorted(q["gold_pids"])


def test_oracle_run_measures_prompts(hotpot_ds: Dataset) -> None:
    res = run_retrieval(hotpot_ds, "pooled", ["bm25", "remindrag"], "oracle", make_embedder("hash"))
    ours = res["summary"]["remindrag"]
    assert ours["calls"]["traversal"] > 0
    assert ours["prompt_tokens"]["traversal"] > ours["completion_tokens"]["traversal"] > 0
    assert res["indexing"]["tokens_per_source_token"] > 1.0  # the extraction prompts
    # the oracle only moves to neighbours the prompt lists: no rejected moves
    ours_recs = [r for r in res["records"] if r["method"] == "remindrag"]
    assert all(r["stop_reason"] != "invalid_llm_output" for r in ours_recs)


def test_learning_curve_gets_cheaper_with_memory() -> None:
    ds = load_dataset("musique_train100_sample", DATA)
    res = run_learning_curve(
        ds,
        "pooled",
        "oracle",
        make_embedder("hash"),
        turns=2,
        feedback="gold",
        alternating_rounds=2,
    )
    same = [p["summary"] for p in res["phases"] if p["phase"].startswith("same")]
    assert len(same) == 3
    assert same[0]["replay_only"] == 0.0  # a fresh memory replays nothing
    assert same[1]["replay_only"] > 0.0
    assert same[1]["traversal_tokens_per_query"] < same[0]["traversal_tokens_per_query"]
    assert res["phases"][-1]["touched_edges"] > 0
    alternating = [p["phase"] for p in res["alternating"]]
    assert alternating == ["round 0 origin", "round 1 different"]
    assert any(p["phase"].startswith("different_") for p in res["phases"])


def test_cli_writes_json_and_prints_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    rc = main(
        [
            "run",
            "--data",
            str(DATA),
            "--set",
            "musique_train100_sample",
            "--limit",
            "3",
            "--embedder",
            "hash",
            "--setting",
            "per-question",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["questions"] == 3 and res["kind"] == "retrieval"
    table = capsys.readouterr().out
    assert "| remindrag |" in table and "| bm25 |" in table


def test_scale_point_is_measured() -> None:
    p = measure_point(2000, queries=5, dim=32, save=True)
    assert 1500 <= p["edges"] <= 2500
    assert p["touched_edges"] > 0 and p["disk_mb"] > 0
    assert p["seed_search_ms"]["p50"] <= p["seed_search_ms"]["p95"]


class _CountingEmbedder:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += list(texts)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_embedding_cache_persists_between_runs(tmp_path: Path) -> None:
    from benchmarks.harness.resources import CachedEmbedder

    first = _CountingEmbedder()
    cache = CachedEmbedder(first, tmp_path / "e.npz")
    v = cache.embed(["a", "bb", "a"])
    assert first.texts == ["a", "bb"] and v.shape == (3, 2)
    cache.persist()
    second = _CountingEmbedder()
    again = CachedEmbedder(second, tmp_path / "e.npz")
    assert (again.embed(["bb", "ccc"]) == [[2.0, 1.0], [3.0, 1.0]]).all()
    assert second.texts == ["ccc"]  # "bb" came from disk


def _moments(path: Path, dim: int) -> str:
    """Moments of a made-up distribution: entities around one direction, passages around
    another, each with a low-rank spread."""
    rng = np.random.default_rng(3)
    out = {}
    for label, axis in (("entity", 0), ("passage", 1)):
        mean = np.zeros(dim)
        mean[axis] = 1.0
        spread = rng.standard_normal((dim, 4)) * 0.05
        out[f"{label}_mean"], out[f"{label}_cov"] = mean, spread @ spread.T
        out[f"{label}_n"] = np.asarray(1000)
    np.savez(path, **out)
    return str(path)


def test_synthetic_embeddings_follow_the_fitted_moments(tmp_path: Path) -> None:
    from benchmarks.harness.scale_vectors import synthetic_embeddings

    m = _moments(tmp_path / "m.npz", 16)
    emb = synthetic_embeddings(300, 16, 0, m, n_entities=200)
    assert emb.shape == (300, 16)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
    assert emb[:200, 0].mean() > 0.6 and abs(emb[:200, 1].mean()) < 0.2  # entities: axis 0
    assert emb[200:, 1].mean() > 0.6 and abs(emb[200:, 0].mean()) < 0.2  # passages: axis 1
    np.testing.assert_array_equal(emb, synthetic_embeddings(300, 16, 0, m, n_entities=200))
    with pytest.raises(ValueError, match="16-dimensional"):
        synthetic_embeddings(10, 32, 0, m, n_entities=5)


def test_scale_point_with_fitted_embeddings_scores_its_own_seeds(tmp_path: Path) -> None:
    p = measure_point(2000, queries=5, dim=16, save=False, moments=_moments(tmp_path / "m.npz", 16))
    assert p["embeddings"] == "minilm" and p["seed_recall"] == 1.0  # exact scan at this size


def test_fitting_moments_on_too_few_passages_is_a_clear_error(tmp_path: Path) -> None:
    from benchmarks.harness.scale_vectors import minilm_moments

    corpus = DATA / "hotpotqa_train100_sample.corpus.jsonl"
    with pytest.raises(ValueError, match="cannot fit a covariance"):
        minilm_moments(corpus, tmp_path)
    assert not list(tmp_path.iterdir())  # nothing half-written
