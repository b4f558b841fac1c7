"""`python -m benchmarks.harness real` end to end with a scripted LLM: the result file, the per-question
JSONL a long run appends, and the reply fixture it records, which replays exactly."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.harness.cli import main
from benchmarks.harness.data import load_dataset
from benchmarks.harness.real import run_real
from benchmarks.harness.real_report import from_jsonl, to_markdown
from benchmarks.harness.resources import make_embedder
from remindrag_integrations.testing import RecordedLLM

DATA = Path(__file__).resolve().parents[1] / "data"


def test_real_protocol_writes_results_records_and_a_replayable_fixture(tmp_path, capsys) -> None:
    out, rec, jl = tmp_path / "r.json", tmp_path / "replies.json", tmp_path / "r.jsonl"
    args = ["real", "--data", str(DATA), "--set", "hotpotqa_train100_sample", "--llm", "oracle"]
    args += ["--embedder", "hash", "--embed-cache", "", "--limit", "2", "--k", "5"]
    assert main([*args, "--out", str(out), "--record", str(rec), "--jsonl", str(jl)]) == 0
    res = json.loads(out.read_text())
    s = res["summary"]
    assert s["questions"] == 2 and not res["failed"]
    assert set(s) >= {"bm25", "dense", "zero_token", "llm_first", "llm_same_after"}
    assert s["llm_first"]["n"] == 2 and s["llm_first"]["ended_by_unusable_reply"] == 0
    assert "| first pass |" in capsys.readouterr().out
    assert from_jsonl(jl)["summary"]["questions"] == 2
    assert "LLM-navigated" in to_markdown(from_jsonl(jl))
    # the recorded replies replay the same run, prompt for prompt
    replay = RecordedLLM(rec)
    ds = load_dataset("hotpotqa_train100_sample", DATA).head(2)
    again, _ = run_real(ds, replay, make_embedder("hash"), k=5)
    assert not replay.missing
    assert again["summary"]["llm_first"] == s["llm_first"] | {
        k: again["summary"]["llm_first"][k] for k in ("seconds", "traversal_seconds")
    }
