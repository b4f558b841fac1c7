"""Documents from files: .txt / .md (one each), .jsonl (one per line), and with the ``files``
extra (``pip install 'remindrag-integrations[files]'``: LlamaIndex's file readers) .pdf,
.docx, .csv and .html / .htm (one document per file, its pages or parts joined).

A file's document id is its resolved absolute path (``~`` expanded, symbolic links followed),
the id the Python API gives a loader's file (:func:`..core.indexing.canonical_source`): however
it is spelled and wherever the command runs, one file is one document (``remindrag index
docs``, ``cd / && remindrag index /abs/path/docs`` and ``remindrag index docs/a.txt`` all name
``/abs/path/docs/a.txt``). A .jsonl line's id is its ``id`` / ``pid`` field, else
``<file id>:<line number>``. ``metadata["source"]`` holds the same path. Stores built before
0.x named a file by its path relative to the folder given, prefixed with the folder's name
(``docs/a.txt``), or by its file name when given directly: those ids are the documents'
``aliases``, so indexing the file again replaces the old document (its memory carried over).
Messages name files by the short relative name.

A file of a folder that cannot be read (a type no reader handles, a reader whose extra is not
installed, a reader's error) is named in :attr:`FolderRead.skipped` with the reason, never
dropped in silence; hidden files and folders (``.git``, ``.DS_Store``) are left out, as
LlamaIndex's ``SimpleDirectoryReader`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import jsonl
from ..core.errors import SourceNotFoundError
from ..core.indexing import canonical_source
from ..core.types import Document
from .specs import CLIError

TEXT_SUFFIXES = (".txt", ".md")
READER_SUFFIXES = (".pdf", ".docx", ".csv", ".html", ".htm")
FILES_EXTRA = "pip install 'remindrag-integrations[files]'"


@dataclass
class FolderRead:
    """What :func:`read_files` found: the documents, and each file it could not read with
    the reason (file name → reason)."""

    documents: list[Document] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass
class Sources:
    """The files ``paths`` name, found without reading them (:func:`scan`): ``files`` as
    ``(the path given, a file)``; ``skipped``: file name → why it cannot be read (a type no
    reader handles now; a reader's failure once :meth:`documents` reached the file)."""

    files: list[tuple[Path, Path]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def documents(self) -> Iterator[Document]:
        """The documents, file after file and a .jsonl line at a time (never a whole file
        of them in memory). A file of a folder that its reader fails on is added to
        :attr:`skipped` and left out; one given directly is a :class:`CLIError`; a bad .jsonl
        line is a :class:`~..core.errors.JsonlLineError`. Files skipped already are not read
        again."""
        for root, f in self.files:
            name = stable_name(root, f)
            if name in self.skipped:
                continue
            try:
                yield from _file_documents(f)
            except _Unreadable as exc:
                if not root.is_dir():
                    raise CLIError(f"{f}: {exc}") from None
                self.skipped[name] = str(exc)


def scan(paths: Sequence[str]) -> Sources:
    """The files of ``paths`` (folders walked, hidden entries left out), nothing read yet. A
    path that does not exist is a :class:`SourceNotFoundError`; a file of a type no reader
    handles is a :class:`CLIError` when given directly, skipped (named) in a folder."""
    out = Sources()
    for raw in paths:
        root = Path(raw).expanduser()
        if not root.exists():
            raise SourceNotFoundError(
                f"no such file or folder: {root}; give files or folders of documents "
                "(.txt, .md, .jsonl; .pdf, .docx, .csv, .html)"
            )
        for f in _folder_files(root) if root.is_dir() else [root]:
            why = _unreadable_type(f)
            if why is None:
                out.files.append((root, f))
            elif root.is_dir():
                out.skipped[stable_name(root, f)] = why
            else:
                raise CLIError(f"{f}: {why}")
    return out


def read_files(paths: Sequence[str]) -> FolderRead:
    """Documents from the files and folders ``paths`` (folders are walked), all in memory. A
    file given directly that cannot be read is a :class:`CLIError`; one found in a folder is
    skipped and named in the result."""
    found = scan(paths)
    docs = list(found.documents())
    return FolderRead(docs, found.skipped)


def read_documents(paths: Sequence[str]) -> Iterator[Document]:
    """The documents of :func:`read_files` (what it skipped is in its result)."""
    yield from read_files(paths).documents


def _folder_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


class _Unreadable(Exception):
    """A file no reader here can read; the message says why."""


def _unreadable_type(f: Path) -> str | None:
    """Why no reader here takes ``f`` by its suffix (None: one does)."""
    suffix = f.suffix.lower()
    if suffix in (*TEXT_SUFFIXES, ".jsonl", *READER_SUFFIXES):
        return None
    return (
        f"cannot read {suffix or 'files without a suffix'} (readable: "
        f"{', '.join(TEXT_SUFFIXES + ('.jsonl',) + READER_SUFFIXES)})"
    )


def _file_documents(f: Path) -> Iterator[Document]:
    suffix = f.suffix.lower()
    name, old = file_id(f), legacy_names(f)
    if suffix == ".jsonl":
        yield from jsonl.read(f, name, old)
        return
    why = _unreadable_type(f)
    if why is not None:
        raise _Unreadable(why)
    if suffix in TEXT_SUFFIXES:
        text = f.read_text(encoding="utf-8")
    else:
        text = _read_with_llamaindex(f, suffix)
    yield Document(name, text, {"source": name}, aliases=old)


def _reader(suffix: str) -> Any:
    """LlamaIndex's reader for ``suffix`` (the ``files`` extra)."""
    try:
        from llama_index.readers.file import CSVReader, DocxReader, HTMLTagReader, PDFReader
    except ImportError:
        raise _Unreadable(
            f"reading {suffix} files needs the 'files' extra: {FILES_EXTRA}"
        ) from None
    readers: dict[str, Callable[[], Any]] = {
        ".pdf": lambda: PDFReader(return_full_document=True),
        ".docx": DocxReader,
        ".csv": lambda: CSVReader(concat_rows=True),
        ".html": lambda: HTMLTagReader(tag="body"),
        ".htm": lambda: HTMLTagReader(tag="body"),
    }
    return readers[suffix]()


def _read_with_llamaindex(f: Path, suffix: str) -> str:
    """The file's text, its reader's documents (pages, parts) joined by blank lines."""
    reader = _reader(suffix)
    try:
        parts = reader.load_data(f)
    except ImportError as exc:  # a reader's own optional library (e.g. docx2txt)
        raise _Unreadable(f"{exc} ({FILES_EXTRA})") from None
    except Exception as exc:  # a damaged file: name it, go on with the others
        raise _Unreadable(f"{type(exc).__name__}: {exc}") from None
    return "\n\n".join(p.text for p in parts if p.text.strip())


def file_id(file: Path) -> str:
    """A file's document id: its resolved absolute path."""
    return canonical_source(str(file))


def legacy_names(file: Path) -> tuple[str, ...]:
    """The ids earlier releases may have given ``file``: its file name (given directly), or
    its path below any folder above it, prefixed with that folder's name (given a folder)."""
    path = file.resolve()
    below = [(Path(a.name or "root") / path.relative_to(a)).as_posix() for a in path.parents]
    return (path.name, *below)


def stable_name(root: Path, file: Path) -> str:
    """``file``'s short name in messages: relative to the folder ``root`` (prefixed with the
    folder's name), or its file name when it was given directly."""
    if not root.is_dir():
        return file.name
    folder = root.resolve()
    return (Path(folder.name or "root") / file.resolve().relative_to(folder)).as_posix()
