"""The harness's memory protocols (``python -m benchmarks.harness sequence``,
``benchmarks/memory_trust.py``) on the sample sets in tests/data: the sub-questions they ask and
the trust protocol's teach / edit rounds. Hash embedder, offline, seconds."""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.data import Dataset, load_dataset
from benchmarks.harness.memory_bench import subquestions
from benchmarks.harness.resources import make_embedder
from benchmarks.harness.trust import run_trust

DATA = Path(__file__).resolve().parents[1] / "data"


def test_musique_subquestions_are_self_contained() -> None:
    q = {
        "qid": "q1",
        "question": "Who founded the company that made X?",
        "gold_pids": ["a", "b"],
        "extra": {
            "decomposition": [
                {"question": "Who made X?", "answer": "Acme", "gold_pid": "a"},
                {"question": "Who founded #1 ?", "answer": "Jo", "gold_pid": "b"},
            ]
        },
    }
    ds = Dataset("s", [q], {"a": {"pid": "a", "text": ""}, "b": {"pid": "b", "text": ""}})
    subs = subquestions(ds, 5)
    assert [s["question"] for s in subs] == ["Who made X?", "Who founded Acme ?"]
    assert [s["gold_pids"] for s in subs] == [["a"], ["b"]]
    assert [s["qid"] for s in subs] == ["q1/sub1", "q1/sub2"]


def test_on_real_passages_taught_comes_back_and_survives_edits() -> None:
    """The benchmark protocol on the HotpotQA sample: teach half, ask again, edit every
    taught document (one sentence appended, same id)."""
    ds = load_dataset("hotpotqa_train100_sample", DATA)
    out = run_trust(ds, make_embedder("hash"), n=12)
    assert out["teach"]["taught"] == out["teach"]["pairs"] == 6
    assert out["after_teach"]["taught"]["recall@5"] == 1.0
    assert out["after_teach"]["untaught"]["recall@5"] == out["before"]["untaught"]["recall@5"]
    assert out["after_teach"]["untaught"]["replay_share"] == 0.0
    edit = out["edit"]
    assert edit["remembered_edges_after"] >= 0.8 * edit["remembered_edges_before"] > 0
    assert edit["memory_stats"]["moved"] > 0 and edit["memory_stats"]["dropped"] == 0
    assert out["after_edit"]["taught"]["recall@5"] == 1.0
