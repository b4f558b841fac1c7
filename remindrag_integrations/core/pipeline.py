"""One query as named stages (SPEC §2): pre-query → seeds → replay → navigate → rank → trace.

Each stage is a function the engine, the bench harness and the scale benchmark all call;
:func:`retrieve` chains them into one step.
"""

from __future__ import annotations

import time
import uuid

import numpy as np

from .config import RetrievalConfig
from .memory.math import rank_scores
from .memory.replay import replay, vouched
from .navigate import Navigator, navigate
from .prompts import PRE_QUERY_PROMPT, parse_pre_query
from .protocols import GraphStore
from .steps import Embed, Step, ask, done
from .types import (
    CostLedger,
    InvalidQueryError,
    LLMError,
    LLMOutputError,
    Retrieval,
    RetrievedChunk,
    Trace,
)
from .walk import Walk, find_seeds, path_triples


def pre_query(query: str, cfg: RetrievalConfig, template: str = PRE_QUERY_PROMPT) -> Step:
    """The sub-questions to retrieve for ([] when the LLM says no retrieval is needed)."""
    if not cfg.pre_query:
        return (yield from done([query]))
    prompt = template.format(query=query, max_subquestions=cfg.max_subquestions)
    try:
        reply = yield from ask("pre_query", prompt, {"query": query})
        need, subs = parse_pre_query(reply, cfg.max_subquestions)
    except (LLMOutputError, LLMError):
        return [query]  # when in doubt, retrieve with the question itself
    return (subs or [query]) if need else []


def seed(walk: Walk, query_vecs: np.ndarray) -> None:
    """Start the walk at the top ``cfg.seeds`` nodes of each (sub)query."""
    for s in find_seeds(walk, list(query_vecs), walk.cfg.seeds):
        walk.add(s, None, None, "seed")


def rank(walk: Walk) -> list[RetrievedChunk]:
    """The chunks the walk read, by cosine to the query plus ``rank_memory_weight`` times the
    memory evidence of each (how strongly a remembered edge vouches for it), then
    (``fill_to_k``) the nearest unread chunks by dense search; at most ``k``. The score parts
    are kept in ``walk.evidence`` for the trace."""
    cfg, ids = walk.cfg, walk.chunk_ids
    cos = np.asarray(walk.sims(ids), dtype=np.float32)
    vouch = vouched(walk)
    mem = np.asarray([vouch.get(c, 0.0) for c in ids], dtype=np.float32)
    final = rank_scores(cos, mem, cfg.rank_memory_weight)
    scored = sorted(zip(ids, final.tolist(), cos.tolist(), mem.tolist()), key=lambda t: -t[1])
    out = [RetrievedChunk(walk.chunk(c), s, walk.sources[c]) for c, s, _, _ in scored]  # type: ignore[arg-type]
    walk.evidence = {c: {"cosine": cs, "memory": m, "score": s} for c, s, cs, m in scored}
    if cfg.fill_to_k and len(out) < cfg.k:
        have = set(ids)
        for anchor, sim in walk.search(walk.q_hat, cfg.k + len(have), ("anchor",)):
            cid = walk.nodes([anchor])[0].chunk_id
            if cid and cid not in have and len(out) < cfg.k:
                have.add(cid)
                out.append(RetrievedChunk(walk.chunk(cid), sim, "dense_fill"))
                walk.evidence[cid] = {"cosine": sim, "memory": 0.0, "score": sim}
    return out[: cfg.k]


def make_trace(
    walk: Walk, query: str, subqs: list[str], ledger: CostLedger, timings: dict[str, float]
) -> Trace:
    return Trace(
        trace_id=uuid.uuid4().hex,
        query=query,
        query_embedding=[float(x) for x in walk.q_hat],
        seeds=walk.seeds,
        replayed_edges=walk.replayed_edges,
        moves=walk.moves,
        parents=walk.parents,
        chunk_ids=walk.chunk_ids,
        costs=ledger,
        stop_reason=walk.stop_reason,
        subquestions=list(subqs),
        decisions=walk.asks,
        timings_ms=timings,
        rank_evidence=dict(walk.evidence),
    )


def retrieve(
    store: GraphStore,
    query: str,
    cfg: RetrievalConfig,
    navigator: Navigator,
    ledger: CostLedger,
    pre_query_template: str = PRE_QUERY_PROMPT,
) -> Step:
    """The whole query as one step; ``ledger`` is the one the driver records into (the trace
    keeps it)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError(f"the query must be a non-empty string, got {query!r}")
    subqs = yield from pre_query(query, cfg, pre_query_template)
    vecs = yield Embed((query, *[s for s in subqs if s != query]))
    t0 = time.perf_counter()
    walk = Walk(store, vecs[0], cfg)
    seed(walk, vecs if subqs else vecs[:0])
    t1 = time.perf_counter()
    replay(walk)
    t2 = time.perf_counter()
    if not walk.parents:
        walk.stop_reason = "no_retrieval_needed" if not subqs else "empty_graph"
    elif ("replay" in walk.sources.values() or vouched(walk)) and not cfg.verify_replay:
        walk.stop_reason = "replay"
    else:
        yield from navigate(walk, query, navigator, ledger)
    t3 = time.perf_counter()
    chunks = rank(walk) if walk.parents else []
    timings = {
        "seed_search": (t1 - t0) * 1e3,
        "replay": (t2 - t1) * 1e3,
        "bookkeeping": (time.perf_counter() - t3) * 1e3,
    }
    trace = make_trace(walk, query, subqs, ledger, timings)
    return Retrieval(query=query, chunks=chunks, triples=path_triples(walk), trace=trace)
