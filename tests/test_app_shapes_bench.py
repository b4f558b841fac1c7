"""``benchmarks/app_shapes.py`` runs end to end on the sample data with the hash embedder
(seconds), and its parts measure what they say: an edit supersedes the old pieces' text and changes
piece counts, the noisy reader's shares are exact, the abstain option is found whichever way the
library documents it."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter
from pydantic import BaseModel, Field

from remindrag_integrations.core.config import RetrievalConfig

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("app_shapes", ROOT / "benchmarks/app_shapes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["app_shapes"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


app = _load()
TINY = [
    "--data",
    str(DATA),
    "--sets",
    "hotpotqa_train100_sample:musique_train100_sample",
    "--n",
    "4",
    "--passages",
    "24",
    "--embedder",
    "hash",
]


def test_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "app_shapes.json"
    assert app.main([*TINY, "--label", "smoke", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert result["kind"] == "app_shapes" and result["label"] == "smoke"
    assert [r["splitter"] for r in result["runs"]] == ["langchain", "llamaindex"]
    assert "| hotpotqa_train100_sample | llamaindex | noisy |" in printed
    off_per_round = result["options"]["off_per_round"]
    for run in result["runs"]:
        assert run["documents"] == 24 and run["pieces"] > run["documents"]
        assert run["multi_piece_share"] >= 0.5  # the chunk sizes split most passages
        assert all(n >= 1 for n in run["piece_count_changes_per_round"])  # each round
        traffic = 4 + off_per_round
        for reader, r in run["readers"].items():
            calls = r["memorize_calls"]
            assert sum(calls.values()) == 3 * traffic  # every answer memorized, 3 rounds
            assert calls["off_corpus"] == 3 * off_per_round
            if reader == "correct":
                assert set(calls) == {"cite", "off_corpus"}
            else:
                assert {"cite", "abstain", "other"} <= set(calls)
            assert len(r["stale_per_round"]) == 3
            for name, v in r["after"].items():
                assert v["n"] == run["before"][name]["n"]
                assert v["recall@5"] is None or 0.0 <= v["recall@5"] <= 1.0
            for cause, n in r["memory_writes"].items():
                assert 0 <= n <= calls[cause]
    raw = json.loads((tmp_path / result["records_file"]).read_text())
    events = raw["runs"][0]["readers"]["noisy"]["records"]
    assert len(events) == 3 * (4 + off_per_round)
    assert {e["cause"] for e in events} >= {"abstain", "off_corpus"}
    s = result["summary"]
    assert s["writes_off_corpus"] <= 2 * 2 * 3 * off_per_round
    assert ("min_score" in RetrievalConfig.model_fields) or s["min_score"] is None
    # issue 46's shapes: hedges, cited off-topic answers and failed agent turns write nothing
    shapes = s["turn_shapes"]
    assert shapes["agent_turns"] == 2 * 2 and shapes["writes_answered_agent_turn"] > 0
    assert shapes["writes_hedge"] == shapes["writes_cited_off_topic"] == 0
    assert shapes["writes_failed_agent_turn"] == 0
    for run in result["runs"]:
        assert run["turn_shapes"]["hedge"]["calls"] == 4
        assert run["turn_shapes"]["cited_off_topic"]["calls"] >= 3 * off_per_round


def test_an_edit_supersedes_the_old_pieces_and_changes_piece_counts() -> None:
    splitter = RecursiveCharacterTextSplitter(chunk_size=120, chunk_overlap=0)
    text = (
        "Lake Bled\nLake Bled is a lake in the Julian Alps. It lies in Slovenia. An island "
        "stands in its middle. A church was built on the island. Tourists row to it in boats."
    )
    versions = app.Versions({"bled": text})
    old = splitter.split_text(text)
    rng = random.Random(0)
    changed = app.edit_text(text, 1, "change", rng, 200)
    versions.update("bled", changed)
    assert any(versions.stale("bled", piece) for piece in old)
    assert not any(versions.stale("bled", piece) for piece in splitter.split_text(changed))
    assert not versions.stale("other", old[0])  # a document never edited has no old text
    grown = app.edit_text(changed, 2, "grow", rng, 200)
    assert len(splitter.split_text(grown)) > len(splitter.split_text(changed))
    cut = app.edit_text(grown, 3, "shrink", rng, 200)
    versions.update("bled", grown)
    versions.update("bled", cut)
    assert len(splitter.split_text(cut)) < len(splitter.split_text(grown))
    assert any(versions.stale("bled", piece) for piece in splitter.split_text(grown))


def test_the_noisy_reader_keeps_exact_shares() -> None:
    items = [{"qid": str(i)} for i in range(50)]
    kinds = app.kinds_for(items, "noisy", random.Random(1))
    assert (kinds.count("cite"), kinds.count("abstain"), kinds.count("other")) == (30, 10, 10)
    assert app.kinds_for(items, "correct", random.Random(1)) == ["cite"] * 50
    cited = app.cited_answer(
        {"answers": ["Slovenia"], "gold_pids": ["bled"]},
        [
            app.Passage("c-12ab", "x", "bled", 0.9, "t"),
            app.Passage("c-34cd", "y", "nile", 0.8, "t"),
        ],
    )
    assert cited == "Slovenia [c-12ab]"


def test_the_abstain_option_is_found_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    class Documented(BaseModel):
        min_score: float | None = Field(None, description="Off by default; recommended 0.35.")

    class Defaulted(BaseModel):
        min_score: float | None = 0.4

    class Noted(BaseModel):
        min_score: float | None = Field(None, description="None = off (0.45 recommended).")

    class Undocumented(BaseModel):
        min_score: float | None = None

    class Absent(BaseModel):
        k: int = 5

    cases = ((Documented, 0.35), (Noted, 0.45), (Defaulted, 0.4), (Undocumented, None))
    for config, value in cases:
        monkeypatch.setattr(app, "RetrievalConfig", config)
        assert app.min_score_setting(None)[:2] == (True, value)
        assert app.min_score_setting(0.25)[:2] == (True, 0.25)
    monkeypatch.setattr(app, "RetrievalConfig", Absent)
    assert app.min_score_setting(0.25)[:2] == (False, None)


@pytest.mark.skipif(
    "min_score" not in RetrievalConfig.model_fields, reason="the library has no min_score yet"
)
def test_the_abstain_probe_runs(tmp_path: Path) -> None:
    out = tmp_path / "app_shapes.json"
    args = [*TINY, "--splitters", "langchain", "--min-score", "0.3", "--out", str(out)]
    assert app.main(args) == 0
    probe = json.loads(out.read_text())["runs"][0]["min_score"]
    assert probe["value"] == pytest.approx(0.3) and probe["off_corpus_questions"] >= 1
    assert 0.0 <= probe["off_corpus_empty_share"] <= 1.0
