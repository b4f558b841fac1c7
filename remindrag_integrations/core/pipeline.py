"""One query as named stages (docs/method.md §2): pre-query → seeds → replay → navigate → rank → trace.

Each stage is a function the engine, the bench harness and the scale benchmark all call;
:func:`retrieve` chains them into one step.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence

import numpy as np

from . import prior
from .config import RetrievalConfig
from .errors import InvalidQueryError, LLMError, LLMOutputError
from .extract_rules import rule_based_extraction
from .ids import anchor_of, is_anchor
from .memory.grounding import content_words
from .memory.math import rank_scores
from .memory.replay import replay, vouched
from .navigate import Navigator, mode, navigate
from .navigate.zero_token import ZeroTokenNavigator
from .observe import Observer
from .prompts import PRE_QUERY_PROMPT, parse_pre_query
from .selection import seed
from .steps import Embed, Step, ask, done, timed
from .store import GraphStore
from .types import CostLedger, Retrieval, RetrievedChunk, Trace
from .walk import Walk, path_triples


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


def score_span(walk: Walk) -> float:
    """How far first-pass scores reach above cosine: 1 + the prior's lexical and graph
    weights (1 without a prior). Memory evidence is weighed on that scale, so a remembered
    path outranks the prior as it outranks cosine alone."""
    if walk.prior is None:
        return 1.0
    return 1.0 + walk.cfg.prior.lexical_weight + walk.cfg.prior.graph_weight


def _fill(
    walk: Walk, have: set[str], n: int, hop: dict[str, float] | None = None
) -> list[tuple[str, float]]:
    """Up to ``n`` unread chunks to fill the result: the prior's next best (with their title
    hop, ``hop``), or the nearest by dense search without a prior."""
    if walk.prior is not None:
        score, hop = walk.prior.score, hop or {}
        unread = [(c, score[c] + hop.get(c, 0.0)) for c in score if c not in have]
        return sorted(unread, key=lambda t: (-t[1], t[0]))[:n]
    out: list[tuple[str, float]] = []
    for anchor, sim in walk.search(walk.q_hat, n + len(have), ("anchor",)):
        cid = walk.nodes([anchor])[0].chunk_id
        if cid and cid not in have and len(out) < n:
            have = have | {cid}
            out.append((cid, sim))
    return out


def rank(
    walk: Walk,
    merged: bool = False,
    names: Sequence[str] = (),
    words: frozenset[str] | set[str] = frozenset(),
) -> list[RetrievedChunk]:
    """The chunks the walk read, by their first-pass score (:func:`.prior.first_pass`) plus
    ``memory.rank_weight`` × :func:`score_span` times the memory evidence of each (how
    strongly a remembered edge vouches for it), then (``fill_to_k``) the prior's next best unread chunks; at most ``k``.
    ``merged``: the read and the unread candidates compete on one score (a zero-token walk
    follows the prior, so reading a chunk adds no judgement of its own), and the pages the
    best of them names by their title gain the title hop (:func:`.prior.title_hop`, the
    ``title`` part), and the candidate nearest the question keeps its seat
    (:func:`_dense_seat`, the ``seat`` part); otherwise what the navigator read comes first,
    by its first-pass score.
    The score parts are kept in ``walk.evidence``. ``names`` and
    ``words``: the question's names and content words, which the relevance looks for
    (:func:`question_relevance`)."""
    cfg, ids = walk.cfg, walk.chunk_ids
    sims = walk.sims(ids)
    cos = np.asarray(sims, dtype=np.float32)
    base = np.asarray(prior.first_pass(walk, ids, sims), dtype=np.float32)
    vouch = vouched(walk)
    mem = np.asarray([vouch.get(c, 0.0) for c in ids], dtype=np.float32)
    final = rank_scores(base, mem, cfg.memory.rank_weight * score_span(walk))
    hop = _title_hop(walk, ids, final.tolist()) if merged else {}
    final = final + np.asarray([hop.get(c, 0.0) for c in ids], dtype=np.float32)
    scored = [(c, s, walk.sources[c]) for c, s in zip(ids, final.tolist())]
    walk.evidence = {c: _evidence(walk, c, x, m, s) for c, s, x, m in zip(ids, final, cos, mem)}
    n = cfg.k if merged else cfg.k - len(ids)
    fill = _fill(walk, set(ids), n, hop) if cfg.fill_to_k else []
    for (cid, s), sim in zip(fill, walk.sims([anchor_of(c) for c, _ in fill])):  # one read
        walk.evidence[cid] = _evidence(walk, cid, sim, 0.0, s)
    for cid, gain in hop.items():
        if cid in walk.evidence:
            walk.evidence[cid]["title"] = gain
    if merged:
        scored = sorted([*scored, *((c, s, "dense_fill") for c, s in fill)], key=lambda t: -t[1])
        scored = _dense_seat(walk, scored, hop)
    else:
        scored = sorted(scored, key=lambda t: -t[1]) + [(c, s, "dense_fill") for c, s in fill]
    top = scored[: cfg.k]
    chunks = walk.chunks([c for c, _, _ in top])  # one read
    own = [_own(walk.evidence[c], names, ch.text) for (c, _, _), ch in zip(top, chunks)]
    meaning, texts = _meaning(walk, names)
    texts.update((c, ch.text) for (c, _, _), ch in zip(top, chunks))  # each passage read once
    best = combined(max([meaning, *own]), coverage(words, list(texts.values())))
    rel = relevance(best, [s for _, s, _ in top])
    for (c, _, _), r in zip(top, rel):
        walk.evidence[c]["relevance"] = r
    return [
        RetrievedChunk(ch, r, how, s)  # type: ignore[arg-type]
        for ch, (_, s, how), r in zip(chunks, top, rel)
    ]


def _dense_seat(
    walk: Walk, scored: list[tuple[str, float, str]], hop: dict[str, float]
) -> list[tuple[str, float, str]]:
    """The zero-token ranking with the candidate nearest the question (the best cosine, what a
    plain vector search returns first) at ``prior.dense_seat`` or better: when the fused score
    ranks it lower, it is lifted to the score of the passage at that place and ranks right
    before it (the lift is kept as the ``seat`` part). 0 = off. Memory outranks this safety
    net of the first pass: when memory vouches for any candidate, there is no seat (it would
    move a taught passage down a place, out of the first five when it was fifth)."""
    place = walk.cfg.prior.dense_seat
    p = walk.prior
    if place <= 0 or p is None or not p.parts:
        return scored
    if any(e.get("memory", 0.0) > 0 for e in walk.evidence.values()):
        return scored
    best = max(p.parts, key=lambda c: (p.parts[c]["cosine"], c))
    pos = next((i for i, t in enumerate(scored) if t[0] == best), None)
    if pos is not None and pos < place:
        return scored
    if pos is None:
        entry = (best, p.score[best] + hop.get(best, 0.0), "dense_fill")
        walk.evidence[best] = _evidence(walk, best, p.parts[best]["cosine"], 0.0, entry[1])
    else:
        entry = scored.pop(pos)
    i = min(place, len(scored) + 1) - 1
    lifted = max(entry[1], scored[i][1]) if i < len(scored) else entry[1]
    walk.evidence[best]["seat"] = lifted - entry[1]
    walk.evidence[best]["score"] = lifted
    return [*scored[:i], (best, lifted, entry[2]), *scored[i:]]


def _title_hop(walk: Walk, ids: Sequence[str], scores: Sequence[float]) -> dict[str, float]:
    """The title hop's gains (:func:`.prior.title_hop`) over every candidate: the chunks read,
    at their rank scores, and the prior's unread ones, at their first-pass scores."""
    if walk.prior is None:
        return {}
    pool = dict(walk.prior.score)
    pool.update(zip(ids, scores))
    return prior.title_hop(walk, pool)


