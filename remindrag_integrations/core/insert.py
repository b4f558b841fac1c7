"""Inserting documents: what must be (re)indexed, split into batches of documents, each
built and written in one store write (an interrupted insert keeps the batches it finished)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from . import arguments, identity, indexing, workers
from .config import IndexConfig
from .memory import carry
from .progress import offset_progress
from .prompts import Extraction
from .protocols import Embedder
from .steps import Step
from .store import GraphStore
from .text import count_tokens
from .types import Chunk, CostLedger, Document, IndexReport, Piece, plus_written


@dataclass(frozen=True)
class Plan:
    """New or changed documents, their chunks, how many were unchanged, and what was left
    out (empty documents by name, how many were given twice)."""

    fresh: list[Document]
    chunks: list[Chunk]
    unchanged: int
    empty: tuple[str, ...] = ()
    duplicates: int = 0
    replaces: dict[str, list[str]] = field(default_factory=dict)
    """Document id -> stored documents it replaces besides itself (its older ids)."""
    named: tuple[str, ...] = ()
    """Every document id the insert was given (written or unchanged)."""

    def extraction_steps(self, cfg: IndexConfig, template: str, use_llm: bool) -> list[Step]:
        return [indexing.extraction_step(c, cfg, template, use_llm) for c in self.chunks]


def plan(
    store: GraphStore,
    documents: Iterable[Any],
    cfg: IndexConfig,
    started: Collection[str] = (),
) -> Plan:
    """What an insert writes. A document given in pieces is its whole new version, except
    (:func:`continued`) where its pieces continue the stored version: ``started`` names the
    documents an open :meth:`Engine.batches` block already wrote, and LlamaIndex nodes of the
    stored parent version join it."""
    given = arguments.json_documents(indexing.as_documents(documents))  # dates, sets: JSON
    docs, empty, duplicates = indexing.screen(given)
    indexing.validate(docs, cfg)
    arguments.documents(docs)  # what every store can keep, checked before any work
    docs = [continued(store, d, d.id in started) for d in docs]
    replaces = {d.id: found for d in docs if (found := older_ids(store, d))}
    fresh = [
        d for d in docs if d.id in replaces or store.document_hash(d.id) != indexing.content_hash(d)
    ]
    chunks = [c for d in fresh for c in indexing.make_chunks(d, cfg)]
    named = tuple(d.id for d in docs)
    if cfg.unnamed_edits == "refuse":
        identity.refuse_unnamed_edits(store, fresh, chunks, named)
    return Plan(fresh, chunks, len(docs) - len(fresh), empty, duplicates, replaces, named)


def continued(store: GraphStore, doc: Document, started: bool) -> Document:
    """``doc`` with the stored pieces its pieces continue: all of them when this batches
    block already wrote the document (``started``); else, when every piece is a LlamaIndex
    node of a parent version the store holds (same ``ref_doc_id``, same hash), the stored
    pieces they do not overlap (re-adding them, or the next batch, keeps the rest); when every
    piece is a child naming its parent (:attr:`Piece.joins`), the stored pieces and the new
    ones (a child given again is kept once). Otherwise ``doc`` is the whole new version."""
    if not doc.pieces or store.document_hash(doc.id) in (None, indexing.content_hash(doc)):
        return doc  # not stored, or stored as given (unchanged)
    old = indexing.stored_pieces(store.document_chunks(doc.id))
    if not old:
        return doc
    if all(p.joins for p in doc.pieces):  # children naming their parent: added to it
        have = {(p.text, p.at) for p in old}
        pieces = list(old) + [p for p in doc.pieces if (p.text, p.at) not in have]
        return indexing.of_pieces(doc.id, pieces, doc.aliases)
    if not started:
        versions = {p.parent[0]: p.parent[1] for p in old if p.parent and p.parent[1]}
        if not all(p.parent and versions.get(p.parent[0]) == p.parent[1] for p in doc.pieces):
            return doc  # a parent without a hash is never taken for the stored version
        old = [p for p in old if not any(_overlap(p, q) for q in doc.pieces)]
    new = {(p.text, p.at) for p in doc.pieces}
    pieces = [p for p in old if (p.text, p.at) not in new] + list(doc.pieces)
    if all(p.at is not None for p in pieces):
        pieces.sort(key=lambda p: p.at or (0, 0))
    return indexing.of_pieces(doc.id, pieces, doc.aliases)


def _overlap(a: Piece, b: Piece) -> bool:
    """Two pieces of one parent whose character ranges overlap (the same passage split
    again)."""
    if a.parent != b.parent or a.at is None or b.at is None or a.at[0] != b.at[0]:
        return False
    return a.at[1] < b.at[1] + len(b.text) and b.at[1] < a.at[1] + len(a.text)


def older_ids(store: GraphStore, doc: Document) -> list[str]:
    """Stored documents that are older versions of ``doc`` under another id: its
    ``aliases`` and their numbered forms ``alias#0``, ``alias#1``, ... (how earlier
    releases named a source's pieces)."""
    found: list[str] = []
    for alias in doc.aliases:
        if alias != doc.id and store.document_hash(alias) is not None:
            found.append(alias)
        n = 0
        while store.document_hash(f"{alias}#{n}") is not None:
            found.append(f"{alias}#{n}")
            n += 1
    return [x for x in dict.fromkeys(found) if x != doc.id]


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
        replaces = {d.id: p.replaces[d.id] for d in docs if d.id in p.replaces}
        parts.append(Plan(docs, chunks, p.unchanged if i == 0 else 0, replaces=replaces))
    return parts


