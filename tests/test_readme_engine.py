"""The engine page's examples (docs/engine.md) run as written."""

from __future__ import annotations

import pytest
from doc_pages import python_blocks, section

pytestmark = pytest.mark.packaged_embedder  # run again under drift by make test


def test_engine_example_runs(capsys) -> None:
    blocks = python_blocks(section("engine"))
    assert blocks
    for code in blocks:
        exec(compile(code, "docs/engine.md", "exec"), {})
    out = capsys.readouterr().out
    assert "derrickson" in out and "True" in out
