"""The README's LangChain / LlamaIndex examples run as written, offline, in order."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def test_framework_examples_run(capsys) -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- section: retriever -->")[1].split("<!-- /section: retriever -->")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 4
    scope: dict = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), scope)
    out = capsys.readouterr().out.splitlines()
    found = eval(out[0])  # (source, found_by) pairs: the user's own source, untouched
    assert found[0][0] == "warsaw.txt" and {s for s, _ in found} <= {"warsaw.txt", "paris.txt"}
    assert out[1].startswith("The Vistula. MemoryStats(") and "writes_applied=1" in out[1]
    assert out[2] == "In Warsaw. [True]"
    assert out[3].startswith("2 MemoryStats(") and "writes_applied=2" in out[3]
    assert out[4] == "['places']"  # the MetadataFilters kept places only
    nodes, edges, remembered = (int(x) for x in out[5].split())
    assert nodes > 0 and edges > 0 and remembered > 0
