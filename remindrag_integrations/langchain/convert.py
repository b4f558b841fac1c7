"""LangChain results and inputs: engine chunks as ``Document`` s, ``Document`` s as engine
documents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document as LCDocument

from ..core.types import Document, RetrievedChunk, Trace
from ..inputs import make_document, user_metadata
from ..results import chunk_metadata


def to_langchain_document(
    rc: RetrievedChunk, trace: Trace, names: Mapping[str, str] | None = None
) -> LCDocument:
    """A chunk as a ``Document``: the user's metadata untouched, the library's own under
    ``metadata["remindrag"]`` (see :func:`..results.chunk_metadata`)."""
    return LCDocument(
        id=rc.chunk.id, page_content=rc.chunk.text, metadata=chunk_metadata(rc, trace, names)
    )


def from_langchain_document(item: Any) -> Document | None:
    """A LangChain ``Document`` as an engine document (None for anything else). Its id:
    ``doc.id``, else ``metadata["doc_id"]`` / ``metadata["id"]``, else the loader's
    ``metadata["source"]`` (numbered when one source yields several texts: see
    :func:`..inputs.number_sources`), else a content hash."""
    if not isinstance(item, LCDocument):
        return None
    meta = user_metadata(item.metadata, item.id)
    return make_document(item.id or meta.get("doc_id") or meta.get("id"), item.page_content, meta)
