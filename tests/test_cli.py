"""The ``remindrag`` command line end to end: real subprocesses, temporary stores, the packaged
embedder, zero-token mode."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, load_jsonl, run_cli

COMMANDS = ["index", "ask", "inspect", "memory", "trace", "mcp", "serve", "demo"]


run = run_cli  # `remindrag ARGS` in a subprocess


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_command_has_help(command, tmp_path):
    out = run(*([command] if command else []), "--help", cwd=tmp_path).stdout
    assert out.startswith("usage: remindrag")
    if command in ("index", "ask", "inspect", "memory", "trace", "mcp", "serve"):
        assert "--store" in out


def test_the_benchmarks_are_not_a_command_of_the_library(tmp_path):
    """The harness is ``python -m benchmarks.harness`` in a checkout, not part of the package."""
    proc = run("bench", "run", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "invalid choice: 'bench'" in proc.stderr


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The first HotpotQA question's 10 passages, as a .jsonl, a .txt and a .md file."""
    root = tmp_path_factory.mktemp("corpus")
    (q, *_) = load_jsonl(DATA / "hotpotqa_train100_sample.questions.jsonl")
    rows = {r["pid"]: r for r in load_jsonl(DATA / "hotpotqa_train100_sample.corpus.jsonl")}
    pids = q["context_pids"]
    docs = root / "docs"
    docs.mkdir()
    with open(docs / "passages.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(rows[pid]) + "\n" for pid in pids[:8])
    (docs / "alu.txt").write_text(f"{rows[pids[9]]['title']}\n{rows[pids[9]]['text']}")
    (docs / "lilu.md").write_text(f"# {rows[pids[5]]['title']}\n\n{rows[pids[5]]['text']}")
    (docs / "ignored.bin").write_bytes(b"\x00\x01")  # a type no reader handles: reported
    return root


def ask(question: str, store: Path, cwd: Path, *extra: str) -> dict:
    return json.loads(run("ask", question, "--store", str(store), "--json", *extra, cwd=cwd).stdout)


def test_index_ask_inspect_trace(corpus, tmp_path):
    store = tmp_path / "store"
    out = run("index", str(corpus / "docs"), "--store", str(store), cwd=tmp_path).stdout
    assert "to index: 10 documents (0 unchanged), 10 chunks" in out
    assert "docs/ignored.bin: cannot read .bin" in out  # named, not dropped in silence
    assert "estimated cost: 0 LLM calls" in out and "actual cost: 0 LLM calls" in out

    # a question that is mostly names seeds at an entity node, so the path it memorizes has an
    # edge to replay (when the two most similar passages are themselves the seeds, memory ends
    # the walk at once with no edge to replay)
    question = "Lilu and Gallu spirits?"
    first = ask(question, store, tmp_path)
    docs = {p["doc"] for p in first["passages"]}
    assert "Lilu (mythology)#b7760026" in docs  # the jsonl passage (gold)
    assert any(d.endswith("alu.txt") for d in docs)  # Alû, the other gold passage, from .txt
    assert "spirit" in first["answer"] and first["citations"]
    assert first["memorized"] and first["llm_calls"] == 0 and first["decisions"] > 0

    # the answer's citation was the support: the cited passage now comes back through memory
    assert first["memory"]["supporting_chunks"] == first["citations"]
    again = ask(question, store, tmp_path, "--no-memorize")
    assert again["stop_reason"] == "replay" and again["decisions"] == 0
    cited = [p for p in again["passages"] if p["chunk"] in first["citations"]]
    assert cited and cited[0] == again["passages"][0]
    text = run("ask", question, "--store", str(store), "--no-memorize", cwd=tmp_path).stdout
    assert "answer:" in text and "passages:" in text and "seed" in text
    decisions = int(re.search(r"\((\d+) traversal decisions\)", text).group(1))
    assert decisions < first["decisions"]
    assert "memory:" not in text  # --no-memorize

    info = run("inspect", "--store", str(store), cwd=tmp_path).stdout
    assert "10 documents" in info and "10 chunks" in info
    listed = run("inspect", "--store", str(store), "--documents", cwd=tmp_path).stdout
    ids = listed.splitlines()  # one id a line, sorted: the ids delete takes
    assert len(ids) == 10 and ids == sorted(ids) and "Lilu (mythology)#b7760026" in ids
    touched = int(re.search(r"memory: (\d+) touched edges", info).group(1))
    assert touched > 0 and "strongest remembered edges" in info
    closed = subprocess.Popen(  # `remindrag inspect | head`: the reader is gone at once
        [sys.executable, "-m", "remindrag_integrations.app.cli", "inspect", "--store", str(store)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    closed.stdout.close()
    assert closed.wait(timeout=600) == 141 and b"Traceback" not in closed.stderr.read()

    view = tmp_path / "memory.html"
    out = run("memory", "view", "--store", str(store), "--html", str(view), cwd=tmp_path).stdout
    assert f"{touched:,} remembered edges, 1 queries" in out
    page = view.read_text(encoding="utf-8")
    assert set(re.findall(r'data-edge="([^"]+)" data-memory-norm', page)) >= set(
        first["memory"]["enhanced"]
    )
    assert question in page  # the past query that shaped it

    text = run("trace", first["trace_id"], "--store", str(store), cwd=tmp_path).stdout
    assert f"trace: {first['trace_id']}" in text and "memory: " in text
    assert re.search(r"^  seed ", text, re.MULTILINE) and re.search(r"^  forward ", text, re.M)

    html = tmp_path / "trace.html"
    run("trace", first["trace_id"], "--store", str(store), "--html", str(html), cwd=tmp_path)
    page = html.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # self-contained
    # the drawn elements are this trace's: every subgraph edge once, with its roles
    drawn = dict(re.findall(r'data-edge="([^"]+)" data-added="\w+" data-memory="(\w*)"', page))
    memorized = first["memory"]
    assert set(memorized["enhanced"]) and set(drawn) >= set(memorized["enhanced"])
    assert {e for e, m in drawn.items() if m == "enhanced"} == set(memorized["enhanced"])
    assert {e for e, m in drawn.items() if m == "penalised"} == set(memorized["penalised"])
    assert re.search(r'data-added="forward"', page)  # the navigator's moves
    assert set(re.findall(r'data-node="([^"]+)" data-seed="true"', page)) == set(first["seeds"])
    # the cited passages were seeds (memory ranks them, no edge to replay): teach a passage
    # that is not a seed, and the next ask reaches it along remembered edges
    far = next(p for p in first["passages"] if "a-" + p["chunk"][2:] not in first["seeds"])
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"question": question, "chunk_ids": [far["chunk"]]}) + "\n")
    out = run("memory", "teach", str(pairs), "--store", str(store), cwd=tmp_path).stdout
    assert "taught 1 of 1 pairs" in out
    third = ask(question, store, tmp_path, "--no-memorize")
    assert far["chunk"] in [p["chunk"] for p in third["passages"]] and third["replayed_edges"]
    html2 = tmp_path / "replay.html"
    run("trace", third["trace_id"], "--store", str(store), "--html", str(html2), cwd=tmp_path)
    page2 = html2.read_text(encoding="utf-8")
    replayed = re.findall(r'data-edge="([^"]+)" data-added="replay" data-memory=""', page2)
    assert replayed  # the ask replayed memory, drawn as such; it was not memorized
    assert 'data-memory="enhanced"' not in page2 and 'data-memory="penalised"' not in page2


