"""documents -> chunks -> extraction -> graph (SPEC §1).

The engine runs the extraction steps (one ``Ask`` per chunk) through an LLM or the rule-based
extractor, then :func:`build_graph` turns the extractions into nodes and edges.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .config import IndexConfig
from .extract_rules import rule_based_extraction
from .ids import anchor_of, chunk_id, contains_edge_of, edge_id, entity_id, hex_id, norm_name
from .prompts import EXTRACTION_PROMPT, Extraction, parse_extraction
from .protocols import Embedder, GraphStore
from .steps import Ask, Step, embed_checked
from .text import chunk_text, count_tokens, first_sentence
from .types import (
    Chunk,
    Document,
    Edge,
    ExtractionError,
    InvalidDocumentError,
    LLMError,
    LLMOutputError,
    Node,
)

MENTION_TEXT = "is mentioned in"
CONTEXT_TEXT = "continues in the next chunk"


def content_hash(doc: Document) -> str:
    return hashlib.sha256(doc.text.encode("utf-8")).hexdigest()


def as_documents(items: Iterable[Any]) -> list[Document]:
    """Accept :class:`Document`, plain strings, or ``(id, text[, metadata])`` tuples."""
    docs = []
    for i, item in enumerate(items):
        if isinstance(item, Document):
            doc = item
        elif isinstance(item, str):
            doc = Document(id="doc-" + hex_id(item, n=16), text=item)
        elif isinstance(item, tuple) and len(item) in (2, 3):
            doc = Document(str(item[0]), item[1], dict(item[2]) if len(item) == 3 else {})
        else:
            raise InvalidDocumentError(f"item {i}: cannot index a {type(item).__name__}")
        docs.append(doc)
    return docs


def validate(docs: Sequence[Document], cfg: IndexConfig) -> None:
    seen: set[str] = set()
    for d in docs:
        if not isinstance(d.id, str) or not d.id.strip():
            raise InvalidDocumentError("a document id must be a non-empty string")
        if not isinstance(d.text, str):
            raise InvalidDocumentError(f"document {d.id!r}: text must be a string")
        if not d.text.strip():
            raise InvalidDocumentError(f"document {d.id!r} is empty")
        if len(d.text) > cfg.max_document_chars:
            raise InvalidDocumentError(
                f"document {d.id!r} has {len(d.text):,} characters, over max_document_chars="
                f"{cfg.max_document_chars:,}; split it or raise the limit"
            )
        if d.id in seen:
            raise InvalidDocumentError(f"document id {d.id!r} appears twice in one insert")
        seen.add(d.id)


def make_chunks(doc: Document, cfg: IndexConfig) -> list[Chunk]:
    digest = content_hash(doc)
    spans = chunk_text(doc.text, cfg.chunk_tokens, cfg.chunk_overlap)
    return [
        Chunk(
            id=chunk_id(doc.id, i, digest),
            doc_id=doc.id,
            index=i,
            text=doc.text[s.start : s.end],
            start=s.start,
            end=s.end,
            metadata=dict(doc.metadata),
        )
        for i, s in enumerate(spans)
    ]


def extraction_step(
    chunk: Chunk, cfg: IndexConfig, template: str = EXTRACTION_PROMPT, use_llm: bool = True
) -> Step:
    """One chunk's extraction: the LLM is asked (one re-ask on an unparseable reply), or in
    zero-token mode the rule-based extractor runs. Returns ``(Extraction, fell_back)``."""
    if not use_llm:
        return rule_based_extraction(chunk.text, cfg.max_entities_per_chunk), False
    prompt = template.format(text=chunk.text)
    problem = ""
    for attempt in range(2):
        ask_prompt = (
            prompt
            if attempt == 0
            else (
                prompt
                + f"\nYour previous reply could not be used ({problem}). Reply with the JSON "
                "object only.\n"
            )
        )
        try:
            reply = yield Ask("extraction", ask_prompt, {"text": chunk.text})
            return parse_extraction(reply or "", cfg.max_entities_per_chunk), False
        except (LLMOutputError, LLMError) as exc:
            problem = str(exc)
    if cfg.on_extraction_error == "fallback":
        return rule_based_extraction(chunk.text, cfg.max_entities_per_chunk), True
    raise ExtractionError(f"chunk {chunk.id} of document {chunk.doc_id!r}: {problem}")


@dataclass
class GraphBatch:
    chunks: list[Chunk]
    nodes: list[Node] = field(default_factory=list)
    embeddings: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    edges: list[Edge] = field(default_factory=list)
    aliases: dict[str, list[str]] = field(default_factory=dict)
    entities_added: int = 0
    entities_merged: int = 0
    relations: int = 0


def build_graph(
    chunks: Sequence[Chunk],
    extractions: Sequence[Extraction],
    store: GraphStore,
    embedder: Embedder,
    cfg: IndexConfig,
) -> GraphBatch:
    """Nodes and edges for new chunks, merging entities into the store's (SPEC §1)."""
    batch = GraphBatch(chunks=list(chunks))
    chunk_vecs = embed_checked(embedder, [c.text for c in chunks], cfg.embed_batch_size, store.dim)
    resolve, ent_nodes, ent_vecs = _resolve_entities(extractions, store, embedder, cfg, batch)
    rows: list[np.ndarray] = []
    for c, x, vec in zip(chunks, extractions, chunk_vecs):
        a_id = anchor_of(c.id)
        title = x.title or first_sentence(c.text)
        batch.nodes += [
            Node(a_id, "anchor", title, c.doc_id, c.id),
            Node(c.id, "chunk", c.id, c.doc_id, c.id),
        ]
        rows += [vec, vec]
        batch.edges.append(Edge(contains_edge_of(c.id), a_id, c.id, "contains", title))
        for name in x.entities:
            eid = resolve[norm_name(name)]
            batch.edges.append(
                Edge(edge_id("mention", eid, a_id), eid, a_id, "mention", MENTION_TEXT)
            )
        for s, sentence, o in x.triples:
            u, v = resolve[norm_name(s)], resolve[norm_name(o)]
            if u == v:
                continue
            a, b = sorted((u, v))
            batch.edges.append(
                Edge(edge_id("relation", a, b, sentence), u, v, "relation", sentence)
            )
            batch.relations += 1
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    for doc_chunks in by_doc.values():
        doc_chunks.sort(key=lambda c: c.index)
        for prev, nxt in zip(doc_chunks, doc_chunks[1:]):
            a, b = anchor_of(prev.id), anchor_of(nxt.id)
            batch.edges.append(Edge(edge_id("context", a, b), a, b, "context", CONTEXT_TEXT))
    batch.nodes += ent_nodes
    rows += list(ent_vecs)
    dim = chunk_vecs.shape[1] if len(chunk_vecs) else (store.dim or 0)
    batch.embeddings = np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)
    batch.edges = list({e.id: e for e in batch.edges}.values())
    return batch


