"""The benchmark runner: build the knowledge bases, run every method on the same chunks and
embedder, and score the results.

- :func:`run_retrieval`: bm25 / dense / ppr / remindrag side by side, one pass, no memory writes;
- :func:`run_learning_curve`: ReMindRAG only: Same × N turns with memorization, then the
  similar_* / different_* variants, then the alternating Origin / Different protocol (Table 3).

Settings: ``pooled`` (one graph over the whole corpus, memory shared between questions) and
``per-question`` (one small graph per question from its own ``context_pids``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from remindrag_integrations import ReMindRAG
from remindrag_integrations.core.config import IndexConfig, RetrievalConfig
from remindrag_integrations.core.indexing import make_chunks
from remindrag_integrations.core.types import STAGES, Chunk, Retrieval

from . import learning
from . import metrics as M
from .baselines import BM25Baseline, DenseBaseline, PPRBaseline, graph_edges
from .data import Dataset
from .learning import used_citations
from .peers import PEERS, make_peer
from .resources import CachedEmbedder, make_llm
from .summary import paired_differences, summarize

KS = (2, 5, 10)
VARIANT_KINDS = (
    "similar_prefix",
    "similar_swap",
    "different_flip",
    "different_subq",
    "different_triple",
)


# --- knowledge bases ------------------------------------------------------------------------
@dataclass
class KnowledgeBase:
    """One engine over some documents, with its chunks and the baselines on the same chunks."""

    engine: ReMindRAG
    chunks: list[Chunk]
    index_seconds: float
    index_tokens: int
    source_tokens: int
    index_calls: int
    llm: Any = None
    _baselines: dict[str, Any] = field(default_factory=dict)

    def baseline(self, name: str) -> Any:
        """The baseline ``name`` on this base's chunks and embedder, built on first use: ours
        (``bm25``, ``dense``, ``ppr``) or a framework's (:data:`~.peers.PEERS`)."""
        if name not in self._baselines:
            store = self.engine.store
            if name in PEERS:
                self._baselines[name] = make_peer(name, self.chunks, self.engine.embedder)
                return self._baselines[name]
            self._baselines[name] = {
                "bm25": lambda: BM25Baseline(self.chunks),
                "dense": lambda: DenseBaseline(store),
                "ppr": lambda: PPRBaseline(store, graph_edges(store), self.engine.embedder),
            }[name]()
        return self._baselines[name]


def build_kb(
    docs: Sequence[Any],
    llm_spec: str,
    embedder: CachedEmbedder,
    index_config: IndexConfig | None = None,
) -> KnowledgeBase:
    cfg = index_config or IndexConfig()
    llm = make_llm(llm_spec)
    # with an LLM the bench measures its walk (the oracle: the memory mechanism and the real
    # prompt sizes) on every question, not only where the first pass is unsure; with none,
    # feedback "filter" (memorize with no answer) keeps the zero-token judge the results were
    # measured with: the similarity filter (self_memorize="enhance"; the library's default is
    # "off" since issue 33: no answer, no write)
    walks = RetrievalConfig(llm_navigation="always", self_memorize="enhance")
    engine = ReMindRAG(llm=llm, embeddings=embedder, index_config=cfg, retrieval_config=walks)
    t0 = time.perf_counter()
    report = engine.insert(docs)
    seconds = time.perf_counter() - t0
    if llm_spec == "oracle":
        llm.store = engine.store
    chunks = [c for d in docs for c in make_chunks(d, cfg)]
    return KnowledgeBase(
        engine,
        chunks,
        seconds,
        report.costs.total_tokens,
        report.source_tokens,
        report.costs.total_calls,
        llm,
    )


