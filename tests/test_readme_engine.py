"""The README's engine example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def test_engine_example_runs(capsys) -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- section: engine -->")[1].split("<!-- /section: engine -->")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert blocks
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "derrickson" in out and "True" in out
