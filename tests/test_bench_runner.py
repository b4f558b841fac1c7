"""A tiny benchmark run on tests/data with the hash embedder (offline, a few seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from remindrag_integrations.bench.cli import main
from remindrag_integrations.bench.data import Dataset, load_dataset
from remindrag_integrations.bench.resources import make_embedder
from remindrag_integrations.bench.runner import Bench, run_learning_curve, run_retrieval
from remindrag_integrations.bench.scale import measure_point

DATA = Path(__file__).parent / "data"
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
    from remindrag_integrations.bench.resources import CachedEmbedder

    first = _CountingEmbedder()
    cache = CachedEmbedder(first, tmp_path / "e.npz")
    v = cache.embed(["a", "bb", "a"])
    assert first.texts == ["a", "bb"] and v.shape == (3, 2)
    cache.persist()
    second = _CountingEmbedder()
    again = CachedEmbedder(second, tmp_path / "e.npz")
    assert (again.embed(["bb", "ccc"]) == [[2.0, 1.0], [3.0, 1.0]]).all()
    assert second.texts == ["ccc"]  # "bb" came from disk