def test_reindexing_skips_unchanged_documents(corpus, tmp_path):
    store = tmp_path / "store"
    docs = corpus / "docs" / "passages.jsonl"
    run("index", str(docs), "--store", str(store), cwd=tmp_path)
    out = run("index", str(docs), "--store", str(store), cwd=tmp_path).stdout
    assert "to index: 0 documents (8 unchanged)" in out


def test_errors_are_one_line_with_exit_status_2(tmp_path):
    (tmp_path / "doc.txt").write_text("Ed Wood directed Plan 9 from Outer Space.")
    missing = run("ask", "q", "--store", str(tmp_path / "none"), cwd=tmp_path, check=False)
    assert missing.returncode == 2 and "no store at" in missing.stderr
    bad = run(
        "index",
        str(tmp_path),
        "--store",
        str(tmp_path / "s"),
        "--llm",
        "nonsense",
        cwd=tmp_path,
        check=False,
    )
    assert bad.returncode == 2 and "expected 'none'" in bad.stderr
    gguf = run(
        "index",
        str(tmp_path),
        "--store",
        str(tmp_path / "s"),
        "--llm",
        "local:/no/such.gguf",
        cwd=tmp_path,
        check=False,
    )
    assert gguf.returncode == 2 and "no GGUF file" in gguf.stderr
    unknown = run(
        "trace",
        "feedbeef",
        "--store",
        str(tmp_path / "none"),
        "--html",
        "x.html",
        cwd=tmp_path,
        check=False,
    )
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr


