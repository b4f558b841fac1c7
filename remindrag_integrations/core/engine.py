"""``ReMindRAG``: the framework-free engine, a facade over the pipeline's stages.

Each operation is one sans-IO step (:mod:`.steps`): the sync methods run it with ``drive``,
the ``a``-prefixed twins with ``adrive``. Where each stage lives: ``ARCHITECTURE.md``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..adapters import embedder_record
from ..adapters.embeddings import as_embedder, identity_of
from ..adapters.llm import as_chat_llm
from ..stores import InMemoryGraphStore, open_store
from . import answer as answering
from . import arguments, persist, pipeline
from . import insert as inserting
from .config import IndexConfig, RetrievalConfig
from .errors import (
    EmbeddingError,
    InvalidArgumentError,
    NotCopyableError,
    StoreNotFoundError,
    UnknownTraceError,
)
from .memory import teach as teaching
from .memory import write as memory_write
from .memory.admin import MemoryAdmin
from .memory.assure import assure
from .memory.filter import Support, citations, llm_filter, similarity_filter
from .memory.teach import Pairs, TeachReport
from .navigate.llm import LLMNavigator
from .navigate.zero_token import ZeroTokenNavigator
from .progress import ProgressFn, as_progress, tqdm_bar
from .prompts import Prompts
from .protocols import ChatLLM, GraphStore, TraceClaims, reading
from .steps import (
    LLMDecider,
    NoLLM,
    Runtime,
    Step,
    adrive,
    adrive_many,
    drive,
    drive_many,
)
from .types import (
    Answer,
    CostLedger,
    DeleteReport,
    Document,
    IndexReport,
    MemoryStats,
    MemoryWrite,
    Retrieval,
    Trace,
)

log = logging.getLogger(__name__)


def _embedding_bar(progress: Any) -> ProgressFn | None:
    """With ``progress=True``, a bar for one batch's embedding (after its extraction bar)."""
    return tqdm_bar("embedding", "text") if progress is True else None