class Bench:
    """The knowledge base(s) of one setting, and gold chunk ids per question."""

    def __init__(
        self,
        ds: Dataset,
        setting: str,
        llm_spec: str,
        embedder: CachedEmbedder,
        progress: Callable[[str], None] = lambda s: None,
    ) -> None:
        if setting not in ("pooled", "per-question"):
            raise ValueError("setting must be 'pooled' or 'per-question'")
        self.ds, self.setting, self.llm_spec = ds, setting, llm_spec
        self.kbs: dict[str, KnowledgeBase] = {}
        if setting == "pooled":
            progress(f"indexing {len(ds.corpus)} documents (pooled)")
            kb = build_kb(ds.documents(), llm_spec, embedder)
            self.kbs = {q["qid"]: kb for q in ds.questions}
        else:
            for i, q in enumerate(ds.questions):
                if i % 20 == 0:
                    progress(f"indexing question {i + 1}/{len(ds.questions)} (per-question)")
                self.kbs[q["qid"]] = build_kb(ds.documents(q["context_pids"]), llm_spec, embedder)
        self._gold_texts: dict[str, dict[str, str]] = {}
        self._oracle_gold()
        if isinstance(embedder, CachedEmbedder):
            embedder.persist()

    def configure(self, overrides: dict[str, Any] | None) -> Bench:
        """Apply retrieval config overrides to every engine; returns ``self``."""
        for kb in self.unique_kbs():
            cfg = kb.engine.retrieval_config
            kb.engine.retrieval_config = cfg.with_overrides(**(overrides or {}))
        return self

    def unique_kbs(self) -> list[KnowledgeBase]:
        return list({id(kb): kb for kb in self.kbs.values()}.values())

    def gold_text(self, item: dict) -> dict[str, str]:
        return {p: self.ds.corpus[p]["text"] for p in item["gold_pids"] if p in self.ds.corpus}

    def matches(self, item: dict, chunks: Sequence[Chunk]) -> list[set[str]]:
        gold = self.gold_text(item)
        return [M.gold_matches(c.text, gold, item.get("gold_sentences", ())) for c in chunks]

    def gold_chunk_ids(self, item: dict) -> list[str]:
        kb = self.kbs[item["qid"]]
        return [c.id for c, m in zip(kb.chunks, self.matches(item, kb.chunks)) if m]

    def _oracle_gold(self) -> None:
        """Tell the oracle which chunks are gold for every question text it may see."""
        if self.llm_spec != "oracle":
            return
        for item in [*self.ds.questions, *self.ds.variants]:
            kb = self.kbs.get(item["qid"])
            if kb is None:
                continue
            gold = set(self.gold_chunk_ids(item))
            llm = kb.llm
            for key in (item["question"].strip(), item["question"].splitlines()[0].strip()):
                llm.gold[key] = gold


# --- scoring one query ----------------------------------------------------------------------
def score(bench: Bench, item: dict, chunks: Sequence[Chunk]) -> dict[str, float]:
    ranked = bench.matches(item, chunks)
    out = {f"recall@{k}": M.recall_at_k(ranked, item["gold_pids"], k) for k in KS}
    out["allgold@5"] = M.all_gold_at_k(ranked, item["gold_pids"], 5)
    if bench.ds.long_document and item.get("gold_sentences"):
        texts = [c.text for c in chunks]
        for k in (5, 10):
            out[f"evidence@{k}"] = M.evidence_recall(texts[:k], item["gold_sentences"])
    return out


def cost_fields(costs: Any) -> dict[str, Any]:
    st = costs.stages
    return {
        "calls": {s: st[s].calls for s in STAGES},
        "prompt_tokens": {s: st[s].prompt_tokens for s in STAGES},
        "completion_tokens": {s: st[s].completion_tokens for s in STAGES},
    }


def remindrag_query(
    bench: Bench,
    item: dict,
    k: int,
    memorize: str | None = None,
    answer: bool = False,
    reader: Any = None,
) -> dict[str, Any]:
    """Retrieve (or answer, scoring EM / F1 / option accuracy) with the engine, optionally
    memorize (``filter``, ``gold``, or ``read``: what ``reader`` answers, its citations the
    support; :mod:`.learning`); one record."""
    engine = bench.kbs[item["qid"]].engine
    engine.embedder.embed([item["question"]])  # the bench's cache: embedded once, as for the rest
    t0, c0 = time.perf_counter(), time.process_time()
    reply = engine.answer(item["question"], k=k) if answer else None
    r: Retrieval = reply.retrieval if reply else engine.retrieve(item["question"], k=k)
    wall = (time.perf_counter() - t0) * 1e3
    cpu = (time.process_time() - c0) * 1e3
    chunks = [rc.chunk for rc in r.chunks]
    rec = {
        "qid": item["qid"],
        "method": "remindrag",
        **score(bench, item, chunks),
        "stop_reason": r.trace.stop_reason,
        "replay_only": r.trace.stop_reason == "replay",
        "replayed_edges": len(r.trace.replayed_edges),
        "decisions": int(getattr(r.trace, "decisions", 0) or 0),
        "sources": [rc.source for rc in r.chunks],
        "timings_ms": dict(r.trace.timings_ms),
        "wall_ms": wall,
        "cpu_ms": cpu,
    }
    if reply is not None:
        rec["answer"] = reply.text
        rec["em"] = M.exact_match(reply.text, item["answers"])
        rec["f1"] = M.f1_score(reply.text, item["answers"])
        if item.get("gold_option"):
            rec["option_acc"] = float(M.option_letter(reply.text) == item["gold_option"])
    rec["retrieved"] = [c.id for c in chunks]
    if memorize == "gold":  # a user's thumbs-up on the gold passages
        write = engine.feedback(r.trace_id, helpful=True, chunk_ids=bench.gold_chunk_ids(item))
    elif memorize == "read":
        rec["memo"] = read_and_memorize(bench, item, r, reader)
        rec["memorized"], rec["memo_skip"] = rec["memo"]["applied"], rec["memo"]["skip"]
    elif memorize:
        write = engine.memorize(r.trace_id, answer=reply.text if reply else None)
        rec["memorized"], rec["memo_skip"] = write.applied, write.skipped_reason
        rec["memo"] = memo_record(bench, item, r, write)
    rec.update(cost_fields(engine.trace(r.trace_id).costs))
    return rec


