"""The harness's two doors, as docs/benchmarks.md gives them: ``python -m benchmarks.harness``
from the repository root, and a script beside it (``python benchmarks/<name>.py``) from any
folder, which finds ``benchmarks.harness`` by its own path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no help from outside
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_harness_runs_as_a_module_from_the_repository_root() -> None:
    proc = _run("-m", "benchmarks.harness", "--help", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m benchmarks.harness")
    for command in ("run", "curve", "teach", "sequence", "real", "scale", "prepare"):
        assert command in proc.stdout


def test_a_benchmark_script_finds_the_harness_from_any_folder(tmp_path: Path) -> None:
    proc = _run(str(ROOT / "benchmarks" / "memory_trust.py"), "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout
