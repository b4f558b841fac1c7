"""The paper's protocol with a real LLM, per question (``python -m benchmarks.harness real``).

For every question a small graph is built from its own passages with zero-token (rule-based)
indexing; then, on that graph:

1. BM25, dense top-k and the zero-token navigator (no LLM);
2. the ``similar_prefix`` variants on the fresh graph (the "before" of Similar);
3. the first pass with the LLM navigating and answering, then memorize through the LLM filter;
4. the same question again (Same, "after"), then the variants again (Similar, "after").

Each LLM walk records its decisions, prompt / cached / completion traversal tokens, wall
seconds, stop reason, unusable replies and fallbacks, and how much of each step's prompt
(steps 2+) repeats the previous step's prompt exactly (the cacheable share). A separate
measure runs LLM extraction on a few passages. Every call goes through a
:class:`~..testing.RecordingLLM`, whose calls can be saved as a replay fixture.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from remindrag_integrations import ReMindRAG
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.core.errors import LLMError
from remindrag_integrations.core.indexing import make_chunks
from remindrag_integrations.core.text import count_tokens
from remindrag_integrations.core.types import Chunk, Retrieval
from remindrag_integrations.testing import RecordingLLM

from . import metrics as M
from .baselines import BM25Baseline, DenseBaseline
from .data import Dataset

# bounds for a small local model (cost ceilings set before any run, not tuned on results),
# with issue 11's prompt sizes and the LLM walking every first pass (the protocol of RESULTS
# §9's older runs; benchmarks/llm_navigation.py measures the library's defaults)
REAL_OVERRIDES: dict[str, Any] = {
    "max_hops": 4,
    "max_iterations": 8,
    "max_traversal_tokens": 6000,
    "max_idle_decisions": 3,
    "max_neighbors_shown": 10,
    "prompt": {"max_back_choices": 8, "chunk_chars": 600},
    "llm_navigation": "always",
}
LLM_TIMEOUT = 1800.0


def recall(item: dict, corpus: dict, chunks: Sequence[Chunk], k: int) -> float:
    gold = {p: corpus[p]["text"] for p in item["gold_pids"] if p in corpus}
    sents = item.get("gold_sentences", ())
    ranked = [M.gold_matches(c.text, gold, sents) for c in chunks]
    return M.recall_at_k(ranked, item["gold_pids"], k)


def shared_prefix_chars(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PrefixLog(RecordingLLM):
    """A :class:`RecordingLLM` that also notes, for each traversal call, how many characters
    and tokens of its prompt exactly repeat the previous traversal prompt's start."""

    def __init__(
        self, inner: Any, model: str = "", progress: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(inner, model)
        self._last = ""
        self.progress = progress

    def _keep(self, prompt: str, c: Any, seconds: float) -> Any:
        out = super()._keep(prompt, c, seconds)
        call = self.calls[-1]
        if call["stage"] == "traversal":
            shared = shared_prefix_chars(self._last, prompt)
            call["shared_prefix_tokens"] = count_tokens(prompt[:shared])
            call["counted_prompt_tokens"] = count_tokens(prompt)
            self._last = prompt
        if self.progress:
            self.progress(
                f"  {call['stage']}: {call['prompt_tokens']} prompt tokens "
                f"({call['cached_prompt_tokens']} cached), {call['completion_tokens']} out, "
                f"{call['seconds']:.1f} s: {call['reply'][:60]!r}"
            )
        return out


def walk_record(
    r: Retrieval, calls: list[dict], seconds: float, item: dict, ds: Dataset, k: int
) -> dict:
    """One LLM walk: recall, cost, bounds and cacheability."""
    t = r.trace
    st = t.costs.stages["traversal"]
    steps = [c for c in calls if c["stage"] == "traversal"]
    later = steps[1:]
    return {
        "recall@5": recall(item, ds.corpus, [rc.chunk for rc in r.chunks], 5),
        f"recall@{k}": recall(item, ds.corpus, [rc.chunk for rc in r.chunks], k),
        "stop_reason": t.stop_reason,
        "decisions": t.decisions,
        "traversal_calls": st.calls,
        "prompt_tokens": st.prompt_tokens,
        "cached_prompt_tokens": st.cached_prompt_tokens,
        "completion_tokens": st.completion_tokens,
        "later_prompt_tokens": sum(c["prompt_tokens"] for c in later),
        "later_cached_tokens": sum(c["cached_prompt_tokens"] for c in later),
        "later_counted_tokens": sum(c["counted_prompt_tokens"] for c in later),
        "later_shared_tokens": sum(c["shared_prefix_tokens"] for c in later),
        "unusable_replies": t.unusable_replies,
        "fallbacks": t.fallbacks,
        "replay_only": t.stop_reason == "replay",
        "seconds": seconds,
        "llm_seconds": sum(c["seconds"] for c in calls),
        "traversal_seconds": sum(c["seconds"] for c in steps),
    }


def _timed(log: PrefixLog, fn: Callable[[], Any]) -> tuple[Any, list[dict], float]:
    start, t0 = len(log.calls), time.perf_counter()
    out = fn()
    return out, log.calls[start:], time.perf_counter() - t0


def _memorize(engine: ReMindRAG, log: PrefixLog, ans: Any) -> dict[str, Any]:
    """One memorize turn through the LLM filter, given the first pass's answer."""
    write, calls, secs = _timed(
        log, lambda: engine.memorize(ans.trace_id, answer=ans.text, llm=log)
    )
    return {
        "applied": write.applied,
        "skipped_reason": write.skipped_reason,
        "enhanced": len(write.enhanced),
        "supporting_chunks": len(write.supporting_chunks),
        "tokens": sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls),
        "seconds": secs,
    }


