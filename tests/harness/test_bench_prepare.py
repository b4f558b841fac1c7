"""``python -m benchmarks.harness prepare``: HotpotQA, MuSiQue and 2WikiMultihopQA files in their original
formats (small synthetic samples in tests/data/raw) become benchmark sets that ``bench run``
reads with ``--data``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DATA, load_jsonl

from benchmarks.harness.cli import main as bench_main
from benchmarks.harness.data import load_dataset
from benchmarks.harness.prepare import PrepareError, detect, pid_of, prepare

RAW = DATA / "raw"


@pytest.mark.parametrize(
    ("file", "fmt", "questions", "passages"),
    [
        ("hotpot_dev_distractor_sample.json", "hotpotqa", 2, 4),
        ("musique_ans_dev_sample.jsonl", "musique", 2, 4),
        ("2wiki_dev_sample.json", "2wiki", 2, 3),
    ],
)
def test_prepare_each_format(tmp_path: Path, file: str, fmt: str, questions: int, passages: int):
    assert detect(RAW / file) == fmt
    qpath, cpath, nq, nc = prepare(RAW / file, tmp_path, "set")
    assert (nq, nc) == (questions, passages)  # shared passages are one row; unanswerable out
    ds = load_dataset("set", tmp_path)
    for q in ds.questions:
        assert q["gold_pids"] and set(q["gold_pids"]) <= set(q["context_pids"]) <= set(ds.corpus)
        assert q["answers"] and q["dataset"] == fmt
    first = ds.questions[0]
    row = ds.corpus[first["gold_pids"][0]]
    assert row["pid"] == pid_of(row["title"], row["text"])


def test_prepared_fields_follow_the_source() -> None:
    hot = load_jsonl_via_prepare("hotpot_dev_distractor_sample.json")
    assert hot[0]["gold_sentences"] == [
        "Ada Byron was born in London in 1815.",
        "The Thames flows through London.",
    ]
    assert hot[0]["type"] == "bridge" and hot[0]["extra"] == {"level": "easy"}
    mus = load_jsonl_via_prepare("musique_ans_dev_sample.jsonl")
    assert [q["qid"] for q in mus] == ["2hop__1_2", "3hop1__5_6_7"]
    assert mus[0]["answers"] == ["Paris", "Paris, France"] and mus[0]["type"] == "2hop"
    steps = mus[0]["extra"]["decomposition"]
    assert [s["gold_pid"] for s in steps] == mus[0]["gold_pids"]


def load_jsonl_via_prepare(file: str) -> list[dict]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        qpath, *_ = prepare(RAW / file, d, "x")
        return load_jsonl(qpath)


def test_bench_run_reads_what_prepare_wrote(tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    assert (
        bench_main(
            [
                "prepare",
                str(RAW / "hotpot_dev_distractor_sample.json"),
                "--out",
                str(data),
                "--name",
                "hp",
            ]
        )
        == 0
    )
    out = tmp_path / "run.json"
    code = bench_main(
        [
            "run",
            "--data",
            str(data),
            "--set",
            "hp",
            "--embedder",
            "hash",
            "--embed-cache",
            "",
            "--methods",
            "bm25,remindrag",
            "--k",
            "2",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert "bm25" in json.dumps(result) and "remindrag" in json.dumps(result)


def test_bad_inputs_are_one_clear_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.json").write_text('[{"question": "q"}]')
    with pytest.raises(PrepareError, match="not hotpotqa format"):
        prepare(tmp_path / "bad.json", tmp_path, "x")
    (tmp_path / "text.txt").write_text("hello")
    assert (
        bench_main(["prepare", str(tmp_path / "text.txt"), "--out", str(tmp_path), "--name", "x"])
        == 2
    )
    assert "not a HotpotQA" in capsys.readouterr().err
