"""``ReMindRAG``: the framework-free engine (insert, retrieve, answer, memorize, save, load).

Each public operation is written once, as a sans-IO step (a generator of LLM asks and embedding
requests); the sync methods run it with :func:`~.llms.drive`, the ``a``-prefixed twins with
:func:`~.llms.adrive`.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from . import indexing
from .config import IndexConfig, RetrievalConfig
from .embeddings import as_embedder
from .llms import Decider, Embed, LLMDecider, Step, adrive, as_chat_llm, drive
from .memorize import bridge_paths, filter_step, split_edges
from .prompts import Prompts, parse_citations, parse_pre_query
from .protocols import ChatLLM, GraphStore
from .stores import InMemoryGraphStore, open_store
from .text import split_sentences
from .traversal import Walk, find_seeds, path_triples, replay, traverse
from .types import (
    Answer,
    CostLedger,
    Document,
    IndexReport,
    InvalidQueryError,
    LLMError,
    LLMOutputError,
    MemoryStats,
    MemoryWrite,
    Retrieval,
    RetrievedChunk,
    StoreCorruptError,
    Trace,
    UnknownTraceError,
)
from .zero_token import ZeroTokenDecider

ProgressFn = Callable[[int, int], None]


class ReMindRAG:
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
        self._writes_applied = 0
        self._writes_skipped = 0

    # --- plumbing ------------------------------------------------------------------------
    def _decider(self, llm: ChatLLM | None, cfg: RetrievalConfig | None = None) -> Decider:
        cfg = cfg or self.retrieval_config
        chosen = llm if llm is not None else self.llm
        if chosen is None:
            return ZeroTokenDecider(cfg.nav_filter_top)
        return LLMDecider(chosen, cfg.llm_timeout)

    def _run(self, step: Step, decider: Decider, ledger: CostLedger) -> Any:
        return drive(step, decider, ledger, self.embedder, self.store.dim)

    async def _arun(self, step: Step, decider: Decider, ledger: CostLedger) -> Any:
        return await adrive(step, decider, ledger, self.embedder, self.store.dim)

    # --- insert --------------------------------------------------------------------------
    def _plan(self, documents: Iterable[Any]) -> tuple[list[Document], list, int]:
        docs = indexing.as_documents(documents)
        indexing.validate(docs, self.index_config)
        fresh = [d for d in docs if self.store.document_hash(d.id) != indexing.content_hash(d)]
        chunks = [c for d in fresh for c in indexing.make_chunks(d, self.index_config)]
        return fresh, chunks, len(docs) - len(fresh)

    def _commit(
        self,
        fresh: list[Document],
        chunks: list,
        extractions: list,
        skipped: int,
        ledger: CostLedger,
    ) -> IndexReport:
        changed = [d.id for d in fresh if self.store.document_hash(d.id) is not None]
        if changed:  # an update: the old version goes first (its memory with it)
            self.store.delete_documents(changed)
        batch = indexing.build_graph(
            chunks, [x for x, _ in extractions], self.store, self.embedder, self.index_config
        )
        self.store.add_graph(
            documents=[(d.id, indexing.content_hash(d), d.metadata) for d in fresh],
            chunks=batch.chunks,
            nodes=batch.nodes,
            embeddings=batch.embeddings,
            edges=batch.edges,
            entity_aliases=batch.aliases,
        )
        return IndexReport(
            documents=len(fresh),
            skipped_documents=skipped,
            chunks=len(chunks),
            entities_added=batch.entities_added,
            entities_merged=batch.entities_merged,
            relations=batch.relations,
            source_tokens=indexing.source_tokens(chunks),
            costs=ledger,
            fallback_chunks=sum(1 for _, fb in extractions if fb),
        )

    def insert(
        self, documents: Iterable[Any], *, progress: ProgressFn | None = None
    ) -> IndexReport:
        """Index documents (``Document``, str, or ``(id, text[, metadata])``). Unchanged
        documents are skipped; changed ones replace their old version. Extraction runs up to
        ``index_config.max_concurrency`` calls at once. Nothing is written unless every chunk
        was extracted."""
        fresh, chunks, skipped = self._plan(documents)
        ledger, decider = CostLedger(), self._decider(None)
        lock, done = threading.Lock(), [0]

        def extract(chunk: Any) -> Any:
            sub = CostLedger()
            out = self._run(
                indexing.extraction_step(chunk, self.index_config, self.prompts.extraction),
                decider,
                sub,
            )
            with lock:
                ledger.merge(sub)
                done[0] += 1
                if progress:
                    progress(done[0], len(chunks))
            return out

        with ThreadPoolExecutor(self.index_config.max_concurrency) as pool:
            extractions = list(pool.map(extract, chunks))
        return self._commit(fresh, chunks, extractions, skipped, ledger)

    async def ainsert(
        self, documents: Iterable[Any], *, progress: ProgressFn | None = None
    ) -> IndexReport:
        fresh, chunks, skipped = self._plan(documents)
        ledger, decider = CostLedger(), self._decider(None)
        sem = asyncio.Semaphore(self.index_config.max_concurrency)
        done = [0]

        async def extract(chunk: Any) -> Any:
            async with sem:
                out = await self._arun(
                    indexing.extraction_step(chunk, self.index_config, self.prompts.extraction),
                    decider,
                    ledger,
                )
            done[0] += 1
            if progress:
                progress(done[0], len(chunks))
            return out

        extractions = await asyncio.gather(*(extract(c) for c in chunks))
        return await asyncio.to_thread(
            self._commit, fresh, chunks, list(extractions), skipped, ledger
        )

    def delete(self, doc_ids: Iterable[str]) -> dict[str, int]:
        """Remove documents with their chunks, anchors, orphaned entities and edge memory."""
        return self.store.delete_documents(list(doc_ids))

    # --- retrieve ------------------------------------------------------------------------
    def _pre_query(self, query: str, cfg: RetrievalConfig) -> Step:
        if not cfg.pre_query:
            return [query]
        prompt = self.prompts.pre_query.format(query=query, max_subquestions=cfg.max_subquestions)
        try:
            reply = yield from _ask("pre_query", prompt, {"query": query})
            need, subs = parse_pre_query(reply, cfg.max_subquestions)
        except (LLMOutputError, LLMError):
            return [query]  # when in doubt, retrieve with the question itself
        return (subs or [query]) if need else []

    def _retrieve_step(
        self, query: str, cfg: RetrievalConfig, structured: bool, ledger: CostLedger
    ) -> Step:
        """``ledger`` is the one the driver records into; the trace keeps it."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidQueryError(f"the query must be a non-empty string, got {query!r}")
        subqs = yield from self._pre_query(query, cfg)
        vecs = yield Embed((query, *[s for s in subqs if s != query]))
        t0 = time.perf_counter()
        walk = Walk(self.store, vecs[0], cfg, self.prompts.traversal)
        for s in find_seeds(self.store, vecs if subqs else vecs[:0], cfg.seeds):
            walk.add(s, None, None, "seed")
        t1 = time.perf_counter()
        replay(walk)
        t2 = time.perf_counter()
        if not walk.parents:
            walk.stop_reason = "no_retrieval_needed" if not subqs else "empty_graph"
        elif any(src == "replay" for src in walk.sources.values()) and not cfg.verify_replay:
            walk.stop_reason = "replay"
        else:
            yield from traverse(walk, query, structured)
        t3 = time.perf_counter()
        trace = Trace(
            trace_id=uuid.uuid4().hex,
            query=query,
            query_embedding=[float(x) for x in vecs[0]],
            seeds=[n for n, (p, _) in walk.parents.items() if p is None],
            replayed_edges=walk.replayed_edges,
            moves=walk.moves,
            parents=walk.parents,
            chunk_ids=walk.chunk_ids,
            costs=ledger,
            stop_reason=walk.stop_reason,
            subquestions=list(subqs),
            decisions=walk.asks,
        )
        chunks = self._rank(walk, cfg, vecs[0]) if walk.parents else []
        trace.timings_ms = {
            "seed_search": (t1 - t0) * 1e3,
            "replay": (t2 - t1) * 1e3,
            "bookkeeping": (time.perf_counter() - t3) * 1e3,
        }
        self._remember(trace)
        return Retrieval(query=query, chunks=chunks, triples=path_triples(walk), trace=trace)

    def _rank(self, walk: Walk, cfg: RetrievalConfig, q: np.ndarray) -> list[RetrievedChunk]:
        ids = walk.chunk_ids
        scored = sorted(zip(ids, walk.sims(ids)), key=lambda t: -t[1])
        out = [
            RetrievedChunk(self.store.get_chunk(c), s, walk.sources[c])  # type: ignore[arg-type]
            for c, s in scored
        ]
        if cfg.fill_to_k and len(out) < cfg.k:
            have = set(ids)
            for anchor, sim in self.store.search(q, cfg.k + len(have), ("anchor",)):
                cid = self.store.get_node(anchor).chunk_id
                if cid and cid not in have and len(out) < cfg.k:
                    have.add(cid)
                    out.append(RetrievedChunk(self.store.get_chunk(cid), sim, "dense_fill"))
        return out[: cfg.k]

    def _remember(self, trace: Trace) -> None:
        with self._lock:
            self._traces[trace.trace_id] = trace
            while len(self._traces) > self._max_cached_traces:
                self._traces.popitem(last=False)
        self.store.save_trace(trace.to_dict())

    def _call(
        self, llm: Any, overrides: dict[str, Any]
    ) -> tuple[RetrievalConfig, ChatLLM | None, Decider, CostLedger]:
        """Per-call setup: the config with overrides, the LLM in charge (None: zero-token),
        its decider and a fresh cost ledger."""
        cfg = self.retrieval_config.with_overrides(**overrides)
        chosen = as_chat_llm(llm) or self.llm
        return cfg, chosen, self._decider(chosen, cfg), CostLedger()

    def _retrieval(self, query: str, llm: Any, overrides: dict[str, Any]) -> tuple:
        cfg, chosen, decider, ledger = self._call(llm, overrides)
        return self._retrieve_step(query, cfg, chosen is None, ledger), decider, ledger

    def retrieve(self, query: str, *, llm: Any = None, **overrides: Any) -> Retrieval:
        """Seeds, memory replay, then the LLM-guided walk. ``llm`` overrides the engine's LLM
        for this call; any :class:`RetrievalConfig` field can be overridden too."""
        return self._run(*self._retrieval(query, llm, overrides))

    async def aretrieve(self, query: str, *, llm: Any = None, **overrides: Any) -> Retrieval:
        return await self._arun(*self._retrieval(query, llm, overrides))

    # --- answer --------------------------------------------------------------------------
    def _answer_step(
        self, query: str, cfg: RetrievalConfig, use_llm: bool, ledger: CostLedger
    ) -> Step:
        retrieval = yield from self._retrieve_step(query, cfg, not use_llm, ledger)
        known = {rc.chunk.id for rc in retrieval.chunks}
        if not retrieval.chunks:
            return Answer("I could not find anything relevant.", [], retrieval)
        if not use_llm:
            return (yield from self._extractive(query, retrieval))
        context = "\n\n".join(f"[{rc.chunk.id}] {rc.chunk.text}" for rc in retrieval.chunks)
        triples = "\n".join(f"- {t.relation}" for t in retrieval.triples) or "(none)"
        prompt = self.prompts.answer.format(chunks=context, triples=triples, query=query)
        try:
            text = yield from _ask("answer", prompt, {})
        except LLMError as exc:
            raise LLMError(f"answer generation failed (trace {retrieval.trace_id}): {exc}") from exc
        return Answer(text.strip(), parse_citations(text, known), retrieval)

    def _extractive(self, query: str, retrieval: Retrieval) -> Step:
        """Zero-token answer: the retrieved sentence closest to the question, cited."""
        sents = [
            (rc.chunk.id, rc.chunk.text[s:e])
            for rc in retrieval.chunks
            for s, e in split_sentences(rc.chunk.text)
        ]
        vecs = yield Embed((query, *(" ".join(t.split()) for _, t in sents)))
        best = int(np.argmax(vecs[1:] @ vecs[0]))
        cid, text = sents[best]
        return Answer(f"{' '.join(text.split())} [{cid}]", [cid], retrieval)

    def _answering(self, query: str, llm: Any, overrides: dict[str, Any]) -> tuple:
        cfg, chosen, decider, ledger = self._call(llm, overrides)
        return self._answer_step(query, cfg, chosen is not None, ledger), decider, ledger

    def answer(self, query: str, *, llm: Any = None, **overrides: Any) -> Answer:
        """Retrieve, then answer from the chunks and triples, citing chunk ids. Without an LLM
        the answer is the most relevant retrieved sentence."""
        return self._run(*self._answering(query, llm, overrides))

    async def aanswer(self, query: str, *, llm: Any = None, **overrides: Any) -> Answer:
        return await self._arun(*self._answering(query, llm, overrides))

    # --- memorize ------------------------------------------------------------------------
    def trace(self, trace_id: str) -> Trace:
        with self._lock:
            found = self._traces.get(trace_id)
        if found is not None:
            return found
        data = self.store.load_trace(trace_id)
        if data is None:
            raise UnknownTraceError(f"unknown trace id {trace_id!r}")
        return Trace.from_dict(data)

    def _memorize_step(
        self,
        trace_id: str,
        answer: str | None,
        supporting: Sequence[str] | None,
        ledger: CostLedger,
    ) -> Step:
        trace = self.trace(trace_id)
        if trace.memorized:
            return self._skip(trace, "already memorized")
        if not trace.subgraph_edges:
            return self._skip(trace, "nothing was traversed")
        if supporting is not None:
            chunks = [s for s in supporting if s.startswith("c-")]
            edges = [s for s in supporting if not s.startswith("c-")]
        else:
            q = np.asarray(trace.query_embedding, dtype=np.float32)
            scores = dict(
                zip(
                    trace.chunk_ids,
                    (float(x) for x in self.store.node_embeddings(trace.chunk_ids) @ q),
                )
            )
            chunks, edges = yield from filter_step(
                trace,
                self.store,
                answer or "",
                self.retrieval_config.chunk_chars_in_prompt,
                scores,
                self.prompts.filter,
            )
        effective, ineffective = split_edges(trace.parents, chunks, edges)
        if not effective:
            return self._skip(trace, "no supporting chunk or edge on the subgraph")
        self.store.update_memory(
            effective, ineffective, np.asarray(trace.query_embedding, dtype=np.float32)
        )
        write = MemoryWrite(
            trace.trace_id,
            True,
            effective,
            ineffective,
            [c for c in chunks if c in trace.parents],
            edges,
        )
        trace.memorized, trace.memory_result = True, write.to_dict()
        trace.costs.merge(ledger)
        self.store.save_trace(trace.to_dict())
        with self._lock:
            self._writes_applied += 1
        return write

    def _skip(self, trace: Trace, reason: str) -> MemoryWrite:
        with self._lock:
            self._writes_skipped += 1
        return MemoryWrite(trace.trace_id, False, [], [], [], [], reason)

    def _memorizing(
        self, trace_id: str, answer: str | None, supporting: Sequence[str] | None, llm: Any
    ) -> tuple:
        ledger = CostLedger()
        step = self._memorize_step(trace_id, answer, supporting, ledger)
        return step, self._decider(as_chat_llm(llm)), ledger

    def memorize(
        self,
        trace_id: str,
        answer: str | None = None,
        supporting: Sequence[str] | None = None,
        *,
        llm: Any = None,
    ) -> MemoryWrite:
        """Write the experience of one retrieval into edge memory (SPEC §3). ``supporting``
        (chunk or edge ids, e.g. citations or user feedback) skips the LLM filter call."""
        return self._run(*self._memorizing(trace_id, answer, supporting, llm))

    async def amemorize(
        self,
        trace_id: str,
        answer: str | None = None,
        supporting: Sequence[str] | None = None,
        *,
        llm: Any = None,
    ) -> MemoryWrite:
        return await self._arun(*self._memorizing(trace_id, answer, supporting, llm))

    def feedback(
        self, trace_id: str, helpful: bool, chunk_ids: Sequence[str] | None = None
    ) -> MemoryWrite:
        """A user's thumbs up or down on a retrieval.

        Up: enhance the paths to ``chunk_ids`` (default: every chunk the walk read) and
        penalise the rest of the subgraph. A chunk the walk never reached (a dense-fill
        result, or one the user found elsewhere) is connected by the shortest graph path of
        at most ``feedback_max_depth`` hops from the subgraph, so memory learns a way to it.
        Down: penalise the paths to ``chunk_ids``, or every subgraph edge."""
        trace = self.trace(trace_id)
        targets = list(chunk_ids) if chunk_ids is not None else trace.chunk_ids
        q = np.asarray(trace.query_embedding, dtype=np.float32)
        if helpful:
            parents = {
                **trace.parents,
                **bridge_paths(
                    self.store, trace.parents, targets, self.retrieval_config.feedback_max_depth
                ),
            }
            effective, ineffective = split_edges(parents, targets, [])
            if not effective:
                return self._skip(trace, "no given chunk is reachable from the subgraph")
            self.store.update_memory(effective, ineffective, q)
            reached = [c for c in targets if c in parents]
            write = MemoryWrite(trace_id, True, effective, ineffective, reached, [])
        else:
            effective, _ = split_edges(trace.parents, targets, [])
            bad = effective if chunk_ids is not None else trace.subgraph_edges
            if not bad:
                return self._skip(trace, "nothing was traversed")
            self.store.update_memory([], bad, q)
            write = MemoryWrite(trace_id, True, [], bad, [], [])
        with self._lock:
            self._writes_applied += 1
        return write

    def memory_stats(self) -> MemoryStats:
        return MemoryStats(self.store.touched_edges(), self._writes_applied, self._writes_skipped)

    # --- memory admin ----------------------------------------------------------------------
    MEMORY_FORMAT = "remindrag-memory/1"

    def inspect_memory(
        self, k: int = 10, query: str | None = None, *, cluster_threshold: float | None = 0.8
    ) -> list[dict[str, Any]]:
        """The ``k`` edges with the strongest memory (by norm, or by alignment with ``query``),
        each with its text, endpoint names, score and norm. Edges whose memory points the same
        way (cosine >= ``cluster_threshold``) share a ``cluster`` number: one per group of
        similar past queries (``None`` skips the grouping)."""
        from .embeddings import embed_checked

        q = embed_checked(self.embedder, [query], dim=self.store.dim)[0] if query else None
        top = self.store.top_memory(q, k)
        vecs = self.store.memory([e for e, _ in top])
        edges = [self.store.get_edge(e) for e, _ in top]
        names = {
            n.id: n.name
            for n in self.store.get_nodes(list(dict.fromkeys(x for e in edges for x in (e.u, e.v))))
        }
        leaders: list[np.ndarray] = []
        rows = []
        for (eid, score), v, e in zip(top, vecs, edges):
            row = {
                "edge_id": eid,
                "kind": e.kind,
                "text": e.text,
                "u": e.u,
                "v": e.v,
                "u_name": names[e.u],
                "v_name": names[e.v],
                "score": score,
                "norm": float(np.linalg.norm(v)),
            }
            if cluster_threshold is not None:
                row["cluster"] = self._leader_cluster(leaders, v, cluster_threshold)
            rows.append(row)
        return rows

    def reset_memory(self) -> int:
        """Forget all edge memory of this engine's store (its namespace only)."""
        return self.store.reset_memory()

    def decay_memory(self, factor: float) -> int:
        """Scale every memory vector by ``factor`` in [0, 1]; returns the edges touched."""
        return self.store.decay_memory(factor)

    def export_memory(self, path: str | os.PathLike[str]) -> int:
        """Write the memory vectors to a JSON file; returns how many were written."""
        vectors = self.store.export_memory()
        doc = {
            "format": self.MEMORY_FORMAT,
            "namespace": self.store.namespace,
            "dim": self.store.dim,
            "vectors": vectors,
        }
        tmp = Path(f"{path}.tmp")
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        os.replace(tmp, path)
        return len(vectors)

    def import_memory(self, path: str | os.PathLike[str], *, skip_unknown: bool = False) -> int:
        """Load memory vectors written by :meth:`export_memory` (they replace the current
        vectors of those edges). Edges the graph lacks raise :class:`UnknownNodeError`, or are
        left out with ``skip_unknown=True``."""
        from .types import UnknownNodeError

        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != self.MEMORY_FORMAT:
            raise ValueError(f"{path} is not a memory export ({self.MEMORY_FORMAT})")
        vectors = doc["vectors"]
        if skip_unknown:
            known = {}
            for eid, v in vectors.items():
                try:
                    self.store.get_edge(eid)
                except UnknownNodeError:
                    continue
                known[eid] = v
            vectors = known
        return self.store.import_memory(vectors)

    @staticmethod
    def _leader_cluster(leaders: list[np.ndarray], v: np.ndarray, threshold: float) -> int:
        """Index of the first leader within cosine ``threshold`` of ``v`` (else ``v`` leads)."""
        u = v / (float(np.linalg.norm(v)) or 1.0)
        for i, lead in enumerate(leaders):
            if float(u @ lead) >= threshold:
                return i
        leaders.append(u)
        return len(leaders) - 1

    # --- persistence ---------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Persist the store (atomically) and the configuration."""
        save = getattr(self.store, "save", None)
        if save is None:
            self.store.flush()
            root = Path(directory)
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(save(directory))
        cfg = {
            "index": self.index_config.model_dump(),
            "retrieval": self.retrieval_config.model_dump(),
        }
        tmp = root / ".engine.json.tmp"
        tmp.write_text(json.dumps(cfg), encoding="utf-8")
        os.replace(tmp, root / "engine.json")
        return root

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike[str],
        *,
        llm: Any = None,
        embeddings: Any = None,
        store: GraphStore | str | None = None,
    ) -> ReMindRAG:
        """Load what :meth:`save` wrote. Raises :class:`StoreCorruptError` on damage."""
        root = Path(directory)
        try:
            cfg = json.loads((root / "engine.json").read_text(encoding="utf-8"))
            index_cfg = IndexConfig.build(**cfg["index"])
            retrieval_cfg = RetrievalConfig.build(**cfg["retrieval"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreCorruptError(f"no readable engine config at {root}: {exc}") from exc
        return cls(
            llm=llm,
            embeddings=embeddings,
            store=store if store is not None else InMemoryGraphStore.load(root),
            index_config=index_cfg,
            retrieval_config=retrieval_cfg,
        )


def _ask(stage: str, prompt: str, context: dict) -> Step:
    from .llms import Ask

    reply = yield Ask(stage, prompt, context)
    return reply or ""
