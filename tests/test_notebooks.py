"""The notebooks and the retriever page's examples (docs/retriever.md) run as written:
offline, no API key."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from doc_pages import python_blocks, section
from nbclient import NotebookClient

from remindrag_integrations import ReMindMemoryEventHandler

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_notebooks_exist_with_outputs_stripped() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_langchain.ipynb",
        "03_llamaindex.ipynb",
        "04_keep_in_sync.ipynb",
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


def readme_blocks(name: str) -> list[str]:
    """The python blocks of a docs section (the retriever page: docs/retriever.md)."""
    return python_blocks(section(name))


def test_readme_retriever_examples_run_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """The framework examples run in order, in one scope (later ones reuse ``retriever``)."""
    blocks = readme_blocks("retriever")
    assert len(blocks) == 4
    scope: dict = {"__name__": "__readme__"}
    try:
        for code in blocks:
            exec(compile(code, "docs/retriever.md", "exec"), scope)  # noqa: S102 - our docs
    finally:
        for value in scope.values():  # leave no LlamaIndex handler attached
            if isinstance(value, ReMindMemoryEventHandler):
                value.detach()
    out = capsys.readouterr().out.splitlines()
    found = eval(out[0])  # (source, found_by) pairs: the user's own source, untouched
    assert found[0][0] == "warsaw.txt" and {s for s, _ in found} <= {"warsaw.txt", "paris.txt"}
    assert out[1].startswith("The Vistula. MemoryStats(") and "writes_applied=1" in out[1]
    assert out[2] == "In Warsaw. [True]"  # the tool loop memorized with the final answer
    assert out[3].startswith("2 MemoryStats(") and "writes_applied=2" in out[3]  # query + chat
    assert out[4] == "['places']"  # the MetadataFilters kept places only
    nodes, edges, remembered = (int(x) for x in out[5].split())
    assert nodes > 0 and edges > 0 and remembered > 0