def real_question(
    ds: Dataset, item: dict, log: PrefixLog, embedder: Any, k: int, overrides: dict[str, Any]
) -> dict[str, Any]:
    """Every arm and phase of the protocol on one question's own graph."""
    docs = ds.documents(item["context_pids"])
    # the walk bounds hold for every call, memorize included; a slow local model on a busy
    # machine needs more than the default 120 s per call; the paper's protocol memorizes
    # through the LLM filter (not the answer's citations, the default since issue 21)
    base = {"llm_timeout": LLM_TIMEOUT, "memorize_judge": "filter"}
    engine = ReMindRAG(
        llm=None, embeddings=embedder, retrieval_config=RetrievalConfig(**{**base, **overrides})
    )
    engine.insert(docs)
    chunks = [c for d in docs for c in make_chunks(d, engine.index_config)]
    q = item["question"]
    qvec = engine.embedder.embed([q])[0]
    rec: dict[str, Any] = {"qid": item["qid"], "question": q}
    rec["bm25"] = recall(item, ds.corpus, BM25Baseline(chunks).retrieve(q, qvec, k), 5)
    rec["dense"] = recall(item, ds.corpus, DenseBaseline(engine.store).retrieve(q, qvec, k), 5)
    zero = engine.retrieve(q, k=k, **overrides)
    rec["zero_token"] = recall(item, ds.corpus, [rc.chunk for rc in zero.chunks], 5)
    rec["zero_token_decisions"] = zero.trace.decisions
    free = engine.retrieve(q, k=k, llm_timeout=LLM_TIMEOUT, max_traversal_tokens=None)
    rec["zero_token_default"] = recall(item, ds.corpus, [rc.chunk for rc in free.chunks], 5)
    similar = [
        v for v in ds.variants if v["qid"] == item["qid"] and v["variant"] == "similar_prefix"
    ]

    def walk(question: str, it: dict, answer: bool = False) -> tuple[dict, Any]:
        if answer:
            out, calls, secs = _timed(
                log, lambda: engine.answer(question, llm=log, k=k, **overrides)
            )
            r = out.retrieval
        else:
            r, calls, secs = _timed(
                log, lambda: engine.retrieve(question, llm=log, k=k, **overrides)
            )
            out = r
        return walk_record(r, calls, secs, it, ds, k), out

    rec["similar_before"] = [walk(v["question"], v)[0] for v in similar]
    first, ans = walk(q, item, answer=True)
    rec["first"], rec["answer"] = first, ans.text
    rec["em"], rec["f1"] = (
        M.exact_match(ans.text, item["answers"]),
        M.f1_score(ans.text, item["answers"]),
    )
    rec["memorize"] = _memorize(engine, log, ans)
    rec["same_after"] = walk(q, item)[0]
    rec["similar_after"] = [walk(v["question"], v)[0] for v in similar]
    return rec


def _mean(vals: Sequence[float]) -> float:
    return M.mean(list(vals)) if vals else 0.0


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def summarize_walks(walks: Sequence[dict]) -> dict[str, Any]:
    if not walks:
        return {"n": 0}
    stops: dict[str, int] = {}
    for w in walks:
        stops[w["stop_reason"]] = stops.get(w["stop_reason"], 0) + 1
    tot = {
        key: sum(w[key] for w in walks)
        for key in walks[0]
        if isinstance(walks[0][key], int | float)
    }
    return {
        "n": len(walks),
        "recall@5": _mean([w["recall@5"] for w in walks]),
        "decisions": tot["decisions"] / len(walks),
        "prompt_tokens": tot["prompt_tokens"] / len(walks),
        "cached_prompt_tokens": tot["cached_prompt_tokens"] / len(walks),
        "completion_tokens": tot["completion_tokens"] / len(walks),
        "traversal_tokens": (tot["prompt_tokens"] + tot["completion_tokens"]) / len(walks),
        "traversal_seconds": tot["traversal_seconds"] / len(walks),
        "seconds": tot["seconds"] / len(walks),
        "later_cached_share": _ratio(tot["later_cached_tokens"], tot["later_prompt_tokens"]),
        "later_shared_share": _ratio(tot["later_shared_tokens"], tot["later_counted_tokens"]),
        "unusable_replies": tot["unusable_replies"],
        "fallbacks": tot["fallbacks"],
        "replies": tot["traversal_calls"],
        "replay_only": _mean([float(w["replay_only"]) for w in walks]),
        "stop_reasons": stops,
        "ended_by_unusable_reply": stops.get("invalid_llm_output", 0),
    }