FALL_OFF = 0.5
"""How fast relevance falls below the first passage's: with the square root of the share of
its rank score (benchmarks/score_calibration.py)."""
NAME_WEIGHT = 0.2
"""What a passage that holds every name the question mentions adds to its cosine (the
share of the names it holds, times this): a name written out is evidence a cosine over a
long passage blurs, and unlike the best cosine it does not grow with the corpus
(benchmarks/score_calibration.py)."""


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"\w+", text.lower())) + " "


def name_share(names: Sequence[str], text: str) -> float:
    """The share of ``names`` that ``text`` holds as whole words (case-insensitive); 0 with
    no name."""
    if not names:
        return 0.0
    words = _words(text)
    return sum(_words(n) in words for n in names) / len(names)


def _own(parts: dict, names: Sequence[str] = (), text: str | None = None) -> float:
    """A passage's own relevance in [0, 1]: its cosine to the question plus
    :data:`NAME_WEIGHT` times the share of the question's names it holds (when its
    ``text`` is given), or memory's vouching for it (``q̂ · v`` of the remembered edge that
    leads to it), whichever is higher."""
    cos = float(parts.get("cosine", 0.0))
    if text is not None:
        cos += NAME_WEIGHT * name_share(names, text)
    return min(1.0, max(0.0, cos, float(parts.get("memory", 0.0))))


