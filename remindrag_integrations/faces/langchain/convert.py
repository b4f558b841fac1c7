"""LangChain results and inputs: engine chunks as ``Document`` s, ``Document`` s as engine
documents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document as LCDocument

from ...core.store import GraphStore
from ...core.types import Retrieval, RetrievedChunk, Trace
from ..inputs import Part, make_part, position, user_metadata
from ..results import chunk_metadata, path_names


def to_langchain_documents(store: GraphStore, retrieval: Retrieval) -> list[LCDocument]:
    """A retrieval's chunks as ``Document`` s, in its order, the path names read in one store
    call (:func:`..results.path_names`)."""
    names = path_names(store, retrieval)
    return [to_langchain_document(rc, retrieval.trace, names) for rc in retrieval.chunks]


def to_langchain_document(
    rc: RetrievedChunk, trace: Trace, names: Mapping[str, str] | None = None
) -> LCDocument:
    """A chunk as a ``Document``: the user's metadata untouched, the library's own under
    ``metadata["remindrag"]`` (see :func:`..results.chunk_metadata`)."""
    return LCDocument(
        id=rc.chunk.id, page_content=rc.chunk.text, metadata=chunk_metadata(rc, trace, names)
    )


PARENT_KEY = "doc_id"
"""The metadata key a child piece names its parent by (LangChain's ``MultiVectorRetriever`` /
``ParentDocumentRetriever`` ``id_key``)."""


def from_langchain_document(item: Any, parent_key: str | None = PARENT_KEY) -> Part | None:
    """A LangChain ``Document`` as a :class:`..inputs.Part` of an engine document (None for
    anything else). The document: ``doc.id``, else the parent it names by
    ``metadata[parent_key]`` (``"doc_id"``, the multi-vector convention: a child piece of that
    parent, added to the parent's stored pieces, in one call or many), else
    ``metadata["id"]``, else the loader's ``metadata["source"]`` / ``["file_path"]`` (as a
    resolved path: every page and split piece of one file is one document), else a content
    hash. A splitter's ``add_start_index=True`` gives the piece its place in the document."""
    if not isinstance(item, LCDocument):
        return None
    meta = user_metadata(item.metadata, item.id)
    at = position(meta, meta.get("start_index"))
    parent = meta.get(parent_key) if parent_key else None
    if not item.id and isinstance(parent, (str, int)) and not isinstance(parent, bool):
        name = str(parent).strip()
        if name:
            return make_part(
                None, item.page_content, meta, at=at, parent=(name, ""), group=name, joins=True
            )
    given = item.id or meta.get("id")
    return make_part(given, item.page_content, meta, at=at)
