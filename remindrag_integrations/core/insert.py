"""Inserting documents: what must be (re)indexed, then one store write of the new graph."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import arguments, indexing
from .config import IndexConfig
from .prompts import Extraction
from .protocols import Embedder, GraphStore
from .steps import Step
from .text import count_tokens
from .types import Chunk, CostLedger, Document, IndexReport


@dataclass(frozen=True)
class Plan:
    """New or changed documents, their chunks, and how many were unchanged."""

    fresh: list[Document]
    chunks: list[Chunk]
    unchanged: int

    def extraction_steps(self, cfg: IndexConfig, template: str, use_llm: bool) -> list[Step]:
        return [indexing.extraction_step(c, cfg, template, use_llm) for c in self.chunks]


def plan(store: GraphStore, documents: Iterable[Any], cfg: IndexConfig) -> Plan:
    docs = indexing.as_documents(documents)
    indexing.validate(docs, cfg)
    arguments.documents(docs)  # what every store can keep, checked before any work
    fresh = [d for d in docs if store.document_hash(d.id) != indexing.content_hash(d)]
    chunks = [c for d in fresh for c in indexing.make_chunks(d, cfg)]
    return Plan(fresh, chunks, len(docs) - len(fresh))


def commit(
    store: GraphStore,
    embedder: Embedder,
    cfg: IndexConfig,
    p: Plan,
    extractions: list[tuple[Extraction, bool]],
    ledger: CostLedger,
) -> IndexReport:
    """Build the graph of the plan, then write it in one atomic store step that also removes
    the old version of a changed document: a failure (embedding, store) leaves the old
    version and its memory as they were."""
    changed = [d.id for d in p.fresh if store.document_hash(d.id) is not None]
    batch = indexing.build_graph(p.chunks, [x for x, _ in extractions], store, embedder, cfg)
    store.add_graph(
        replace=changed,
        documents=[(d.id, indexing.content_hash(d), d.metadata) for d in p.fresh],
        chunks=batch.chunks,
        nodes=batch.nodes,
        embeddings=batch.embeddings,
        edges=batch.edges,
        entity_aliases=batch.aliases,
    )
    return IndexReport(
        documents=len(p.fresh),
        skipped_documents=p.unchanged,
        chunks=len(p.chunks),
        entities_added=batch.entities_added,
        entities_merged=batch.entities_merged,
        relations=batch.relations,
        source_tokens=indexing.source_tokens(p.chunks),
        costs=ledger,
        fallback_chunks=sum(1 for _, fb in extractions if fb),
    )


EXPECTED_COMPLETION_TOKENS = 200  # a typical extraction reply (title, entities, triples)


def estimate(p: Plan, template: str, use_llm: bool) -> dict[str, int]:
    """Expected extraction cost of a plan: calls and tokens (0 in zero-token mode)."""
    calls = len(p.chunks) if use_llm else 0
    prompt = sum(count_tokens(template.format(text=c.text)) for c in p.chunks) if calls else 0
    return {
        "documents": len(p.fresh),
        "chunks": len(p.chunks),
        "llm_calls": calls,
        "prompt_tokens": prompt,
        "completion_tokens": calls * EXPECTED_COMPLETION_TOKENS,
    }
