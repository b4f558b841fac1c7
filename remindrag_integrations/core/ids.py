"""The one decoder of node and edge ids.

Ids are made by the library, never copied from user text: a one-letter kind, a dash and hex
digits (``c-`` chunk, ``a-`` anchor, ``e-`` entity; edges ``r-`` relation, ``m-`` mention,
``k-`` contains, ``x-`` context, ``l-`` learned: a link that memory made, not the corpus; see
:mod:`.memory.write`). A chunk and its anchor share their hex part. Prompts show ids
verbatim and parsers accept nothing else.
"""

from __future__ import annotations

import hashlib
import re

from .types import EdgeKind

NODE_ID_TEXT = r"[cae]-[0-9a-f]{4,40}"  # a node id inside a text (a prompt, an answer)
CHUNK_ID_TEXT = r"c-[0-9a-f]{4,40}"  # a chunk id inside a text (an answer's citation)
NODE_ID_RE = re.compile(rf"^{NODE_ID_TEXT}$")
EDGE_ID_RE = re.compile(r"^[rmkxl]-[0-9a-f]{4,40}$")

_EDGE_KINDS: dict[str, EdgeKind] = {
    "r": "relation",
    "m": "mention",
    "k": "contains",
    "x": "context",
    "l": "learned",
}
_EDGE_PREFIX = {v: k for k, v in _EDGE_KINDS.items()}


def hex_id(*parts: str, n: int = 10) -> str:
    """A short stable digest of ``parts`` (the hex part of an id)."""
    return hashlib.sha1("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:n]


def is_chunk(node_id: str) -> bool:
    return node_id.startswith("c-")


def is_anchor(node_id: str) -> bool:
    return node_id.startswith("a-")


def is_entity(node_id: str) -> bool:
    return node_id.startswith("e-")


def is_learned(edge_id: str) -> bool:
    """A ``learned`` edge's id: a link memory made, not the corpus."""
    return edge_id.startswith(_EDGE_PREFIX["learned"] + "-")


def anchor_of(chunk_id: str) -> str:
    """The anchor node of a chunk."""
    return "a-" + chunk_id[2:]


def chunk_of(anchor_id: str) -> str:
    """The chunk an anchor gives access to."""
    return "c-" + anchor_id[2:]


def contains_edge_of(chunk_id: str) -> str:
    """The id of the contains edge between a chunk and its anchor."""
    return "k-" + chunk_id[2:]


def edge_id(kind: EdgeKind, *parts: str) -> str:
    return f"{_EDGE_PREFIX[kind]}-{hex_id(*parts)}"


def norm_name(name: str) -> str:
    """An entity name as it is matched: lower case, whitespace folded. Every store and the
    indexer use this one function, so exact-name merges agree everywhere."""
    return " ".join(name.lower().split())


def entity_id(name: str) -> str:
    return "e-" + hex_id(norm_name(name))


def chunk_id(doc_id: str, text: str, occurrence: int = 0) -> str:
    """A chunk's id: its document and its own text (``occurrence``: how many chunks of the
    document with the same text come before it), so a chunk an edit left unchanged keeps its
    id, its anchor and its edges' memory wherever it moved in the document."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return "c-" + hex_id(doc_id, digest, str(occurrence))