COVER_TOP = 10
"""How many of the first pass's best candidates :func:`coverage` reads the question's words in."""


def coverage(words: set[str] | frozenset[str], texts: Sequence[str]) -> float | None:
    """The share of the question's content ``words`` (:func:`.memory.grounding.content_words`)
    that ``texts`` hold, with one word's grace: ``(held + 1) / (words + 1)``, so a short
    question is not taken off the corpus for one word no passage uses ("How do I *make*
    carbonara?": 2/3, not 1/2); ``None`` when the question has no content word. An
    off-corpus question shares its meaning loosely with many passages but its own words
    with few: a name, a title, a rare term it asks about stands in none of them."""
    if not words:
        return None
    held: set[str] = set()
    for text in texts:
        held |= content_words(text) & words
        if len(held) == len(words):
            break
    return (len(held) + 1) / (len(words) + 1)


def combined(meaning: float, share: float | None) -> float:
    """The question's relevance in [0, 1]: the geometric mean of the best passage's
    relevance in meaning (:func:`_meaning`) and the share of the question's words the best
    passages hold (:func:`coverage`); the meaning alone when the question has no content
    word. Either being low makes it low: a passage near in meaning to a question whose
    names no passage holds, or passages that share the words but not the meaning
    (benchmarks/score_calibration.py)."""
    if share is None:
        return meaning
    return float(np.sqrt(max(0.0, meaning) * share))


def _meaning(walk: Walk, names: Sequence[str] = ()) -> tuple[float, dict[str, str]]:
    """The best own relevance (:func:`_own`) among the first pass's candidates (the
    prior's; the chunks the seeds read without one), with the names counted in its best
    :data:`COVER_TOP` passages, and memory's vouching; and those passages' texts by id."""
    if walk.prior is not None:
        parts = walk.prior.parts
        cands = [_own(p) for p in parts.values()]
        best = walk.prior.ranked()[:COVER_TOP]
        texts = {c: ch.text for c, ch in zip(best, walk.chunks(best))}
        cands += [_own(parts[c], names, t) for c, t in texts.items()]
    else:
        read = [*(n for n in walk.seeds if is_anchor(n)), *walk.chunk_ids]
        cands = [max(0.0, s) for s in walk.sims(read)]
        ids = list(dict.fromkeys(walk.chunk_ids))[:COVER_TOP]
        texts = {c: ch.text for c, ch in zip(ids, walk.chunks(ids))}
        cands += [_own({"cosine": x}, names, t) for x, t in zip(walk.sims(ids), texts.values())]
    mem = vouched(walk)
    return min(1.0, max([0.0, *cands, *mem.values()])), texts


