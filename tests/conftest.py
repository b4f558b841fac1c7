"""Shared fixtures. Everything runs offline: no network, no API key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import embed_noise
import pytest

from remindrag_integrations import Document

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DATA = Path(__file__).parent / "data"

# the processor-drift mode (tests/embed_noise.py): the packaged embedder's vectors moved by a
# seeded relative noise, here and in every Python subprocess a test starts
if embed_noise.install():
    _site = str(Path(__file__).parent / "_noise_site")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (_site, os.environ.get("PYTHONPATH", "")) if p
    )


def run_cli(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """``remindrag ARGS`` in a subprocess (offline, no stdin); ``check``: a failure raises
    with its output."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "remindrag_integrations.app.cli", *args],
        cwd=cwd,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"remindrag {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def sample_set(name: str) -> tuple[list[dict], dict[str, Document]]:
    """(questions, documents by pid) of a sample set in tests/data, each passage a document
    as the benchmark harness makes one (its title on a line above the text, the title in the
    metadata), so prompts recorded by a benchmark run replay byte for byte."""
    docs = {}
    for row in load_jsonl(DATA / f"{name}.corpus.jsonl"):
        text = f"{row['title']}\n{row['text']}" if row.get("title") else row["text"]
        docs[row["pid"]] = Document(
            id=row["pid"], text=text, metadata={"title": row.get("title", "")}
        )
    return load_jsonl(DATA / f"{name}.questions.jsonl"), docs


@pytest.fixture(scope="session")
def hotpot() -> tuple[list[dict], dict[str, dict]]:
    """(questions, corpus rows by pid) of the HotpotQA sample in tests/data."""
    qs = load_jsonl(DATA / "hotpotqa_train100_sample.questions.jsonl")
    rows = {r["pid"]: r for r in load_jsonl(DATA / "hotpotqa_train100_sample.corpus.jsonl")}
    return qs, rows


@pytest.fixture(scope="session")
def musique() -> tuple[list[dict], dict[str, dict]]:
    qs = load_jsonl(DATA / "musique_train100_sample.questions.jsonl")
    rows = {r["pid"]: r for r in load_jsonl(DATA / "musique_train100_sample.corpus.jsonl")}
    return qs, rows