class ReMindRAG(MemoryAdmin):
    """ReMindRAG over a graph store.

    ``llm`` is any LangChain chat model, LlamaIndex LLM, ``str -> str`` callable or
    :class:`~.protocols.ChatLLM`; ``None`` selects zero-token mode. ``embeddings`` is a
    sentence-transformers name or path, a LangChain / LlamaIndex embedding object or an
    :class:`~.protocols.Embedder`; ``None`` loads the packaged all-MiniLM-L6-v2.
    """

    def __init__(
        self,
        llm: Any = None,
        embeddings: Any = None,
        store: GraphStore | str | None = None,
        index_config: IndexConfig | None = None,
        retrieval_config: RetrievalConfig | None = None,
        max_cached_traces: int = 1000,
        prompts: Prompts | None = None,
    ) -> None:
        self.llm: ChatLLM | None = as_chat_llm(llm)
        self.embedder = as_embedder(embeddings)
        self.store: GraphStore = open_store(store)  # None, a saved dir or postgresql:// DSN
        self.index_config = index_config or IndexConfig()
        self.retrieval_config = retrieval_config or RetrievalConfig()
        self.prompts = prompts or Prompts()
        self._traces: OrderedDict[str, Trace] = OrderedDict()
        self._max_cached_traces = max_cached_traces
        self._lock = threading.Lock()
        self._writing: set[str] = set()  # traces whose memorize is under way
        self._writes = {"applied": 0, "skipped": 0}
        self._carried = {"kept": 0, "moved": 0, "dropped": 0}  # by document updates
        self._probe: tuple[Any, list[float] | None] = (None, None)  # embedder, fingerprint

    def __repr__(self) -> str:
        llm = "None (zero-token)" if self.llm is None else type(self.llm).__name__
        emb = identity_of(self.embedder) or type(self.embedder).__name__
        store = type(self.store).__name__
        namespace = getattr(self.store, "namespace", None)
        if namespace not in (None, "default"):
            store += f"[{namespace}]"
        try:
            docs = f", documents={len(self.store.document_ids())}"
        except Exception:  # a closed or unreachable store: the repr still works
            docs = ""
        k = self.retrieval_config.k
        return f"ReMindRAG(llm={llm}, embeddings={emb!r}, store={store}{docs}, k={k})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise NotCopyableError(
            "a ReMindRAG engine (and a ReMindRetriever holding one) cannot be pickled or "
            "copied: it holds loaded models, a store and locks. Share the one object between "
            "threads (it is thread-safe), or save(path) it and load(path) it where needed"
        )

    # --- plumbing ------------------------------------------------------------------------
    def _setup(self, llm: Any, overrides: dict[str, Any]) -> tuple[RetrievalConfig, Runtime]:
        """Per-call setup: the config with overrides and the runtime of the LLM in charge
        (the call's, else the engine's; none: zero-token)."""
        cfg = self.retrieval_config.with_overrides(**overrides)
        chosen = as_chat_llm(llm) or self.llm
        decider = LLMDecider(chosen, cfg.llm_timeout) if chosen is not None else NoLLM()
        return cfg, Runtime(decider, self.embedder, self.store.dim)

    @staticmethod
    def _uses_llm(rt: Runtime) -> bool:
        return isinstance(rt.decider, LLMDecider)

    def _navigator(self, rt: Runtime) -> Any:
        return LLMNavigator(self.prompts.traversal) if self._uses_llm(rt) else ZeroTokenNavigator()

    # --- insert --------------------------------------------------------------------------
    @staticmethod
    def _documents(documents: Any) -> Iterable[Any]:
        if isinstance(documents, Document):
            raise InvalidArgumentError("insert takes a list of documents, not one document")
        return arguments.items(documents, "documents")

    def _batches(self, documents: Iterable[Any], progress: Any, on_batch: Any) -> tuple:
        documents = self._documents(documents)
        p = inserting.plan(self.store, documents, self.index_config)
        _, rt = self._setup(None, {})
        bar = as_progress(progress, "indexing") if p.chunks else None
        steps = inserting.Batches(p, self.index_config, bar, on_batch)
        return steps, rt, (self.prompts.extraction, self._uses_llm(rt))

    def insert(
        self,
        documents: Iterable[Any],
        *,
        progress: bool | ProgressFn | None = None,
        on_batch: Any = None,
    ) -> IndexReport:
        """Index documents (``Document``, str, or ``(id, text[, metadata])``). Unchanged
        documents are skipped; changed ones replace their old version. Extraction runs up to
        ``index_config.max_concurrency`` calls at once. Documents are built and written in
        batches of ``index_config.insert_batch_documents`` (``on_batch(report)`` after each):
        a document is written only if every chunk of it was extracted, and an interrupted
        insert keeps the batches it finished (run it again to continue). ``progress=True``
        draws two progress bars (tqdm, on stderr): the chunks extracted, then the texts of
        each batch embedded; a function ``(done, total)`` is called with the chunks
        extracted."""
        run, rt, how = self._batches(documents, progress, on_batch)
        cfg = self.index_config
        for part, prog in run:
            steps = part.extraction_steps(cfg, *how)
            found = drive_many(steps, rt, run.ledger, cfg.max_concurrency, prog)
            args = (self.store, self.embedder, cfg, part, found, run.ledger)
            run.done(inserting.commit(*args, _embedding_bar(progress)))
        return self._carry_counts(run.report())

    async def ainsert(
        self,
        documents: Iterable[Any],
        *,
        progress: bool | ProgressFn | None = None,
        on_batch: Any = None,
    ) -> IndexReport:
        """:meth:`insert` on the event loop (building and writing run in a worker thread)."""
        import asyncio

        run, rt, how = self._batches(documents, progress, on_batch)
        cfg = self.index_config
        for part, prog in run:
            steps = part.extraction_steps(cfg, *how)
            found = await adrive_many(steps, rt, run.ledger, cfg.max_concurrency, prog)
            commit = inserting.commit
            args = (self.store, self.embedder, cfg, part, found, run.ledger)
            run.done(await asyncio.to_thread(commit, *args, _embedding_bar(progress)))
        return self._carry_counts(run.report())

    def _carry_counts(self, report: IndexReport) -> IndexReport:
        with self._lock:
            for k, v in report.memory.items():
                self._carried[k] = self._carried.get(k, 0) + v
        log.info(
            "indexed %d documents (%d unchanged), %d chunks, %d entities, %d relations",
            report.documents,
            report.skipped_documents,
            report.chunks,
            report.entities_added,
            report.relations,
        )
        return report

    def estimate_insert(self, documents: Iterable[Any]) -> dict[str, int]:
        """What :meth:`insert` would cost: documents and chunks to (re)index, LLM calls and
        expected tokens, priced with this engine's extraction prompt."""
        p = inserting.plan(self.store, self._documents(documents), self.index_config)
        return inserting.estimate(p, self.prompts.extraction, self.llm is not None)

    def delete(self, doc_ids: Iterable[str]) -> DeleteReport:
        """Remove documents (by the ids they were inserted with) with their chunks, anchors,
        the entities only they mentioned, and those nodes' edges and edge memory. An id the
        store does not hold is no error: it is listed in ``not_found`` (and logged as a
        warning), the others are deleted. A list is required (one string is an
        :class:`InvalidArgumentError`)."""
        ids = list(dict.fromkeys(arguments.id_list(doc_ids, "doc_ids") or []))
        missing = [d for d in ids if self.store.document_hash(d) is None]
        before = self.store.touched_edges()
        removed = self.store.delete_documents(ids)
        with self._lock:
            self._carried["dropped"] += max(0, before - self.store.touched_edges())
        if missing:
            log.warning("delete: %d unknown document id(s): %s", len(missing), ", ".join(missing))
        log.info("deleted %d documents, %d chunks", removed["documents"], removed["chunks"])
        return DeleteReport(
            documents=removed["documents"],
            chunks=removed["chunks"],
            nodes=removed["nodes"],
            edges=removed["edges"],
            not_found=missing,
        )

    # --- retrieve and answer ---------------------------------------------------------------
    def _retrieve_step(
        self, query: str, cfg: RetrievalConfig, rt: Runtime, ledger: CostLedger
    ) -> Step:
        with reading(self.store) as view:  # one version of the graph for the whole query
            retrieval = yield from pipeline.retrieve(
                view, query, cfg, self._navigator(rt), ledger, self.prompts.pre_query
            )
        self._remember(retrieval.trace)
        return retrieval

    def _answer_step(
        self, query: str, cfg: RetrievalConfig, rt: Runtime, ledger: CostLedger
    ) -> Step:
        retrieval = yield from self._retrieve_step(query, cfg, rt, ledger)
        return (
            yield from answering.answer(query, retrieval, self._uses_llm(rt), self.prompts.answer)
        )

    def _call(self, make: Callable[..., Step], query: str, llm: Any, overrides: dict) -> tuple:
        arguments.query(query)
        cfg, rt = self._setup(llm, overrides)
        ledger = CostLedger()
        return make(query, cfg, rt, ledger), rt, ledger

    def retrieve(self, query: str, *, llm: Any = None, **overrides: Any) -> Retrieval:
        """Seeds, memory replay, then the guided walk. ``llm`` overrides the engine's LLM for
        this call; any :class:`RetrievalConfig` field can be overridden too."""
        return drive(*self._call(self._retrieve_step, query, llm, overrides))

    async def aretrieve(self, query: str, *, llm: Any = None, **overrides: Any) -> Retrieval:
        return await adrive(*self._call(self._retrieve_step, query, llm, overrides))

    def answer(self, query: str, *, llm: Any = None, **overrides: Any) -> Answer:
        """Retrieve, then answer from the chunks and triples, citing chunk ids. Without an LLM
        the answer is the most relevant retrieved sentence."""
        return drive(*self._call(self._answer_step, query, llm, overrides))

    async def aanswer(self, query: str, *, llm: Any = None, **overrides: Any) -> Answer:
        return await adrive(*self._call(self._answer_step, query, llm, overrides))

    # --- traces --------------------------------------------------------------------------
    def _remember(self, trace: Trace) -> None:
        with self._lock:
            self._traces[trace.trace_id] = trace
            while len(self._traces) > self._max_cached_traces:
                self._traces.popitem(last=False)
        self.store.save_trace(trace.to_dict())
        log.debug(
            "retrieved %d chunks for %r (trace %s, stop: %s, %d decisions)",
            len(trace.chunk_ids),
            trace.query,
            trace.trace_id,
            trace.stop_reason,
            trace.decisions,
        )

    def trace(self, trace_id: str) -> Trace:
        if not isinstance(trace_id, str) or not arguments.storable(trace_id):
            raise UnknownTraceError(f"unknown trace id {trace_id!r}")
        with self._lock:
            found = self._traces.get(trace_id)
        if found is not None:
            return found
        data = self.store.load_trace(trace_id)
        if data is None:
            raise UnknownTraceError(f"unknown trace id {trace_id!r}")
        return Trace.from_dict(data)

    # --- memory writes -------------------------------------------------------------------
    def _memorize_step(
        self,
        trace: Trace,
        answer: str | None,
        supporting: Sequence[str] | None,
        cited: list[str] | None,
        rt: Runtime,
    ) -> Step:
        cfg, judged = self.retrieval_config, True
        if supporting is not None:  # the caller's word on what helped, not on what did not
            support = Support.of(list(supporting))
            return (yield from self._named_write(trace, support, True))
        support, ignored = citations(trace, answer, cited)
        if cfg.memorize_judge == "citations" and support.chunks:  # the answer's word, no LLM
            result = yield from self._named_write(trace, support, True, named=False)
            return replace(result, ignored_citations=ignored)
        if not trace.subgraph_edges:
            return memory_write.skipped(trace, "nothing was traversed")
        elif self._uses_llm(rt):
            support = yield from llm_filter(
                trace, self.store, answer or "", cfg.prompt.chunk_chars, self.prompts.filter
            )
        elif cfg.self_memorize == "off":
            return memory_write.skipped(trace, "no judge and self_memorize='off'")
        else:  # no judge: remember without penalising, unless self_memorize="full"
            top = len(trace.chunk_ids) if cfg.self_memorize == "cache" else cfg.navigator.filter_top
            support = yield from similarity_filter(trace, self.store, top)
            judged = cfg.self_memorize == "full"
        result = memory_write.write(
            trace, self.store, support, max_depth=cfg.memory.max_bridge_hops, penalise=judged
        )
        return replace(result, ignored_citations=ignored)

    def _memorizing(
        self, trace_id: str, answer: Any, supporting: Any, cited: Any, llm: Any
    ) -> tuple:
        supporting = arguments.id_list(supporting, "supporting", optional=True)
        cited = arguments.id_list(cited, "cited", optional=True)
        if answer is not None and not isinstance(answer, str):
            raise InvalidArgumentError(f"answer must be a string, got {type(answer).__name__}")
        trace, ledger = self.trace(trace_id), CostLedger()
        _, rt = self._setup(llm, {})

        def step() -> Step:
            with self._lock:  # exactly once per trace, whatever runs concurrently
                busy = trace.memorized or trace.trace_id in self._writing
                self._writing.add(trace.trace_id)
            claims = self.store if isinstance(self.store, TraceClaims) else None
            if not busy and claims is not None and not claims.claim_trace(trace.trace_id):
                busy = True  # another process holds or finished it (a shared store)
                with self._lock:
                    self._writing.discard(trace.trace_id)
            if busy:
                return self._count(memory_write.skipped(trace, "already memorized"))
            result = None
            try:
                result = yield from self._memorize_step(trace, answer, supporting, cited, rt)
                trace.costs.merge(ledger)
                return self._record(trace, result)
            finally:
                if claims is not None and not (result is not None and result.applied):
                    claims.release_trace(trace.trace_id)
                with self._lock:
                    self._writing.discard(trace.trace_id)

        return step(), rt, ledger

    def memorize(
        self,
        trace_id: str,
        answer: str | None = None,
        supporting: Sequence[str] | None = None,
        *,
        cited: Sequence[str] | None = None,
        llm: Any = None,
    ) -> MemoryWrite:
        """Write the experience of one retrieval into edge memory (docs/method.md §3), once per trace.

        The support — what helped — is, in this order: ``supporting`` (chunk or edge ids a
        person or a known answer names; each named chunk comes back in the top ``k`` for the
        question afterwards, through a learned edge where the graph has no path); else the
        chunks the ``answer`` cites (``[c-…]``, as the answer prompt asks) plus ``cited``
        (e.g. the source nodes a LlamaIndex response used), when
        ``retrieval_config.memorize_judge`` is ``"citations"`` (the default; no LLM call;
        cited ids the retrieval did not read are ignored and listed in
        ``ignored_citations``); else the judge: the LLM filter, or without an LLM the
        ``self_memorize`` policy."""
        return drive(*self._memorizing(trace_id, answer, supporting, cited, llm))

    async def amemorize(
        self,
        trace_id: str,
        answer: str | None = None,
        supporting: Sequence[str] | None = None,
        *,
        cited: Sequence[str] | None = None,
        llm: Any = None,
    ) -> MemoryWrite:
        return await adrive(*self._memorizing(trace_id, answer, supporting, cited, llm))

    def _named_write(
        self, trace: Trace, support: Support, helpful: bool, *, named: bool = True
    ) -> Step:
        """The write of support the caller's word gives (citations, thumbs, ``supporting=``);
        with ``named`` (a person named the ids) every id is checked first and each named
        chunk is made to come back for the question (:mod:`.memory.assure`)."""
        cfg = self.retrieval_config
        for c in support.chunks if named else ():  # every named id known before any write
            self.store.get_chunk(c)
        for e in support.edges if named else ():
            self.store.get_edge(e)
        result = memory_write.write(
            trace,
            self.store,
            support,
            helpful=helpful,
            max_depth=cfg.memory.max_bridge_hops,
            penalise=cfg.named_support_penalises,
        )
        if not (named and helpful and support.chunks):
            return result
        q = np.asarray(trace.query_embedding, dtype=np.float32)
        return (yield from assure(self.store, trace.query, q, result, support.chunks, cfg))

    def feedback(
        self, trace_id: str, helpful: bool, chunk_ids: Sequence[str] | None = None
    ) -> MemoryWrite:
        """A user's thumbs up or down on a retrieval: the same write as :meth:`memorize` with
        the user's word as the support (default: every chunk the walk read). Up enhances the
        paths to ``chunk_ids`` (bridged when the walk missed them, at most
        ``memory.max_bridge_hops`` hops); it penalises the rest of the subgraph only with
        ``named_support_penalises``. Down penalises the paths to
        ``chunk_ids``, or every subgraph edge. Named ``chunk_ids`` with a thumbs up come
        back in the top ``k`` for the question afterwards (a learned edge where needed)."""
        arguments.flag(helpful, "helpful")
        chunk_ids = arguments.id_list(chunk_ids, "chunk_ids", optional=True)
        trace = self.trace(trace_id)
        if chunk_ids is None:  # the walk's own chunks: nothing named to check or bring back
            support = Support(list(trace.chunk_ids)) if helpful else Support()
            step = self._named_write(trace, support, helpful, named=False)
        else:
            step = self._named_write(trace, Support.of(list(chunk_ids)), helpful)
        _, rt = self._setup(None, {})
        return self._record(trace, drive(step, rt, CostLedger()))

    def _teaching(self, pairs: Pairs, progress: Any, overrides: dict) -> tuple:
        cfg, rt = self._setup(None, overrides)
        pairs = arguments.items(pairs, "pairs")
        return teaching.teach(self.store, pairs, cfg, progress), rt, CostLedger()

    def teach(self, pairs: Pairs, *, progress: Any = None, **overrides: Any) -> TeachReport:
        """Teach memory known answers with no LLM call (:mod:`.memory.teach`): the paths from
        each question's seeds to its passages are enhanced, never penalised. Bad pairs raise
        :class:`InvalidTeachPairError` before any write; the report lists what was not
        found or not reachable. ``progress(done, total)`` is called per pair."""
        bar = as_progress(progress, "teaching", "pair")
        return self._taught(drive(*self._teaching(pairs, bar, overrides)))

    async def ateach(self, pairs: Pairs, *, progress: Any = None, **overrides: Any) -> TeachReport:
        bar = as_progress(progress, "teaching", "pair")
        return self._taught(await adrive(*self._teaching(pairs, bar, overrides)))

    def _taught(self, report: TeachReport) -> TeachReport:
        with self._lock:
            self._writes["applied"] += report.taught
            self._writes["skipped"] += report.pairs - report.taught
        log.info("taught %d of %d pairs", report.taught, report.pairs)
        return report

    def _record(self, trace: Trace, result: MemoryWrite) -> MemoryWrite:
        """Mark and save the trace after an applied write; count the write either way."""
        if result.applied:
            trace.memorized, trace.memory_result = True, result.to_dict()
            self.store.save_trace(trace.to_dict())
        return self._count(result)

    def _count(self, result: MemoryWrite) -> MemoryWrite:
        with self._lock:
            self._writes["applied" if result.applied else "skipped"] += 1
        log.debug("memory write %s: %s", result.trace_id, result.to_dict())
        return result

    def memory_stats(self) -> MemoryStats:
        return MemoryStats(
            self.store.touched_edges(),
            self._writes["applied"],
            self._writes["skipped"],
            **self._carried,
        )

    # --- persistence ---------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Persist the store (atomically: a new generation, then one rename), the
        configuration and which embedder built it (:mod:`..adapters.embedder_record`).
        Saving again where this engine's store was loaded from or saved to updates it; a
        folder holding another store raises :class:`StoreExistsError` unless ``overwrite``
        (which replaces it, learned memory included), and a folder of other files is never
        written into."""
        arguments.path(directory, "directory")
        used = embedder_record.record(self.embedder, self.store.dim, self._fingerprint())
        root = persist.save(
            self.store,
            self.index_config,
            self.retrieval_config,
            directory,
            used,
            overwrite=overwrite,
        )
        log.info("saved the store to %s", root)
        return root

    def _fingerprint(self) -> list[float] | None:
        """The embedder's probe vector for the saved record: one call per embedder (kept),
        none for an embedder its name rebuilds; a provider failing now leaves it out of this
        save rather than failing the save (the next save tries again)."""
        if self._probe[0] is self.embedder:
            return self._probe[1]
        if embedder_record.by_name(self.embedder):
            return None
        try:
            probe = embedder_record.fingerprint(self.embedder)
        except EmbeddingError:
            return None
        self._probe = (self.embedder, probe)
        return probe

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike[str],
        *,
        llm: Any = None,
        embeddings: Any = None,
        store: GraphStore | str | None = None,
    ) -> ReMindRAG:
        """Load what :meth:`save` wrote, with the embedder it recorded unless ``embeddings``
        is given (checked against the record). Raises :class:`StoreNotFoundError` when there
        is no such directory, :class:`StoreCorruptError` on damage."""
        arguments.path(directory, "directory")
        if store is None and not Path(directory).is_dir():
            raise StoreNotFoundError(f"no saved engine at {directory}: no such directory")
        index_cfg, retrieval_cfg = persist.load_config(directory)
        recorded = persist.load_embedder(directory)
        embedder, probe = embedder_record.embedder_for_record(recorded, embeddings)
        engine = cls(
            llm=llm,
            embeddings=embedder,
            store=store if store is not None else InMemoryGraphStore.load(directory),
            index_config=index_cfg,
            retrieval_config=retrieval_cfg,
        )
        if probe is not None:
            engine._probe = (engine.embedder, probe)
        return engine
