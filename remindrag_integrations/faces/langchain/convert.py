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


def from_langchain_document(item: Any) -> Part | None:
    """A LangChain ``Document`` as a :class:`..inputs.Part` of an engine document (None for
    anything else). The document: ``doc.id``, else ``metadata["doc_id"]`` /
    ``metadata["id"]``, else the loader's ``metadata["source"]`` / ``["file_path"]`` (as a
    resolved path: every page and split piece of one file is one document), else a content
    hash. A splitter's ``add_start_index=True`` gives the piece its place in the document."""
    if not isinstance(item, LCDocument):
        return None
    meta = user_metadata(item.metadata, item.id)
    given = item.id or meta.get("doc_id") or meta.get("id")
    return make_part(given, item.page_content, meta, at=position(meta, meta.get("start_index")))
