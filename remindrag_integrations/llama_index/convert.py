"""LlamaIndex results and inputs: engine chunks as ``NodeWithScore`` s, nodes as engine
documents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.schema import (
    BaseNode,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from ..core.types import ConfigError, Document, RetrievedChunk, Trace
from ..results import NAMESPACE, chunk_metadata, content_id, jsonable


def to_llamaindex_node(
    rc: RetrievedChunk, trace: Trace, names: Mapping[str, str] | None = None
) -> NodeWithScore:
    """A chunk as a scored ``TextNode``: the user's metadata untouched, the library's own under
    ``metadata["remindrag"]``, hidden from the LLM and the embedder."""
    hidden = [NAMESPACE]
    node = TextNode(
        id_=rc.chunk.id,
        text=rc.chunk.text,
        metadata=chunk_metadata(rc, trace, names),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=rc.chunk.doc_id)},
        start_char_idx=rc.chunk.start,
        end_char_idx=rc.chunk.end,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    return NodeWithScore(node=node, score=float(rc.score))


def from_llamaindex_node(item: Any) -> Document | None:
    """A LlamaIndex node as an engine document (None for anything else). Its id is the
    node id the user gave (``id_`` / ``doc_id``); a node whose id LlamaIndex made up (a random
    uuid) gets a content hash instead, so adding it twice does not duplicate it. Its
    ``ref_doc_id`` is kept in the metadata."""
    if not isinstance(item, BaseNode):
        return None
    meta = jsonable({k: v for k, v in item.metadata.items() if k != NAMESPACE})
    if item.ref_doc_id and item.ref_doc_id != item.node_id:
        meta.setdefault("ref_doc_id", item.ref_doc_id)
    text = getattr(item, "text", None)
    if not isinstance(text, str):
        text = item.get_content()
    given = "id_" in item.model_fields_set
    return Document(item.node_id if given else content_id(text), text, meta)


_OPERATORS = {
    "==": "$eq",
    "!=": "$ne",
    ">": "$gt",
    ">=": "$gte",
    "<": "$lt",
    "<=": "$lte",
    "in": "$in",
    "nin": "$nin",
}


def metadata_filters_to_dict(spec: Any) -> dict[str, Any]:
    """LlamaIndex ``MetadataFilters`` (nested, AND / OR) as a LangChain-style filter dict.
    Operators other than ``== != > >= < <= in nin`` and the NOT condition raise
    :class:`ConfigError`."""
    if isinstance(spec, MetadataFilter):
        op = str(getattr(spec.operator, "value", spec.operator))
        if op not in _OPERATORS:
            raise ConfigError(
                f"MetadataFilter on {spec.key!r}: operator {op!r} is not supported "
                f"(supported: {', '.join(_OPERATORS)})"
            )
        return {spec.key: {_OPERATORS[op]: spec.value}}
    if not isinstance(spec, MetadataFilters):
        raise ConfigError(f"filters must be llama_index MetadataFilters, got {type(spec).__name__}")
    cond = str(getattr(spec.condition, "value", spec.condition) or "and")
    if cond not in ("and", "or"):
        raise ConfigError(f"MetadataFilters condition {cond!r} is not supported (and, or)")
    parts = [metadata_filters_to_dict(f) for f in spec.filters]
    return {f"${cond}": parts} if parts else {}
