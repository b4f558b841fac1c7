"""One query as named stages (docs/method.md §2): pre-query → seeds → replay → navigate → rank → trace.

Each stage is a function the engine, the bench harness and the scale benchmark all call;
:func:`retrieve` chains them into one step.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

import numpy as np

from . import calibration, prior, ranking
from .config import RetrievalConfig
from .errors import InvalidQueryError, LLMError, LLMOutputError
from .extract_rules import rule_based_extraction
from .ids import anchor_of
from .memory.grounding import content_words
from .memory.replay import replay, vouched
from .navigate import Navigator, mode, navigate
from .navigate.zero_token import ZeroTokenNavigator
from .observe import Observer
from .prompts import PRE_QUERY_PROMPT, parse_pre_query
from .selection import seed
from .steps import Embed, Step, ask, done, timed
from .store import GraphStore, reading
from .types import CostLedger, Retrieval, RetrievedChunk, Trace
from .walk import Stop, StopReason, Walk, path_triples


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


def mentioned_names(query: str) -> list[str]:
    """The names the offline extractor finds in the question."""
    return [n for n in rule_based_extraction(query).entities if prior.is_name(n)]


def question_names(
    query: str, cfg: RetrievalConfig, mentioned: list[str] | None = None
) -> list[str]:
    """The names the prior links to graph entities (:func:`mentioned_names`, unless given;
    their embeddings are asked for with the query's); none when the prior does not spread."""
    if not cfg.prior.enabled or cfg.prior.graph_weight == 0:
        return []
    return mentioned_names(query) if mentioned is None else mentioned


def rank(
    walk: Walk,
    merged: bool = False,
    names: Sequence[str] = (),
    words: frozenset[str] | set[str] = frozenset(),
) -> ranking.Ranked:
    """The chunks the walk read, ranked by the rules of :data:`.ranking.RULES`: their
    first-pass score (:func:`.prior.first_pass`) plus ``memory.rank_weight`` ×
    :func:`.ranking.score_span` times the memory evidence of each, then (``fill_to_k``) the
    prior's next best unread chunks; at most ``k``. ``merged``: the read and the unread
    candidates compete on one score (a zero-token walk follows the prior, so reading a chunk
    adds no judgement of its own), the pages the best of them names by their title gain the
    title hop (the ``title`` part), and the candidate nearest the question keeps its seat
    (the ``seat`` part); otherwise what the navigator read comes first, by its first-pass
    score. Returns the chunks, each with its relevance (:mod:`.calibration`; ``names`` and
    ``words``: the question's names and content words, which it looks for), and every
    candidate's score parts (the trace's ``rank_evidence``)."""
    cfg, ids = walk.cfg, walk.chunk_ids
    sims = walk.reads.sims(ids)
    cos = np.asarray(sims, dtype=np.float32)
    base = ranking.first_pass_scores(walk, ids, sims)
    vouch = vouched(walk)
    mem = np.asarray([vouch.get(c, 0.0) for c in ids], dtype=np.float32)
    span = ranking.score_span(walk.prior, cfg.prior.lexical_weight, cfg.prior.graph_weight)
    final = ranking.memory_scores(base, mem, cfg.memory.rank_weight * span)
    hop = ranking.title_hop_gains(walk, ids, final.tolist()) if merged else {}
    final = final + np.asarray([hop.get(c, 0.0) for c in ids], dtype=np.float32)
    scored = [(c, s, walk.sources[c]) for c, s in zip(ids, final.tolist())]
    evidence = {c: _evidence(walk, c, x, m, s) for c, s, x, m in zip(ids, final, cos, mem)}
    n = cfg.k if merged else cfg.k - len(ids)
    filled = ranking.fill(walk, set(ids), n, hop) if cfg.fill_to_k else []
    for (cid, s), sim in zip(filled, walk.reads.sims([anchor_of(c) for c, _ in filled])):
        evidence[cid] = _evidence(walk, cid, sim, 0.0, s)  # one read above
    for cid, gain in hop.items():
        if cid in evidence:
            evidence[cid]["title"] = gain
    if merged:
        ranked = sorted([*scored, *((c, s, "dense_fill") for c, s in filled)], key=lambda t: -t[1])
        ranked, seat = ranking.dense_seat(
            cfg.prior.dense_seat, walk.prior, ranked, hop, bool(np.any(mem > 0))
        )
        if seat is not None:
            if seat.added:
                cosine = walk.prior.parts[seat.chunk]["cosine"]  # type: ignore[union-attr]
                evidence[seat.chunk] = _evidence(walk, seat.chunk, cosine, 0.0, seat.before)
            evidence[seat.chunk]["seat"] = seat.lifted - seat.before
            evidence[seat.chunk]["score"] = seat.lifted
    else:
        ranked = sorted(scored, key=lambda t: -t[1]) + [(c, s, "dense_fill") for c, s in filled]
    top = ranked[: cfg.k]
    chunks = walk.reads.chunks([c for c, _, _ in top])  # one read
    own = [calibration.own(evidence[c], names, ch.text) for (c, _, _), ch in zip(top, chunks)]
    meaning, texts = calibration.meaning(walk, names)
    texts.update((c, ch.text) for (c, _, _), ch in zip(top, chunks))  # each passage read once
    best = calibration.combined(
        max([meaning, *own]), calibration.coverage(words, [*texts.values()])
    )
    rel = calibration.relevance(best, [s for _, s, _ in top])
    for (c, _, _), r in zip(top, rel):
        evidence[c]["relevance"] = r
    out = [
        RetrievedChunk(ch, r, how, s)  # type: ignore[arg-type]
        for ch, (_, s, how), r in zip(chunks, top, rel)
    ]
    return ranking.Ranked(out, evidence)


def _evidence(walk: Walk, chunk_id: str, cos: float, mem: float, score: float) -> dict:
    """A chunk's score parts for the trace: cosine, memory, the prior's lexical and graph
    parts (when there is a prior) and the final score."""
    parts = walk.prior.parts.get(chunk_id, {}) if walk.prior else {}
    return {**parts, "cosine": float(cos), "memory": float(mem), "score": float(score)}


def make_trace(
    walk: Walk,
    query: str,
    subqs: list[str],
    ledger: CostLedger,
    timings: dict[str, float],
    stop: Stop | None = None,
    evidence: dict[str, dict[str, float]] | None = None,
    navigation: mode.Navigation | None = None,
) -> Trace:
    """The trace of a query: the walk's subgraph with each stage's result (``stop``: the
    walk's, ``evidence``: the ranking's score parts, ``navigation``: who walked and why)."""
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
        stop_reason=str(stop or Stop()),
        subquestions=list(subqs),
        decisions=walk.asks,
        timings_ms=timings,
        rank_evidence=dict(evidence or {}),
        navigation=navigation.to_dict() if navigation else {},
    )


