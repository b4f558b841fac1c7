"""What a framework's document becomes in the engine: its metadata as JSON (converted as the
engine's insert converts it), its id (the one given, else its parent document's, else its
loader's source as a resolved path, else a content hash), the pieces of one document joined
into one (:func:`join_parts`), and the LlamaIndex display settings it carries (kept beside the
metadata, under the library's key)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.arguments import json_metadata
from ..core.identity import derived
from ..core.indexing import canonical_source, describe, of_pieces, source_of
from ..core.types import Document, Piece
from .results import NAMESPACE  # an input's own value under it is dropped


def jsonable(metadata: Any, name: str = "a document") -> dict[str, Any]:
    """Metadata as plain JSON values (the store persists it), converted as the engine's
    insert converts it (:func:`.core.arguments.json_metadata`: dates as ISO strings, sets
    as sorted lists, NumPy numbers as numbers); what has no JSON form (bytes, objects) is
    an :class:`InvalidDocumentError`, on every path the same."""
    return json_metadata(metadata, name)


def content_id(text: str) -> str:
    return derived(text)


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


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


def made_up(node_id: str) -> bool:
    """Whether ``node_id`` looks like an id LlamaIndex made up (a random uuid)."""
    return bool(_UUID.match(node_id))


@dataclass(frozen=True)
class Part:
    """One framework input on its way to becoming (a piece of) an engine document: the id of
    the document it belongs to, the piece, and older ids of that document."""

    doc_id: str
    piece: Piece
    aliases: tuple[str, ...] = ()
    whole: bool = False
    """A document of its own (an id the user gave it): never joined with another part."""


def path_id(value: str, metadata: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """A document id that may be a file's path, made canonical
    (:func:`.core.indexing.canonical_source`), with the spellings it replaces. A
    ``SimpleDirectoryReader(filename_as_id=True)`` page id, ``<file>_part_<n>``, is its
    file's."""
    source = source_of(metadata)
    if source and value.startswith(source + "_part_") and value[len(source) + 6 :].isdigit():
        value = source
    if value != source:  # an id of the user's own: kept as given
        return value, ()
    canonical = canonical_source(value)
    return canonical, tuple(dict.fromkeys((value, canonical)))


def position(metadata: Mapping[str, Any], start: Any) -> tuple[int, int] | None:
    """A piece's place in its document, ``(page, start)``, when its splitter recorded its
    start (LangChain's ``add_start_index=True``: ``metadata["start_index"]``; a LlamaIndex
    node's ``start_char_idx``), the page from ``metadata["page"]`` / ``["page_label"]``."""
    if isinstance(start, bool) or not isinstance(start, int):
        return None
    page = metadata.get("page", metadata.get("page_label", 0))
    if isinstance(page, str) and page.strip().isdigit():
        page = int(page)
    return (page if isinstance(page, int) and not isinstance(page, bool) else 0, start)


def make_part(
    given: Any,
    text: str,
    metadata: dict[str, Any],
    *,
    at: tuple[int, int] | None = None,
    parent: tuple[str, str] | None = None,
    group: str | None = None,
    joins: bool = False,
) -> Part:
    """A framework input as a :class:`Part` of the document named, in this order, by the id
    ``given``, the parent document ``group`` (a LlamaIndex node's ``ref_doc_id``; one named at
    random is named by its file, else by its content: the parent's hash), its loader's
    source (the resolved path of the file: see :func:`path_id`), else a content hash
    (:func:`.core.identity.derived`). ``joins``: a child naming its parent, added to the
    parent's stored pieces (:attr:`.core.types.Piece.joins`)."""
    piece = Piece(text, metadata, at, parent, joins=joins)
    source = source_of(metadata)
    if group and made_up(group) and source:  # a parent LlamaIndex named at random: its file
        group = None
    elif group and made_up(group) and parent and parent[1]:  # nor a file: its content (hash)
        group = derived(parent[1])
    name = given or group or source
    if not name:
        return Part(content_id(text), piece)
    doc_id, aliases = path_id(str(name), metadata)
    own = bool(given) and not aliases  # the user's id for this text, not a file's
    return Part(doc_id, piece, aliases, whole=own)


@dataclass(frozen=True)
class _Group:
    doc_id: str


def join_parts(items: Iterable[Any]) -> list[Any]:
    """Framework inputs as engine documents: the :class:`Part` s of one document (the pieces
    of a split file, a PDF's pages, a LlamaIndex document's nodes) become one document with
    those pieces, in the order given; a document of one piece that carries no place in a
    larger one is a plain document, and so is a part with an id of the user's own (the same
    id twice with two texts is refused by the insert). Other items pass through."""
    out: list[Any] = []
    groups: dict[str, list[Part]] = {}
    for item in items:
        if isinstance(item, Part) and item.whole:
            out.append(Document(item.doc_id, item.piece.text, item.piece.metadata))
        elif isinstance(item, Part):
            if item.doc_id not in groups:
                groups[item.doc_id] = []
                out.append(_Group(item.doc_id))
            groups[item.doc_id].append(item)
        else:
            out.append(item)
    docs = []
    for entry in out:
        if not isinstance(entry, _Group):
            docs.append(entry)
            continue
        x = entry.doc_id
        parts = groups[x]
        aliases = tuple(dict.fromkeys(a for p in parts for a in p.aliases))
        pieces = [p.piece for p in parts]  # a piece given twice: the insert keeps one
        one = pieces[0]
        if all(p.text == one.text and p.at is None and p.parent is None for p in pieces):
            docs.extend([Document(x, one.text, one.metadata, aliases=aliases)] * len(pieces))
        else:
            docs.append(of_pieces(x, pieces, aliases))
    return docs
