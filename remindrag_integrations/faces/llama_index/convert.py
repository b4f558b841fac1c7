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

from ...core.store import GraphStore
from ...core.types import Retrieval, RetrievedChunk, Trace
from ..inputs import Part, make_part, position, user_metadata
from ..results import NAMESPACE, chunk_metadata, path_names

DISPLAY = (
    "excluded_llm_metadata_keys",
    "excluded_embed_metadata_keys",
    "metadata_template",
    "metadata_separator",
    "text_template",
)
"""A node's settings of what the LLM and the embedder see (``get_content(MetadataMode.LLM)``):
kept with the document, given back on every result node."""
_SHOWN = "llama_index"  # where a stored document keeps them: metadata["remindrag"]["llama_index"]


class ResultNode(TextNode):
    """A result's ``TextNode``. Its ``hash`` (what ``QueryFusionRetriever``'s fusion, docstores
    and other reciprocal-rank fusions key on) is the hash of the same node without the
    per-call ``metadata["remindrag"]``: the passage's text and the user's metadata, so it is
    stable across calls and equal to the hash a vector index gives the same passage."""

    @property
    def hash(self) -> str:
        mine = {k: v for k, v in self.metadata.items() if k != NAMESPACE}
        return TextNode(text=self.text, metadata=mine).hash


def to_llamaindex_nodes(store: GraphStore, retrieval: Retrieval) -> list[NodeWithScore]:
    """A retrieval's chunks as scored nodes, in its order, the path names read in one store
    call (:func:`..results.path_names`)."""
    names = path_names(store, retrieval)
    return [to_llamaindex_node(rc, retrieval.trace, names) for rc in retrieval.chunks]


def to_llamaindex_node(
    rc: RetrievedChunk, trace: Trace, names: Mapping[str, str] | None = None
) -> NodeWithScore:
    """A chunk as a scored :class:`ResultNode`: the user's metadata untouched, the library's
    own under ``metadata["remindrag"]``, hidden from the LLM and the embedder, and the source
    node's display settings (hidden keys, templates) as they were given."""
    shown = display_settings(rc.chunk.metadata)
    for hidden in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
        shown[hidden] = [*shown.get(hidden, ()), NAMESPACE]
    node = ResultNode(
        id_=rc.chunk.id,
        text=rc.chunk.text,
        metadata=chunk_metadata(rc, trace, names),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=rc.chunk.doc_id)},
        start_char_idx=rc.chunk.start,
        end_char_idx=rc.chunk.end,
        **shown,
    )
    return NodeWithScore(node=node, score=float(rc.score))


def display_settings(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The display settings a stored document's metadata keeps (``{}``: LlamaIndex's)."""
    own = stored.get(NAMESPACE)
    found = own.get(_SHOWN) if isinstance(own, Mapping) else None
    return {k: v for k, v in found.items() if k in DISPLAY} if isinstance(found, Mapping) else {}


def _given_display(item: BaseNode) -> dict[str, Any]:
    """The node's display settings that differ from a plain ``TextNode``'s."""
    plain = TextNode()
    out = {}
    for name in DISPLAY:
        value = getattr(item, name, None)
        if value is not None and value != getattr(plain, name):
            out[name] = list(value) if isinstance(value, list) else value
    return out


def from_llamaindex_node(item: Any) -> Part | None:
    """A LlamaIndex node as a :class:`..inputs.Part` of an engine document (None for anything
    else). The document: the id you gave (``id_`` / ``doc_id``); for a node a splitter or an
    ``IngestionPipeline`` made, its parent (``ref_doc_id``, the ``SOURCE`` relationship),
    or the parent's file (``metadata["file_path"]`` / ``["source"]``, a resolved path) when
    LlamaIndex named the parent at random; a document named at random by its file; else a
    content hash. So all nodes of one document are one document, re-adding its edited
    version replaces them all, and ``delete([ref_doc_id])`` removes them. The node keeps its
    place (``start_char_idx``) and its parent's hash; its ``ref_doc_id`` is kept in the
    metadata, its display settings (hidden keys, templates) beside it, under the library's
    key."""
    if not isinstance(item, BaseNode):
        return None
    meta = user_metadata(item.metadata)
    if item.ref_doc_id and item.ref_doc_id != item.node_id:
        meta.setdefault("ref_doc_id", item.ref_doc_id)
    text = getattr(item, "text", None)
    if not isinstance(text, str):
        text = item.get_content()
    shown = _given_display(item)
    if shown:
        meta[NAMESPACE] = {_SHOWN: shown}
    source = item.relationships.get(NodeRelationship.SOURCE)
    if isinstance(source, RelatedNodeInfo) and source.node_id != item.node_id:
        parent = (source.node_id, source.hash or "")
        at = position(meta, getattr(item, "start_char_idx", None))
        return make_part(None, text, meta, at=at, parent=parent, group=source.node_id)
    given = "id_" in item.model_fields_set
    return make_part(item.node_id if given else None, text, meta)