def memo_record(bench: Bench, item: dict, r: Retrieval, write: Any) -> dict[str, Any]:
    """One memorize for the judge table: the support it picked, the chunks the walk read and
    the gold chunks."""
    trace = bench.kbs[item["qid"]].engine.trace(r.trace_id)
    return {
        "support": list(write.supporting_chunks),
        "read": list(trace.chunk_ids),
        "gold": bench.gold_chunk_ids(item),
        "applied": write.applied,
        "skip": write.skipped_reason,
    }


def read_and_memorize(bench: Bench, item: dict, r: Retrieval, reader: Any) -> dict[str, Any]:
    """A reader answers from the retrieval; memorize reads the answer's citations (the
    passages holding its words when it cites none; nothing for a refusal)."""
    engine = bench.kbs[item["qid"]].engine
    reading = reader.read(engine, item, r)
    write = engine.memorize(r.trace_id, answer=reading.text)
    memo = memo_record(bench, item, r, write)
    memo["ignored_citations"] = list(write.ignored_citations)
    used_citations(memo, reading.text)
    memo["answer"], memo["answer_tokens"] = reading.text, reading.tokens
    if reading.filter_pick is not None:
        memo["filter_pick"] = reading.filter_pick
    if item.get("answers"):
        memo["em"] = M.exact_match(reading.text or "", item["answers"])
    return memo


def baseline_query(bench: Bench, item: dict, method: str, k: int) -> dict[str, Any]:
    """One baseline's retrieval, timed without building its index (per question, every
    question builds one) and without embedding the question (done before, as for ours);
    ``cpu_ms``: the process's CPU time in the call, which other jobs on the machine do not
    stretch as they stretch the wall clock."""
    kb = bench.kbs[item["qid"]]
    qvec = kb.engine.embedder.embed([item["question"]])[0]
    retriever = kb.baseline(method)
    t0, c0 = time.perf_counter(), time.process_time()
    chunks = retriever.retrieve(item["question"], qvec, k)
    wall = (time.perf_counter() - t0) * 1e3
    cpu = (time.process_time() - c0) * 1e3
    return {
        "qid": item["qid"],
        "method": method,
        **score(bench, item, chunks),
        "timings_ms": {"retrieve": wall},
        "wall_ms": wall,
        "cpu_ms": cpu,
        "retrieved": [c.id for c in chunks],
    }


# --- summaries ------------------------------------------------------------------------------
def indexing_summary(bench: Bench) -> dict[str, Any]:
    kbs = bench.unique_kbs()
    src = sum(kb.source_tokens for kb in kbs)
    tok = sum(kb.index_tokens for kb in kbs)
    return {
        "graphs": len(kbs),
        "seconds": sum(kb.index_seconds for kb in kbs),
        "source_tokens": src,
        "llm_tokens": tok,
        "llm_calls": sum(kb.index_calls for kb in kbs),
        "tokens_per_source_token": tok / src if src else 0.0,
        "chunks": sum(len(kb.chunks) for kb in kbs),
        "edges": sum(kb.engine.store.counts()["edges"] for kb in kbs),
    }


# --- the two experiments --------------------------------------------------------------------
def run_retrieval(
    ds: Dataset,
    setting: str,
    methods: Sequence[str],
    llm_spec: str,
    embedder: CachedEmbedder,
    k: int = 10,
    progress: Callable[[str], None] = lambda s: None,
    answers: bool = False,
) -> dict[str, Any]:
    """Every method on every question, one pass, no memory writes. ``answers``: ReMindRAG
    also generates an answer (EM / F1; meaningful with a real LLM only)."""
    bench = Bench(ds, setting, llm_spec, embedder, progress)
    records: list[dict] = []
    for i, item in enumerate(ds.questions):
        if i % 25 == 0:
            progress(f"question {i + 1}/{len(ds.questions)}")
        for m in methods:
            rec = (
                remindrag_query(bench, item, k, answer=answers)
                if m == "remindrag"
                else baseline_query(bench, item, m, k)
            )
            records.append(rec)
    summary = {m: summarize([r for r in records if r["method"] == m]) for m in methods}
    return {
        "kind": "retrieval",
        "dataset": ds.name,
        "setting": setting,
        "llm": llm_spec,
        "questions": len(ds.questions),
        "methods": list(methods),
        "k": k,
        "summary": summary,
        "paired": paired_differences(
            records, methods, "evidence@5" if ds.long_document else "recall@5"
        ),
        "indexing": indexing_summary(bench),
        "records": records,
    }


