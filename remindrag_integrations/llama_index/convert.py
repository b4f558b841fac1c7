"""LlamaIndex results and inputs: engine chunks as ``NodeWithScore`` s, nodes as engine
documents."""

from __future__ import annotations

from typing import Any

from llama_index.core.schema import (
    BaseNode,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)

from ..core.types import Document, RetrievedChunk, Trace
from ..results import TRAVERSAL_KEYS, chunk_metadata, jsonable


def to_llamaindex_node(rc: RetrievedChunk, trace: Trace) -> NodeWithScore:
    hidden = list(TRAVERSAL_KEYS)
    node = TextNode(
        id_=rc.chunk.id,
        text=rc.chunk.text,
        metadata=chunk_metadata(rc, trace),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=rc.chunk.doc_id)},
        start_char_idx=rc.chunk.start,
        end_char_idx=rc.chunk.end,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    return NodeWithScore(node=node, score=float(rc.score))


def from_llamaindex_node(item: Any) -> Document | None:
    """A LlamaIndex node as an engine document (None for anything else); its id is the
    node id, its ``ref_doc_id`` is kept in the metadata."""
    if not isinstance(item, BaseNode):
        return None
    meta = jsonable(item.metadata)
    if item.ref_doc_id and item.ref_doc_id != item.node_id:
        meta.setdefault("ref_doc_id", item.ref_doc_id)
    text = getattr(item, "text", None)
    if not isinstance(text, str):
        text = item.get_content()
    return Document(item.node_id, text, meta)