def _resolve_entities(
    extractions: Sequence[Extraction],
    store: GraphStore,
    embedder: Embedder,
    cfg: IndexConfig,
    batch: GraphBatch,
) -> tuple[dict[str, str], list[Node], np.ndarray]:
    """Map every normalised entity name to a node id: exact name match first, then cosine
    ≥ ``synonym_threshold`` against the store's and this batch's entities."""
    names: dict[str, str] = {}
    for x in extractions:
        for n in [*x.entities, *(t[0] for t in x.triples), *(t[2] for t in x.triples)]:
            names.setdefault(norm_name(n), n)
    resolve: dict[str, str] = {}
    pending = []
    for key, name in names.items():
        existing = store.find_entity_by_name(key)
        if existing:
            resolve[key] = existing
        else:
            pending.append((key, name))
    vecs = embed_checked(embedder, [n for _, n in pending], cfg.embed_batch_size, store.dim)
    new_nodes: list[Node] = []
    accepted = np.zeros_like(vecs)  # rows of the entities this batch adds, in order
    for (key, name), vec in zip(pending, vecs):
        target = _synonym(vec, store, new_nodes, accepted[: len(new_nodes)], cfg.synonym_threshold)
        if target is None:
            accepted[len(new_nodes)] = vec
            new_nodes.append(Node(entity_id(name), "entity", name))
            resolve[key] = new_nodes[-1].id
            batch.entities_added += 1
        else:
            resolve[key] = target
            batch.aliases.setdefault(target, []).append(name)
            batch.entities_merged += 1
    # aliases of entities new in this batch go on the node itself
    for node_i, node in enumerate(new_nodes):
        extra = batch.aliases.pop(node.id, [])
        if extra:
            new_nodes[node_i] = Node(node.id, "entity", node.name, aliases=tuple(extra))
    return resolve, new_nodes, accepted[: len(new_nodes)]


def _synonym(
    vec: np.ndarray,
    store: GraphStore,
    new_nodes: list[Node],
    new_vecs: np.ndarray,
    threshold: float,
) -> str | None:
    best_id, best = None, threshold
    for nid, sim in store.search(vec, 1, ("entity",)):
        if sim >= best:
            best_id, best = nid, sim
    if len(new_vecs):
        sims = new_vecs @ vec
        i = int(np.argmax(sims))
        if sims[i] >= best:
            best_id = new_nodes[i].id
    return best_id


def source_tokens(chunks: Sequence[Chunk]) -> int:
    return sum(count_tokens(c.text) for c in chunks)