@pytest.mark.slow
def test_readme_cli_example_runs_as_written(tmp_path):
    from doc_pages import blocks, section

    root = Path(__file__).parent.parent
    (script,) = [b.code for b in blocks(section("offline"), "bash")]
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=root,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "indexed 50 documents" in proc.stdout
    # the second ask is answered from memory: replayed edges, or (when the first-pass prior
    # already seeds the remembered passage) its vouched seed; either way no walk
    assert re.search(r"^  stop\s+replay$", proc.stdout, re.MULTILINE)
    assert "(0 traversal decisions)" in proc.stdout
    assert "strongest remembered edges" in proc.stdout
    (page,) = tmp_path.rglob("trace.html")
    assert "<svg" in page.read_text(encoding="utf-8")


@pytest.mark.slow
def test_demo_shows_memory_cutting_the_second_round(tmp_path):
    out = run("demo", "--quiet", "--questions", "2", cwd=tmp_path).stdout
    total = re.search(r"^total\s+(\d+)\s+(\d+)$", out, re.MULTILINE)
    assert total and int(total.group(2)) < int(total.group(1)), out
    assert "the memorized paths were replayed" in out


def test_memory_admin_commands(corpus, tmp_path):
    store = tmp_path / "store"
    run("index", str(corpus / "docs" / "passages.jsonl"), "--store", str(store), cwd=tmp_path)
    ask("Which demon is associated with Lilu?", store, tmp_path)

    def touched() -> int:
        info = run("inspect", "--store", str(store), cwd=tmp_path).stdout
        return int(re.search(r"memory: (\d+) touched edges", info).group(1))

    n = touched()
    assert n > 0
    saved = tmp_path / "memory.json"
    out = run("memory", "export", "--store", str(store), "--file", str(saved), cwd=tmp_path)
    assert f"wrote {n} memory vectors" in out.stdout
    run("memory", "decay", "--store", str(store), "--factor", "0.5", cwd=tmp_path)
    info = run("inspect", "--store", str(store), "--query", "Lilu demon", cwd=tmp_path).stdout
    assert "alignment with 'Lilu demon'" in info and "[0]" in info
    run("memory", "reset", "--store", str(store), cwd=tmp_path)
    assert touched() == 0
    run("memory", "import", "--store", str(store), "--file", str(saved), cwd=tmp_path)
    assert touched() == n
    bad = run("memory", "decay", "--store", str(store), "--factor", "2", cwd=tmp_path, check=False)
    assert bad.returncode == 2 and "0 <= F <= 1" in bad.stderr
    wrong = run("inspect", "--store", str(store), "--namespace", "other", cwd=tmp_path, check=False)
    assert wrong.returncode == 2 and "namespace" in wrong.stderr


def test_document_ids_are_the_same_from_anywhere(corpus, monkeypatch):
    from remindrag_integrations.app.documents import read_documents

    monkeypatch.chdir(corpus)
    here = [(d.id, d.metadata["source"]) for d in read_documents(["docs"])]
    monkeypatch.chdir("/")
    there = [(d.id, d.metadata["source"]) for d in read_documents([str(corpus / "docs")])]
    assert here == there and len(here) == 10
    alu = str((corpus / "docs" / "alu.txt").resolve())  # issue 33: the resolved path
    assert (alu, alu) in here
    monkeypatch.chdir(corpus / "docs")
    (single,) = read_documents(["alu.txt"])
    assert single.id == alu  # the file given directly: the same document as in its folder


@pytest.mark.slow
def test_index_on_a_device(corpus, tmp_path):
    """``index --device DEV``: the model on sentence-transformers on that torch device; a
    device this machine lacks fails before anything is made, in one line; a store indexed on
    one device is asked on the default embedder (the same model)."""
    docs = corpus / "docs" / "passages.jsonl"
    store = tmp_path / "store"
    typo = run(
        "index", str(docs), "--store", str(store), "--device", "cdua", cwd=tmp_path, check=False
    )
    assert typo.returncode == 2 and "on device 'cdua'" in typo.stderr
    assert "Traceback" not in typo.stderr and not store.exists()
    import torch

    if not torch.cuda.is_available():
        gpu = run(
            "index", str(docs), "--store", str(store), "--device", "cuda", cwd=tmp_path, check=False
        )
        assert gpu.returncode == 2 and "device 'cuda'" in gpu.stderr and not store.exists()
    out = run("index", str(docs), "--store", str(store), "--device", "cpu", cwd=tmp_path).stdout
    assert "indexed 8 documents" in out
    (q, *_) = load_jsonl(DATA / "hotpotqa_train100_sample.questions.jsonl")
    answer = run("ask", q["question"], "--store", str(store), cwd=tmp_path).stdout
    assert "trace:" in answer
