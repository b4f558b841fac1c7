"""The library never adds a handler to the root logger (the one-time ONNX export's quantization
called ``logging.basicConfig`` through onnxruntime, after which an app's own ``basicConfig`` did
nothing), and third-party DEBUG lines stay quiet by default (bm25s set its logger to DEBUG and
printed "Building index from tokens" on each first query). Each test runs in a fresh interpreter
and failed on the code before the change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from remindrag_integrations.adapters.onnx_embedder import can_export

ROOT = Path(__file__).resolve().parent.parent

FIRST_RUN = """
import logging, sys
from remindrag_integrations import ReMindRAG
eng = ReMindRAG()  # the packaged embedder: exported to ONNX and quantized on first use
eng.insert(["The Thames flows through London.", "The Seine flows through Paris."])
eng.retrieve("Which river flows through London?")
print("ROOT", logging.getLogger().handlers, logging.getLogger().level, file=sys.stderr)
logging.basicConfig(level=logging.INFO, format="APP %(name)s %(message)s")
logging.getLogger("app").info("configured")
"""

CONFIGURED_FIRST = """
import logging
logging.basicConfig(level=logging.INFO, format="APP %(name)s %(message)s")
from remindrag_integrations import ReMindRAG
from remindrag_integrations.testing import HashEmbedder
eng = ReMindRAG(embeddings=HashEmbedder())
eng.insert(["The Thames flows through London.", "The Seine flows through Paris."])
eng.retrieve("Which river flows through London?")
logging.getLogger("app").info("still mine")
"""


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )


@pytest.mark.skipif(not can_export(), reason="the ONNX export needs torch, onnx, transformers")
def test_the_first_embed_and_query_leave_the_root_logger_alone(tmp_path: Path) -> None:
    out = _run(FIRST_RUN, REMINDRAG_CACHE=str(tmp_path / "cache"))  # a first run: no export yet
    assert (tmp_path / "cache" / "onnx").is_dir()  # it did export and quantize here
    assert "ROOT [] 30" in out.stderr  # no handler, the level untouched (WARNING)
    assert "APP app configured" in out.stderr  # the app's basicConfig took effect
    assert "bm25s" not in out.stdout + out.stderr
    assert "Building index" not in out.stdout + out.stderr


def test_an_apps_info_logging_shows_no_third_party_debug_lines() -> None:
    out = _run(CONFIGURED_FIRST)
    assert "APP app still mine" in out.stderr
    assert "APP remindrag_integrations" in out.stderr  # the library's INFO lines, as asked
    assert "Building index" not in out.stdout + out.stderr
    assert not [line for line in out.stderr.splitlines() if "DEBUG" in line]
