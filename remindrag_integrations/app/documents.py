"""Documents from files: .txt / .md (one each) and .jsonl (one per line)."""

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
            if f.suffix in TEXT_SUFFIXES:
                yield Document(str(f), f.read_text(encoding="utf-8"), {"source": str(f)})
            elif f.suffix == ".jsonl":
                yield from _jsonl_documents(f)
            elif not root.is_dir():
                raise CLIError(f"{f}: only .txt, .md and .jsonl files can be indexed")


def _jsonl_documents(path: Path) -> Iterator[Document]:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text = row["text"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CLIError(f"{path}:{n}: expected a JSON object with 'text' ({exc})") from exc
        doc_id = str(row.get("id") or row.get("pid") or f"{path}:{n}")
        title = row.get("title")
        if title and not text.startswith(title):
            text = f"{title}\n{text}"
        yield Document(doc_id, text, {"source": str(path), "title": title or doc_id})
