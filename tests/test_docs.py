"""The front page and the docs/ pages: their code runs as written, and mkdocs builds them
with ``--strict`` (a broken link or a page missing from the navigation fails)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from doc_pages import PAGES, README, ROOT, blocks, python_blocks, without_sections

from remindrag_integrations import ReMindMemoryEventHandler

# sections whose blocks dedicated tests run with assertions on their output
DEDICATED = {"engine": "test_readme_engine.py", "retriever": "test_notebooks.py"}


def run_blocks(codes: list[str], where: str) -> dict:
    scope: dict = {"__name__": "__docs__"}
    try:
        for code in codes:
            exec(compile(code, where, "exec"), scope)  # noqa: S102 - our own docs
    finally:
        for value in scope.values():  # leave no LlamaIndex handler attached
            if isinstance(value, ReMindMemoryEventHandler):
                value.detach()
    return scope


def test_front_page_examples_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    codes = python_blocks(README.read_text(encoding="utf-8"))
    assert len(codes) == 2  # one LangChain, one LlamaIndex example
    assert all(len(c.strip().splitlines()) <= 13 for c in codes)
    run_blocks(codes, "README.md")
    out = capsys.readouterr().out.splitlines()
    assert out == ["warsaw.txt", "warsaw 1"]  # the user's source; one memory write


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_docs_page_code_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    text = without_sections(page.read_text(encoding="utf-8"), set(DEDICATED))
    run_blocks(python_blocks(text), f"docs/{page.name}")


def test_only_named_blocks_are_left_unrun() -> None:
    unrun = [
        (p.name, b.not_run)
        for p in (README, *PAGES)
        for b in blocks(p.read_text(encoding="utf-8"))
        if b.not_run is not None
    ]
    assert sorted(unrun) == [
        (
            "mcp.md",
            "top-level await against a server process (tests/test_mcp_agents.py runs both)",
        ),
        ("offline.md", "needs the qwen extra (a 1.1 GB model)"),
        (
            "postgres.md",
            "needs a PostgreSQL server at that address (tests/test_postgres.py runs the same calls)",
        ),
        (
            "stores.md",
            "a pytest module (tests/test_store_contract.py runs this toy store's contract)",
        ),
    ]
    for name, test in DEDICATED.items():
        assert f'"{name}"' in (ROOT / "tests" / test).read_text(encoding="utf-8")


def test_mkdocs_builds_strict(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for page in PAGES:
        assert (tmp_path / "site" / page.stem / "index.html").exists() or page.stem == "index"
    assert (tmp_path / "site" / "index.html").exists()
