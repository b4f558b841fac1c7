"""What a framework's document becomes in the engine: its metadata as JSON (converted as the
engine's insert converts it), its id (the one given, else its loader's source, else a content hash) and the
LlamaIndex display settings it carries (kept beside the metadata, under the library's key)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .core.arguments import json_metadata
from .core.ids import hex_id
from .core.indexing import describe, source_of
from .core.types import Document
from .results import NAMESPACE  # an input's own value under it is dropped


def jsonable(metadata: Any, name: str = "a document") -> dict[str, Any]:
    """Metadata as plain JSON values (the store persists it), converted as the engine's
    insert converts it (:func:`.core.arguments.json_metadata`: dates as ISO strings, sets
    as sorted lists, NumPy numbers as numbers); what has no JSON form (bytes, objects) is
    an :class:`InvalidDocumentError`, on every path the same."""
    return json_metadata(metadata, name)


def content_id(text: str) -> str:
    return "doc-" + hex_id(text, n=16)


def user_metadata(metadata: Mapping[str, Any], given_id: Any = None) -> dict[str, Any]:
    """An input's metadata without the library's key, as JSON (:func:`jsonable`); errors
    name the document by ``given_id`` and its source."""
    mine = {k: v for k, v in metadata.items() if k != NAMESPACE}
    if given_id:
        name = describe(given_id, mine)
    else:
        source = source_of(mine)
        name = f"the document from {source}" if source else "a document without an id"
    return jsonable(mine, name)


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
