"""Documents from a JSONL file, read lazily: one line at a time, never the whole file.

A line is a JSON object with ``text`` (a string) and optionally ``id`` (else ``pid``, else
``<source>:<line number>``) and ``title`` (put on the text's first line when the text does not
start with it; ``metadata["title"]``, else the id). ``metadata["source"]`` is the file's id:
its resolved absolute path. Blank lines are skipped. A line that is no document raises
:class:`JsonlLineError` naming the file, the line and what to fix, when the reader reaches it:
whatever was indexed before it is kept, so fixing the line and running the same insert again
continues from there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from . import arguments
from .errors import InvalidArgumentError, JsonlLineError, SourceNotFoundError
from .indexing import canonical_source
from .types import Document

FIX = (
    "fix or remove that line, then run the same command again: the documents before it "
    "are kept, and those already indexed are skipped"
)


def existing_file(path: Any, what: str = "a .jsonl file of documents") -> Path:
    """``path`` (``~`` expanded) when it names a file; else :class:`SourceNotFoundError`
    (nothing there) or :class:`InvalidArgumentError` (a folder)."""
    found = Path(arguments.path(path, "path")).expanduser()
    if not found.exists():
        raise SourceNotFoundError(f"no such file: {found}; give the path of {what}")
    if found.is_dir():
        raise InvalidArgumentError(f"{found} is a folder; give the path of {what}")
    return found


def count_lines(path: Path) -> int:
    """The non-blank lines of ``path`` (a cheap pass over its bytes, nothing parsed): the
    documents a JSONL file holds, when every line is one."""
    n = 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.isspace():
                n += 1
    return n


def read(path: Path, source: str, aliases: Sequence[str] = ()) -> Iterator[Document]:
    """The documents of the JSONL file ``path``, one line at a time. ``source`` is the file's
    id (``metadata["source"]``, and ``<source>:<line>`` for a line without an id);
    ``aliases`` are ids an earlier release gave the file (a line without an id also answers
    to ``<alias>:<line>``)."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if raw.isspace():
                continue
            yield _document(raw, n, path, source, aliases)


def _document(raw: bytes, n: int, path: Path, source: str, aliases: Sequence[str]) -> Document:
    def bad(what: str) -> JsonlLineError:
        return JsonlLineError(f"{path}:{n}: {what}; {FIX}", str(path), n)

    try:
        row = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise bad(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:
        raise bad(f"not JSON ({exc})") from None
    if not isinstance(row, dict):
        raise bad(f"a JSON {type(row).__name__}, not an object with 'text'")
    text = row.get("text")
    if not isinstance(text, str):
        found = "no 'text'" if text is None else f"'text' is a {type(text).__name__}"
        raise bad(f"{found}: each line needs 'text', a string (optional: 'id', 'title')")
    given = row.get("id") or row.get("pid")
    if given is not None and not isinstance(given, (str, int)):
        raise bad(f"'id' is a {type(given).__name__}: give a string")
    doc_id = str(given or f"{source}:{n}")
    title = row.get("title")
    if title is not None and not isinstance(title, str):
        raise bad(f"'title' is a {type(title).__name__}: give a string")
    if title and not text.startswith(title):
        text = f"{title}\n{text}"
    old = () if given else tuple(f"{a}:{n}" for a in aliases)
    return Document(doc_id, text, {"source": source, "title": title or doc_id}, aliases=old)


class JsonlDocuments:
    """The documents of a JSONL file, read lazily each time it is iterated (one line at a
    time: memory stays flat whatever the file's size); ``len()`` counts its non-blank lines
    without parsing them, so :meth:`ReMindRAG.insert_stream` knows the total for its ETA.

    ``JsonlDocuments("corpus.jsonl")``: a missing file is a :class:`SourceNotFoundError`
    now; a bad line is a :class:`JsonlLineError` when the reader reaches it (see the
    module for the line format)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = existing_file(path)
        self.source = canonical_source(str(self.path))
        self._count: tuple[tuple[int, int], int] | None = None

    def __iter__(self) -> Iterator[Document]:
        return read(self.path, self.source)

    def __len__(self) -> int:
        st = self.path.stat()
        key = (st.st_size, st.st_mtime_ns)
        if self._count is None or self._count[0] != key:
            self._count = (key, count_lines(self.path))
        return self._count[1]

    def __repr__(self) -> str:
        return f"JsonlDocuments({str(self.path)!r})"
