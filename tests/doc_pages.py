"""The README and the docs/ pages as the tests read them: sections between
``<!-- section: NAME -->`` markers, and code blocks (a block right after
``<!-- not run: REASON -->`` is not run, and says why)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(
    r"(?:<!-- not run: (?P<why>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S
)


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    not_run: str | None  # the reason, for a block marked not to run


def section(name: str) -> str:
    """The text of section ``name``, wherever it lives (README or a docs page)."""
    start, end = f"<!-- section: {name} -->", f"<!-- /section: {name} -->"
    for page in (README, *PAGES):
        text = page.read_text(encoding="utf-8")
        if start in text:
            return text.split(start, 1)[1].split(end, 1)[0]
    raise LookupError(f"no section {name!r} in README.md or docs/")


def without_sections(text: str, names: set[str]) -> str:
    for name in names:
        start, end = f"<!-- section: {name} -->", f"<!-- /section: {name} -->"
        if start in text:
            head, rest = text.split(start, 1)
            text = head + rest.split(end, 1)[1]
    return text


def blocks(text: str, lang: str = "python") -> list[Block]:
    return [
        Block(m["lang"], m["code"], m["why"]) for m in _BLOCK.finditer(text) if m["lang"] == lang
    ]


def python_blocks(text: str) -> list[str]:
    """The runnable python blocks of ``text``, in order."""
    return [b.code for b in blocks(text) if b.not_run is None]
