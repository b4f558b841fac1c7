"""`remindrag serve` in a real browser (issue 47): headless Chromium (Debian's ``chromium``,
driven by Playwright pointed at it: no browser download) loads each page, forgets an edge
from the graph, teaches a question its passages, undoes an action, and the store shows each
change. Run by ``make test-console`` (which installs the browser); deselected from the plain
suite by the ``browser`` mark (pyproject's addopts), and it FAILS, never skips, where no
browser is found. ``CONSOLE_SCREENSHOTS=DIR`` saves the pages as PNGs there (docs/img)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_fixture
import numpy as np
import pytest
from mcp_fixture import QUESTION

from remindrag_integrations import ReMindRAG
from remindrag_integrations.app.console import audit
from remindrag_integrations.stores import SQLiteGraphStore

pytestmark = pytest.mark.browser

indexed_store = mcp_fixture.indexed_store
fresh_store = mcp_fixture.fresh_store


def chromium_path() -> str:
    """The system browser, or a failure that says how to get it (never a skip)."""
    found = os.environ.get("REMINDRAG_CHROMIUM") or shutil.which("chromium")
    found = found or shutil.which("chromium-browser")
    if not found:
        pytest.fail(
            "no Chromium found: install it (`apt-get install -y chromium`, or `make "
            "test-console`, which does) or point REMINDRAG_CHROMIUM at one",
            pytrace=False,
        )
    return found


def playwright_module() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the browser test needs Playwright's Python package: pip install playwright "
            "(`make test-console` installs it; it is pointed at the system Chromium, no "
            "browser download)",
            pytrace=False,
        )
    return sync_playwright


def memory(store: Path) -> dict[str, float]:
    with SQLiteGraphStore.open(store, create=False) as s:
        return {e: float(np.linalg.norm(v)) for e, v in s.export_memory().items() if any(v)}


@pytest.fixture
def served(fresh_store: Path) -> Iterator[tuple[str, Path, dict[str, Any]]]:
    """A remembered walk written by another process, then ``remindrag serve`` on the store."""
    other = ReMindRAG(store=fresh_store)
    try:
        a = other.answer(QUESTION, min_score=0)
        w = other.feedback(a.trace_id, True)
        edge = other.store.get_edge(w.enhanced[0])
        written = {"trace": a.trace_id, "edge": edge.id, "node": edge.u}
        for question in ("Who were the Gallu?", QUESTION, "Lilu spirits", QUESTION):
            other.answer(question, min_score=0)  # memory replayed: the overview's plot
    finally:
        other.close()
    with mcp_fixture.serving_console(fresh_store) as base:
        yield base, fresh_store, written


def test_pages_forget_teach_undo_in_chromium(served: tuple[str, Path, dict[str, Any]]) -> None:
    base, store, written = served
    shots = os.environ.get("CONSOLE_SCREENSHOTS")
    sync_playwright = playwright_module()
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 760})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

        def shot(name: str) -> None:
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(shots) / f"console-{name}.png"))

        # Overview: the counts and the plot of the query the other process made
        page.goto(base + "/")
        page.wait_for_selector("#counts .card")
        assert "10" in page.inner_text("#counts")
        page.wait_for_selector("#plotsvg")
        assert "confirm" not in page.inner_text("#writes")  # written outside the console
        shot("overview")

        # Queries: the trace is listed, opens with its walk, links to the trace page
        page.goto(base + "/queries")
        page.wait_for_selector("#traces .topen")
        assert page.locator("#traces .topen").count() == 5
        page.click(f".topen[data-id='{written['trace']}']")
        page.wait_for_selector("#tdetail h2")
        assert QUESTION in page.inner_text("#tdetail h2")
        shot("queries")
        page.goto(f"{base}/queries/{written['trace']}")
        assert QUESTION in page.content()

        # Graph: search an entity, open it; then the remembered edge's end, forget the edge
        page.goto(base + "/graph")
        page.fill("#gq", "Lilu")
        page.click("#gsearch button")
        page.wait_for_selector("#ghits .hit")
        page.click("#ghits .hit")
        page.wait_for_function("cy.nodes().length > 1")
        page.goto(f"{base}/graph?node={written['node']}")
        page.wait_for_function(f"cy.getElementById('{written['edge']}').length === 1")
        assert page.evaluate(f"cy.getElementById('{written['edge']}').data('strength')") > 0
        shot("graph")
        page.evaluate(f"cy.getElementById('{written['edge']}').emit('tap')")
        page.wait_for_selector("#eforget")
        page.click("#eforget")
        page.wait_for_selector("#eout .ok")
        assert written["edge"] not in memory(store)  # the store shows it
        page.click("#eundo")
        page.wait_for_function("document.querySelector('#estrength').textContent !== '0'")
        assert memory(store)[written["edge"]] > 0  # and the undo

        # Correct: teach a question its passages, picked from a search
        before = memory(store)
        page.goto(base + "/correct")
        page.wait_for_selector("#actions tr")
        page.fill("#teachq", "Which spirit has no mouth?")
        page.fill("#teachs", "demon no mouth underworld")
        page.click("#teachfind")
        page.wait_for_selector("#teachhits input")
        picked = page.get_attribute("#teachhits input", "value")
        page.check("#teachhits input")
        page.click("#teachgo")
        page.wait_for_selector("#teachout .ok")
        assert "taught 1 of 1" in page.inner_text("#teachout")
        after = memory(store)
        assert after != before and len(after) >= len(before)
        with SQLiteGraphStore.open(store, create=False) as s:
            log = [v for k, v in s.settings().items() if k.startswith(audit.PREFIX)]
        taught = [v for v in log if v["what"] == "teach"]
        assert taught and taught[0]["args"]["chunk_ids"] == [picked]

        # ask, with its evidence
        page.fill("#askq", QUESTION)
        page.click("#ask button")
        page.wait_for_selector("#askout .answer")
        assert page.locator("#askout li").count() > 0
        shot("correct")

        # undo the teaching from the actions table
        page.goto(base + "/correct")
        page.wait_for_selector("#actions .undo")
        page.click("#actions .undo")  # the newest undoable action: the teaching
        page.wait_for_function("document.body.innerText.includes('undone')")
        assert memory(store) == pytest.approx(before)

        # Documents: listed and searchable
        page.goto(base + "/documents")
        page.wait_for_selector("#docs .ddel")
        assert page.locator("#docs .ddel").count() == 10
        page.fill("#dq", "Lilu")
        page.click("#dsearch button")
        page.wait_for_function("document.querySelectorAll('#docs .ddel').length === 2")
        shot("documents")
        browser.close()
    assert errors == [], errors