def question_relevance(
    walk: Walk, names: Sequence[str] = (), words: set[str] | frozenset[str] = frozenset()
) -> float:
    """How relevant the graph is to the question, in [0, 1] (:func:`combined`): its best
    passage's relevance in meaning (:func:`_meaning`) with the share of the question's
    content ``words`` that the first pass's best :data:`COVER_TOP` passages hold. Absolute,
    not scaled to the best hit: an off-corpus question scores low on any corpus."""
    meaning, texts = _meaning(walk, names)
    return combined(meaning, coverage(words, list(texts.values())))


def relevance(best: float, rank_scores: list[float]) -> list[float]:
    """The relevance in [0, 1] of each returned passage, in the returned order: the
    question's relevance ``best`` (the best own relevance the graph holds for it) for the
    first, times ``sqrt(rank score / the first's rank score)`` for the others (the fused rank
    score says how far below the first the method puts it), never above a passage returned
    before it. So the scores fall as the ranking does, and an off-corpus question scores low
    on every passage."""
    out: list[float] = []
    first = rank_scores[0] if rank_scores else 0.0
    for i, s in enumerate(rank_scores):
        share = 1.0 if i == 0 else (min(1.0, max(0.0, s / first)) if first > 0 else 0.0)
        r = best * share**FALL_OFF
        out.append(min(r, out[-1]) if out else r)
    return out


def _evidence(walk: Walk, chunk_id: str, cos: float, mem: float, score: float) -> dict:
    """A chunk's score parts for the trace: cosine, memory, the prior's lexical and graph
    parts (when there is a prior) and the final score."""
    parts = walk.prior.parts.get(chunk_id, {}) if walk.prior else {}
    return {**parts, "cosine": float(cos), "memory": float(mem), "score": float(score)}


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
        navigation=dict(walk.navigation),
    )


def requery(store: GraphStore, question: str, cfg: RetrievalConfig) -> Step:
    """The question asked again as a user would, zero-token (no pre-query: no LLM is asked):
    what memory writes that must bring named passages back check against."""
    plain = cfg.with_overrides(pre_query=False, verify_replay=False, min_score=None)
    return (yield from retrieve(store, question, plain, ZeroTokenNavigator(), CostLedger()))


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
    if not walk.parents:
        walk.stop_reason = "no_retrieval_needed" if not subqs else "empty_graph"
    elif cfg.min_score is not None and question_relevance(walk, mentioned, words) < cfg.min_score:
        walk.stop_reason = "below_min_score"  # no walk (no LLM call) for an off-corpus question
    elif ("replay" in walk.sources.values() or vouched(walk)) and not cfg.verify_replay:
        walk.stop_reason = "replay"
        walk.navigation = {"mode": cfg.llm_navigation, "llm": False, "reason": "memory replay"}
    else:
        walk.navigation = mode.decide(walk, not isinstance(navigator, ZeroTokenNavigator))
        if not walk.navigation["llm"]:
            navigator = ZeroTokenNavigator()
        if obs is not None:
            spent = _spent(ledger)
            obs.start("walk", {"query": query, "llm": bool(walk.navigation["llm"])})
        yield from timed(navigate(walk, query, navigator, ledger), navigating)
        if obs is not None:
            calls, tokens = _spent(ledger)
            obs.end(
                "walk",
                {
                    "hops": len(walk.moves),
                    "passages": len(walk.chunk_ids),
                    "llm_calls": calls - spent[0],
                    "tokens": tokens - spent[1],
                    "stop_reason": walk.stop_reason,
                },
            )
    t3 = time.perf_counter()
    merged = isinstance(navigator, ZeroTokenNavigator) and walk.prior is not None
    if obs is not None:
        obs.start("rank", {"candidates": len(walk.chunk_ids)})
    chunks = rank(walk, merged, mentioned, words) if walk.parents else []
    below = cfg.min_score is not None and bool(chunks) and chunks[0].score < cfg.min_score
    abstained = walk.stop_reason == "below_min_score" or below  # decided before the walk, or now
    if abstained:
        chunks, walk.stop_reason = [], "below_min_score"
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
    trace = make_trace(walk, query, subqs, ledger, timings)
    trace.abstained = abstained
    return Retrieval(query=query, chunks=chunks, triples=path_triples(walk), trace=trace)
