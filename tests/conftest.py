"""Shared fixtures. Everything runs offline: no network, no API key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import embed_noise
import pytest

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
