"""Inserting documents: what must be (re)indexed, split into batches of documents, each
built and written in one store write (an interrupted insert keeps the batches it finished)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from . import arguments, indexing
from .config import IndexConfig
from .memory import carry
from .prompts import Extraction
from .protocols import Embedder, GraphStore
from .steps import Step
from .text import count_tokens
from .types import Chunk, CostLedger, Document, IndexReport


@dataclass(frozen=True)
class Plan:
    """New or changed documents, their chunks, how many were unchanged, and what was left
    out (empty documents by name, how many were given twice)."""

    fresh: list[Document]
    chunks: list[Chunk]
    unchanged: int
    empty: tuple[str, ...] = ()
    duplicates: int = 0

    def extraction_steps(self, cfg: IndexConfig, template: str, use_llm: bool) -> list[Step]:
        return [indexing.extraction_step(c, cfg, template, use_llm) for c in self.chunks]


def plan(store: GraphStore, documents: Iterable[Any], cfg: IndexConfig) -> Plan:
    given = arguments.json_documents(indexing.as_documents(documents))  # dates, sets: JSON
    docs, empty, duplicates = indexing.screen(given)
    indexing.validate(docs, cfg)
    arguments.documents(docs)  # what every store can keep, checked before any work
    fresh = [d for d in docs if store.document_hash(d.id) != indexing.content_hash(d)]
    chunks = [c for d in fresh for c in indexing.make_chunks(d, cfg)]
    return Plan(fresh, chunks, len(docs) - len(fresh), empty, duplicates)


def split(p: Plan, documents: int) -> list[Plan]:
    """The plan in batches of at most ``documents`` documents, each with all its chunks; the
    unchanged count goes with the first."""
    by_doc: dict[str, list[Chunk]] = {}
    for c in p.chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    parts = []
    for i in range(0, len(p.fresh), documents):
        docs = p.fresh[i : i + documents]
        chunks = [c for d in docs for c in by_doc.get(d.id, [])]
        parts.append(Plan(docs, chunks, p.unchanged if i == 0 else 0))
    return parts


def offset_progress(
    progress: Callable[[int, int], None] | None, done: int, total: int
) -> Callable[[int, int], None] | None:
    """A batch's ``progress(done, total)`` seen as progress over the whole insert."""
    if progress is None:
        return None
    return lambda n, _: progress(done + n, total)


def combine(p: Plan, reports: list[IndexReport], ledger: CostLedger) -> IndexReport:
    """One report for the whole insert from its batches' reports."""
    total = IndexReport(0, p.unchanged, 0, 0, 0, 0, 0, ledger, 0, p.empty, p.duplicates)
    for r in reports:
        total = replace(
            total,
            documents=total.documents + r.documents,
            chunks=total.chunks + r.chunks,
            entities_added=total.entities_added + r.entities_added,
            entities_merged=total.entities_merged + r.entities_merged,
            relations=total.relations + r.relations,
            source_tokens=total.source_tokens + r.source_tokens,
            fallback_chunks=total.fallback_chunks + r.fallback_chunks,
            memory={k: total.memory.get(k, 0) + v for k, v in r.memory.items()},
        )
    return total


class Batches:
    """An insert's batches in order, each with its ``progress`` over the whole insert; the
    caller reports each batch's result with :meth:`done` (which calls ``on_batch``)."""

    def __init__(
        self,
        p: Plan,
        cfg: IndexConfig,
        progress: Callable[[int, int], None] | None,
        on_batch: Callable[[IndexReport], None] | None,
    ) -> None:
        self.plan, self.cfg, self.progress, self.on_batch = p, cfg, progress, on_batch
        self.ledger = CostLedger()
        self.reports: list[IndexReport] = []

    def __iter__(self) -> Iterator[tuple[Plan, Callable[[int, int], None] | None]]:
        for part in split(self.plan, self.cfg.insert_batch_documents):
            done = sum(r.chunks for r in self.reports)
            yield part, offset_progress(self.progress, done, len(self.plan.chunks))

    def done(self, report: IndexReport) -> None:
        self.reports.append(report)
        if self.on_batch is not None:
            self.on_batch(report)

    def report(self) -> IndexReport:
        return combine(self.plan, self.reports, self.ledger)


def commit(
    store: GraphStore,
    embedder: Embedder,
    cfg: IndexConfig,
    p: Plan,
    extractions: list[tuple[Extraction, bool]],
    ledger: CostLedger,
    embed_progress: Callable[[int, int], None] | None = None,
) -> IndexReport:
    """Build the graph of the plan, then write it in one atomic store step that also removes
    the old version of a changed document and carries its memory over
    (:mod:`.memory.carry`): a failure (embedding, store) leaves the old version and its
    memory as they were. ``embed_progress(done, total)`` follows the embedding."""
    changed = [d.id for d in p.fresh if store.document_hash(d.id) is not None]
    found = [x for x, _ in extractions]
    batch = indexing.build_graph(p.chunks, found, store, embedder, cfg, embed_progress)
    moves, links = carry.moves(store, changed, batch.chunks, batch.edges) if changed else ({}, [])
    memory = store.add_graph(
        replace=changed,
        documents=[(d.id, indexing.content_hash(d), d.metadata) for d in p.fresh],
        chunks=batch.chunks,
        nodes=batch.nodes,
        embeddings=batch.embeddings,
        edges=[*batch.edges, *links],
        entity_aliases=batch.aliases,
        memory_moves=moves,
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
        memory=dict(memory or {}),
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