def _different_variant(ds: Dataset) -> list[dict]:
    """One ``different_*`` variant per question that has one (the Table 3 protocol)."""
    seen: dict[str, dict] = {}
    for v in ds.variants:
        if v["variant"].startswith("different_") and v["qid"] not in seen:
            seen[v["qid"]] = v
    return list(seen.values())


def _phase(
    bench: Bench,
    items: Sequence[dict],
    k: int,
    memorize: str | None,
    label: str,
    progress: Callable[[str], None],
    reader: Any = None,
) -> dict[str, Any]:
    progress(f"{label}: {len(items)} queries")
    recs = [remindrag_query(bench, it, k, memorize, reader=reader) for it in items]
    for r in recs:
        r["phase"] = label
    touched = sum(kb.engine.store.touched_edges() for kb in bench.unique_kbs())
    return {"phase": label, "summary": summarize(recs), "touched_edges": touched, "records": recs}


def run_learning_curve(
    ds: Dataset,
    setting: str,
    llm_spec: str,
    embedder: CachedEmbedder,
    turns: int = 3,
    feedback: str = "filter",
    k: int = 10,
    alternating_rounds: int = 6,
    progress: Callable[[str], None] = lambda s: None,
    overrides: dict[str, Any] | None = None,
    reader_llm: Any = None,
    probe_filter: int = 0,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    untaught: Sequence[dict] = (),
) -> dict[str, Any]:
    """Same × ``turns`` memorization turns, then the variants (read-only) on that memory; then,
    on a fresh graph, the alternating Origin / Different protocol. ``overrides``: retrieval
    config fields for every engine (e.g. ``self_memorize``). ``feedback``: ``filter`` /
    ``gold``, or a label-free one of :mod:`.learning` (``none-<policy>``, ``cite``,
    ``llm-cite`` with ``reader_llm``). ``checkpoint`` gets the partial result after each
    phase. ``untaught``: questions on the same pooled graph that are never memorized, asked
    read-only before and after the turns (are they hurt?)."""
    memorize, extra, reader = learning.plan(feedback, reader_llm, probe_filter)
    overrides = {**extra, **(overrides or {})}
    kinds = [v for v in VARIANT_KINDS if any(x["variant"] == v for x in ds.variants)]
    bench = Bench(ds, setting, llm_spec, embedder, progress).configure(overrides)
    if untaught:
        if setting != "pooled":
            raise ValueError("untaught questions need the pooled setting")
        kb = bench.unique_kbs()[0]
        bench.kbs.update({q["qid"]: kb for q in untaught})
    res: dict[str, Any] = {
        "kind": "learning_curve",
        "dataset": ds.name,
        "setting": setting,
        "llm": llm_spec,
        "feedback": feedback,
        "turns": turns,
        "questions": len(ds.questions),
        "k": k,
        "phases": [],
        "alternating": [],
        "indexing": indexing_summary(bench),
        "overrides": overrides,
    }

    def phase(
        b: Bench, items: Sequence[dict], mem: str | None, label: str, into: str = "phases"
    ) -> None:
        res[into].append(_phase(b, items, k, mem, label, progress, reader))
        if checkpoint:
            checkpoint(res)

    for kind in kinds:  # the variants on a fresh memory: the reference for "after"
        items = [v for v in ds.variants if v["variant"] == kind]
        phase(bench, items, None, f"{kind} (no memory)")
    if untaught:
        phase(bench, untaught, None, "untaught (no memory)")
    for t in range(turns + 1):
        phase(bench, ds.questions, memorize if t < turns else None, f"same, turn {t}")
    for kind in kinds:
        items = [v for v in ds.variants if v["variant"] == kind]
        phase(bench, items, None, f"{kind} (after {turns} turns)")
    if untaught:
        phase(bench, untaught, None, f"untaught (after {turns} turns)")
    different = _different_variant(ds)
    if different and alternating_rounds:
        bench2 = Bench(ds, setting, llm_spec, embedder, progress).configure(overrides)
        keep = {v["qid"] for v in different}
        origin = [q for q in ds.questions if q["qid"] in keep]
        for r in range(alternating_rounds):
            items, name = (origin, "origin") if r % 2 == 0 else (different, "different")
            phase(bench2, items, memorize, f"round {r} {name}", "alternating")
    if any(r.get("memo") for p in res["phases"] for r in p["records"]):
        res["judges"] = learning.judge_summary(res)
    return res
