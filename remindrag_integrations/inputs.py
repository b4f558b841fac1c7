"""What a framework's document becomes in the engine: its metadata as JSON (NumPy numbers kept
as numbers), its id (the one given, else its loader's source, else a content hash) and the
LlamaIndex display settings it carries (kept beside the metadata, under the library's key)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .core.ids import hex_id
from .core.indexing import source_of
from .core.types import Document
from .results import NAMESPACE  # an input's own value under it is dropped


def jsonable(metadata: Any) -> dict[str, Any]:
    """Metadata as plain JSON values (the store persists it): NumPy scalars as the Python
    numbers and bools they hold, NumPy arrays as lists; other odd values become strings."""
    return json.loads(json.dumps(dict(metadata or {}), default=_plain))


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def content_id(text: str) -> str:
    return "doc-" + hex_id(text, n=16)


def user_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """An input's metadata without the library's key, as JSON."""
    return jsonable({k: v for k, v in metadata.items() if k != NAMESPACE})


class FromSource(Document):
    """A document whose id is its loader's source, until :func:`number_sources` numbers it."""


def make_document(given: Any, text: str, metadata: dict[str, Any]) -> Document:
    """An engine document with the id ``given``, else one from its source (numbered when one
    source yields several texts: see :func:`number_sources`), else a content hash."""
    if given:
        return Document(str(given), text, metadata)
    source = source_of(metadata)
    if source is None:
        return Document(content_id(text), text, metadata)
    return FromSource(source, text, metadata)


def number_sources(docs: Iterable[Any]) -> list[Any]:
    """Ids made from a source, made unique per text: one text of a source keeps the source
    as its id; several distinct texts of one source (pages, split pieces) are ``source#0``,
    ``source#1``, ... in order of first appearance. The same text twice keeps one id (a
    duplicate the insert skips). Other items pass through."""
    items = list(docs)
    numbers: dict[str, dict[str, int]] = {}  # source -> text -> its number
    for d in items:
        if isinstance(d, FromSource):
            seen = numbers.setdefault(d.id, {})
            seen.setdefault(d.text, len(seen))
    return [
        Document(_numbered(d.id, numbers[d.id], d.text), d.text, d.metadata)
        if isinstance(d, FromSource)
        else d
        for d in items
    ]


def _numbered(source: str, numbers: dict[str, int], text: str) -> str:
    return source if len(numbers) == 1 else f"{source}#{numbers[text]}"