def combine(p: Plan, reports: list[IndexReport], ledger: CostLedger) -> IndexReport:
    """One report for the whole insert from its batches' reports."""
    total = IndexReport(0, p.unchanged, 0, 0, 0, 0, 0, ledger, 0, p.empty, p.duplicates)
    for r in reports:
        total = plus_written(total, r)
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
        done = 0  # the chunks of the batches before (each is written before the next is)
        for part in split(self.plan, self.cfg.insert_batch_documents):
            yield part, offset_progress(self.progress, done, len(self.plan.chunks))
            done += len(part.chunks)

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
    extractions: list[tuple[Extraction, bool]] | workers.Pending | indexing.Prepared,
    ledger: CostLedger,
    embed_progress: Callable[[int, int], None] | None = None,
) -> IndexReport:
    """Build the graph of the plan, then write it in one atomic store step that also removes
    the old version of a changed document and carries its memory over
    (:mod:`.memory.carry`): a failure (embedding, store) leaves the old version and its
    memory as they were. ``embed_progress(done, total)`` follows the embedding.
    ``extractions`` still being made (zero-token: :mod:`.workers`) are waited for once the
    chunks are embedded; a :class:`.indexing.Prepared` (:func:`ahead`) was embedded
    already."""
    changed = {
        d.id: [d.id] * (store.document_hash(d.id) is not None) + p.replaces.get(d.id, [])
        for d in p.fresh
    }
    changed = {k: v for k, v in changed.items() if v}
    if isinstance(extractions, indexing.Prepared):
        made, fell_back = extractions, 0
    elif isinstance(extractions, workers.Pending):  # zero-token: no LLM reply to fall back from
        made, fell_back = prepared(p, extractions, store, embedder, cfg, embed_progress), 0
    else:
        found = [x for x, _ in extractions]
        made = indexing.prepare(p.chunks, found, store, embedder, cfg, embed_progress)
        made.tokens = indexing.source_tokens(p.chunks)
        fell_back = sum(1 for _, fb in extractions if fb)
    batch = indexing.graph_of(made, store, embedder, cfg)
    tokens = made.tokens or 0
    moves, links = carry.moves(store, changed, batch.chunks, batch.edges) if changed else ({}, [])
    memory = store.add_graph(
        replace=[old for olds in changed.values() for old in olds],
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
        source_tokens=tokens,
        costs=ledger,
        fallback_chunks=fell_back,
        memory=dict(memory or {}),
    )


def prepared(
    p: Plan,
    found: workers.Pending,
    store: GraphStore,
    embedder: Embedder,
    cfg: IndexConfig,
    progress: Callable[[int, int], None] | None,
    earlier: set[str] | None = None,
) -> indexing.Prepared:
    """A zero-token batch embedded (:func:`.indexing.prepare`) while its extraction
    (``found``) is made, with the source tokens the extraction counted."""
    made = indexing.prepare(
        p.chunks, lambda: [x for x, _ in found.result()], store, embedder, cfg, progress, earlier
    )
    made.tokens = found.tokens()
    return made


def embeds_ahead(setting: bool | None, embedder: Embedder) -> bool:
    """Whether an insert embeds ahead (``IndexConfig.embed_ahead``): as set, else unless the
    embedder says it computes on this machine's CPU (``cpu_bound``: the packaged ONNX model,
    a sentence-transformers model on the CPU), where the merge and the write would take
    cores from it."""
    if setting is not None:
        return setting
    return not getattr(embedder, "cpu_bound", False)


def ahead(
    run: Batches,
    store: GraphStore,
    embedder: Embedder,
    cfg: IndexConfig,
    extractor: workers.Workers,
    embed_progress: Callable[[], Callable[[int, int], None] | None],
) -> Iterator[tuple[Plan, indexing.Prepared]]:
    """A zero-token insert's batches, each with its :class:`.indexing.Prepared`, the next
    batch extracted and embedded on a thread while the caller builds and writes this one
    (``IndexConfig.embed_ahead``): the embedder is busy while the graph is merged and
    written. Every embedder call is made on that one thread, in the serial insert's order
    and with the same texts, so the vectors and the graph are the serial insert's.
    Closing the iterator (the caller's write failed) waits for the batch under way and
    drops it; its embedding error is raised when its batch is reached."""
    earlier: set[str] = set()  # the names of the batches prepared so far

    def prep(part: Plan, prog: Callable[[int, int], None] | None) -> indexing.Prepared:
        found = extractor.start(part.chunks, cfg.max_entities_per_chunk, prog)
        return prepared(part, found, store, embedder, cfg, embed_progress(), earlier)

    parts = iter(run)
    pool = ThreadPoolExecutor(1, thread_name_prefix="remindrag-embed-ahead")
    try:
        nxt = next(parts, None)
        future = pool.submit(prep, *nxt) if nxt is not None else None
        while future is not None and nxt is not None:
            after = next(parts, None)  # queued: it starts as soon as this batch is made
            following = pool.submit(prep, *after) if after is not None else None
            made = future.result()
            yield nxt[0], made
            nxt, future = after, following
    finally:  # done, failed, or closed by the caller: nothing is left running
        pool.shutdown(wait=True, cancel_futures=True)


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