def summarize_real(records: Sequence[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(records)}
    for arm in ("bm25", "dense", "zero_token", "zero_token_default"):
        out[arm] = {"recall@5": _mean([r.get(arm, 0.0) for r in records])}
    out["llm_first"] = summarize_walks([r["first"] for r in records])
    out["llm_same_after"] = summarize_walks([r["same_after"] for r in records])
    out["similar_before"] = summarize_walks([w for r in records for w in r["similar_before"]])
    out["similar_after"] = summarize_walks([w for r in records for w in r["similar_after"]])
    out["memorized"] = _mean([float(r["memorize"]["applied"]) for r in records])
    out["em"] = _mean([r["em"] for r in records])
    out["f1"] = _mean([r["f1"] for r in records])
    for name, before, after in (
        ("same", "llm_first", "llm_same_after"),
        ("similar", "similar_before", "similar_after"),
    ):
        b, a = out[before].get("traversal_tokens", 0.0), out[after].get("traversal_tokens", 0.0)
        out[f"{name}_token_saving"] = 1 - a / b if b else 0.0
    return out


def measure_extraction(ds: Dataset, log: PrefixLog, embedder: Any, n: int) -> dict[str, Any]:
    """LLM extraction on the first ``n`` gold passages: entities, relations, tokens per
    source token."""
    pids = list(dict.fromkeys(p for q in ds.questions for p in q["gold_pids"] if p in ds.corpus))
    engine = ReMindRAG(
        llm=log, embeddings=embedder, retrieval_config=RetrievalConfig(llm_timeout=LLM_TIMEOUT)
    )
    t0 = time.perf_counter()
    report = engine.insert(ds.documents(pids[:n]))
    tokens = report.costs.total_tokens
    return {
        "passages": min(n, len(pids)),
        "chunks": report.chunks,
        "entities": report.entities_added + report.entities_merged,
        "relations": report.relations,
        "fallback_chunks": report.fallback_chunks,
        "source_tokens": report.source_tokens,
        "llm_tokens": tokens,
        "tokens_per_source_token": _ratio(tokens, report.source_tokens),
        "seconds": time.perf_counter() - t0,
    }


def run_real(
    ds: Dataset,
    llm: Any,
    embedder: Any,
    k: int = 5,
    overrides: dict[str, Any] | None = None,
    progress: Callable[[str], None] = lambda s: None,
    jsonl: str | Path | None = None,
    extraction: int = 0,
    model: str = "",
) -> tuple[dict[str, Any], PrefixLog]:
    """The protocol on every question of ``ds``; records are appended to ``jsonl`` as they
    finish (a long run can be read while it goes, and an interrupted one resumes: questions
    already in ``jsonl`` are not asked again)."""
    log = llm if isinstance(llm, PrefixLog) else PrefixLog(llm, model, progress)
    ov = {**REAL_OVERRIDES, **(overrides or {})}
    records = _finished(jsonl, {q["qid"] for q in ds.questions})
    done = {r["qid"] for r in records}
    failed: list[dict[str, Any]] = []
    for i, item in enumerate(ds.questions):
        if item["qid"] in done:  # resumed: this question's record is already in ``jsonl``
            continue
        progress(f"{ds.name}: question {i + 1}/{len(ds.questions)}")
        try:
            rec = real_question(ds, item, log, embedder, k, ov)
        except LLMError as exc:  # e.g. a timeout: reported, the run goes on
            progress(f"{ds.name}: question {item['qid']} failed: {exc}")
            failed.append({"qid": item["qid"], "error": str(exc)})
            continue
        records.append(rec)
        if jsonl:
            with open(jsonl, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec, default=float) + "\n")
    result: dict[str, Any] = {
        "kind": "real_llm",
        "dataset": ds.name,
        "model": model,
        "k": k,
        "overrides": ov,
        "summary": summarize_real(records),
        "failed": failed,
        "records": records,
    }
    if extraction:
        progress(f"{ds.name}: LLM extraction on {extraction} passages")
        result["extraction"] = measure_extraction(ds, log, embedder, extraction)
    return result, log


def _finished(jsonl: str | Path | None, qids: set[str]) -> list[dict[str, Any]]:
    """Records of ``qids`` an earlier, interrupted run already appended to ``jsonl``."""
    if not jsonl or not Path(jsonl).exists():
        return []
    rows = [json.loads(line) for line in Path(jsonl).read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r.get("qid") in qids]
