"""The notebooks and the README's retriever examples run as written: offline, no API key."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from remindrag_integrations import ReMindMemoryEventHandler

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_three_notebooks_exist_with_outputs_stripped() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_langchain.ipynb",
        "03_llamaindex.ipynb",
    ]
    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        for cell in book.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    NotebookClient(
        book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    errors = [
        o
        for c in book.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert not errors


def readme_blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    body = text.split(f"<!-- section: {section} -->", 1)[1].split(
        f"<!-- /section: {section} -->", 1
    )[0]
    return re.findall(r"```python\n(.*?)```", body, re.DOTALL)


def test_readme_retriever_examples_run_as_written() -> None:
    blocks = readme_blocks("retriever")
    assert len(blocks) >= 2
    for code in blocks:
        scope: dict = {"__name__": "__readme__"}
        try:
            exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - our own README
        finally:
            for value in scope.values():  # leave no LlamaIndex handler attached
                if isinstance(value, ReMindMemoryEventHandler):
                    value.detach()
        assert scope["retriever"].memory_stats().writes_applied == 1