def requery(store: GraphStore, question: str, cfg: RetrievalConfig) -> Step:
    """The question asked again as a user would, zero-token (no pre-query: no LLM is asked):
    what memory writes that must bring named passages back check against. It reads one
    version of the graph, through the store's snapshot, as the engine's queries do (on
    PostgreSQL that is also what lets it read the graph cache: on the live store each read
    was a statement, issue 49)."""
    plain = cfg.with_overrides(pre_query=False, verify_replay=False, min_score=None)
    with reading(store) as view:
        return (yield from retrieve(view, question, plain, ZeroTokenNavigator(), CostLedger()))


def retrieve(
    store: GraphStore,
    query: str,
    cfg: RetrievalConfig,
    navigator: Navigator,
    ledger: CostLedger,
    pre_query_template: str = PRE_QUERY_PROMPT,
    observer: Observer | None = None,
) -> Step:
    """The whole query as one step; ``ledger`` is the one the driver records into (the trace
    keeps it). Seeds: :func:`.selection.seed`. ``observer`` is told each stage's start and
    end (:mod:`.observe`); ``None``: nobody listens, and nothing is made for it."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError(f"the query must be a non-empty string, got {query!r}")
    if observer is None:
        return (yield from _retrieve(store, query, cfg, navigator, ledger, pre_query_template))
    stages = _Stages(observer)
    try:
        return (
            yield from _retrieve(store, query, cfg, navigator, ledger, pre_query_template, stages)
        )
    except BaseException as exc:
        if stages.opened:  # the stage that raised: its span ends with the error
            observer.end(stages.opened.pop(), {}, exc)
        raise


class _Stages:
    """The observer of one query, and the stage open now (made only when one listens)."""

    __slots__ = ("observer", "opened")

    def __init__(self, observer: Observer) -> None:
        self.observer = observer
        self.opened: list[str] = []

    def start(self, stage: str, inputs: dict) -> None:
        self.observer.start(stage, inputs)
        self.opened.append(stage)

    def end(self, stage: str, outputs: dict) -> None:
        self.opened.pop()
        self.observer.end(stage, outputs)


def _spent(ledger: CostLedger) -> tuple[int, int]:
    """LLM calls and tokens in ``ledger`` so far."""
    return ledger.total_calls, sum(ledger.tokens.values())


def _retrieve(
    store: GraphStore,
    query: str,
    cfg: RetrievalConfig,
    navigator: Navigator,
    ledger: CostLedger,
    pre_query_template: str,
    obs: _Stages | None = None,
) -> Step:
    """:func:`retrieve`'s stages, each reported to ``obs`` when given."""
    if obs is not None and cfg.pre_query:
        obs.start("pre_query", {"query": query})
    subqs = yield from pre_query(query, cfg, pre_query_template)
    if obs is not None and cfg.pre_query:
        obs.end("pre_query", {"subquestions": list(subqs), "llm_calls": ledger.total_calls})
    mentioned = mentioned_names(query)  # what the relevance looks for in a passage's text
    words = content_words(query)
    names = question_names(query, cfg, mentioned) if subqs else []
    vecs = yield Embed((query, *[s for s in subqs if s != query], *names))
    vecs, name_vecs = vecs[: len(vecs) - len(names)], vecs[len(vecs) - len(names) :]
    t0 = time.perf_counter()
    walk = Walk(store, vecs[0], cfg)
    if obs is not None:
        obs.start("prior", {"query": query, "names": list(names)})
    if subqs:
        walk.prior = prior.build(walk, query, names, name_vecs)
    if obs is not None:
        obs.end("prior", {"candidates": len(walk.prior.score) if walk.prior is not None else 0})
        obs.start("seed_search", {"query": query, "subquestions": len(subqs)})
    tp = time.perf_counter()
    seed(walk, vecs if subqs else vecs[:0])
    t1 = time.perf_counter()
    if obs is not None:
        obs.end("seed_search", {"seeds": len(walk.seeds), "passages": len(walk.chunk_ids)})
        obs.start("replay", {"seeds": len(walk.seeds)})
    replay(walk)
    t2 = time.perf_counter()
    if obs is not None:
        n, held = len(walk.replayed_edges), len(vouched(walk))
        obs.end("replay", {"replayed_edges": n, "vouched": held, "passages": len(walk.chunk_ids)})
    navigating = [0.0]  # the navigator's own work, not its LLM calls
    navigation = None  # who walks, why (navigate/mode.py)
    if not walk.parents:
        stop = Stop(StopReason.NO_RETRIEVAL_NEEDED if not subqs else StopReason.EMPTY_GRAPH)
    elif (
        cfg.min_score is not None
        and calibration.question_relevance(walk, mentioned, words) < cfg.min_score
    ):
        stop = Stop(StopReason.BELOW_MIN_SCORE)  # no walk (no LLM call): off the corpus
    elif ("replay" in walk.sources.values() or vouched(walk)) and not cfg.verify_replay:
        stop = Stop(StopReason.REPLAY)
        navigation = mode.Navigation(cfg.llm_navigation, False, "memory replay")
    else:
        navigation = mode.decide(walk, navigator.spends_tokens)
        if not navigation.llm:
            navigator = ZeroTokenNavigator()
        if obs is not None:
            spent = _spent(ledger)
            obs.start("walk", {"query": query, "llm": navigation.llm})
        stop = yield from timed(navigate(walk, query, navigator, ledger), navigating)
        if obs is not None:
            calls, tokens = _spent(ledger)
            obs.end(
                "walk",
                {
                    "hops": len(walk.moves),
                    "passages": len(walk.chunk_ids),
                    "llm_calls": calls - spent[0],
                    "tokens": tokens - spent[1],
                    "stop_reason": str(stop),
                },
            )
    t3 = time.perf_counter()
    merged = not navigator.spends_tokens and walk.prior is not None  # zero-token mode
    if obs is not None:
        obs.start("rank", {"candidates": len(walk.chunk_ids)})
    ranked = rank(walk, merged, mentioned, words) if walk.parents else ranking.Ranked()
    chunks = ranked.chunks
    below = cfg.min_score is not None and bool(chunks) and chunks[0].score < cfg.min_score
    abstained = stop.reason is StopReason.BELOW_MIN_SCORE or below  # before the walk, or now
    if abstained:
        chunks, stop = [], Stop(StopReason.BELOW_MIN_SCORE)
    if obs is not None:
        ids = [rc.chunk.id for rc in chunks]
        obs.end("rank", {"passages": len(ids), "passage_ids": ids, "abstained": abstained})
    timings = {
        "prior": (tp - t0) * 1e3,
        "seed_search": (t1 - tp) * 1e3,
        "replay": (t2 - t1) * 1e3,
        "navigate": navigating[0] * 1e3,
        "bookkeeping": (time.perf_counter() - t3) * 1e3,
    }
    trace = make_trace(walk, query, subqs, ledger, timings, stop, ranked.evidence, navigation)
    trace.abstained = abstained
    return Retrieval(query=query, chunks=chunks, triples=path_triples(walk), trace=trace)
