"""Documents from files: .txt / .md (one each) and .jsonl (one per line).

Document ids are stable wherever the command runs: a file's id is its path relative to the
folder given, prefixed with that folder's name (``remindrag index docs`` and
``cd / && remindrag index /abs/path/docs`` both name ``docs/a.txt``); a file given directly is
named by its file name. A .jsonl line's id is its ``id`` / ``pid`` field, else
``<file id>:<line number>``. ``metadata["source"]`` holds the same relative name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..core.types import Document
from .specs import CLIError

TEXT_SUFFIXES = (".txt", ".md")


def read_documents(paths: Sequence[str]) -> Iterator[Document]:
    """Documents from .txt / .md files (one each) and .jsonl files (one per line, with
    ``text`` and optionally ``id`` / ``pid`` and ``title``); folders are walked."""
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise CLIError(f"no such file or folder: {root}")
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for f in files:
            name = stable_name(root, f)
            if f.suffix in TEXT_SUFFIXES:
                yield Document(name, f.read_text(encoding="utf-8"), {"source": name})
            elif f.suffix == ".jsonl":
                yield from _jsonl_documents(f, name)
            elif not root.is_dir():
                raise CLIError(f"{f}: only .txt, .md and .jsonl files can be indexed")


def stable_name(root: Path, file: Path) -> str:
    """``file``'s name relative to the folder ``root`` (prefixed with the folder's name), or its
    file name when it was given directly: the same wherever the command runs."""
    if not root.is_dir():
        return file.name
    folder = root.resolve()
    return (Path(folder.name or "root") / file.resolve().relative_to(folder)).as_posix()


def _jsonl_documents(path: Path, name: str) -> Iterator[Document]:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text = row["text"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CLIError(f"{path}:{n}: expected a JSON object with 'text' ({exc})") from exc
        doc_id = str(row.get("id") or row.get("pid") or f"{name}:{n}")
        title = row.get("title")
        if title and not text.startswith(title):
            text = f"{title}\n{text}"
        yield Document(doc_id, text, {"source": name, "title": title or doc_id})
