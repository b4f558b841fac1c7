"""The ranking rules one by one (core/ranking.py), the query state's rooms (core/walk.py) and
the mode decided by the navigator's declared capability (core/pipeline.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.core import ranking
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.core.ids import anchor_of
from remindrag_integrations.core.navigate.zero_token import ZeroTokenNavigator
from remindrag_integrations.core.steps import NoLLM
from remindrag_integrations.core.walk import Prior, Stop, StopReason, Walk
from remindrag_integrations.testing import HashEmbedder

DOCS = Path(__file__).resolve().parents[1] / "docs" / "config.md"
TEXTS = {
    "a": "Alpha\nAlpha was built near Beta by the river.",
    "b": "Beta\nBeta is a small town on the river.",
    "c": "Gamma\nGamma is a far away star.",
}


@pytest.fixture(scope="module")
def engine() -> ReMindRAG:
    """Three titled documents of one chunk each; ``a`` names ``b``'s title."""
    rag = ReMindRAG(embeddings=HashEmbedder(64))
    rag.insert([Document(id=d, text=t) for d, t in TEXTS.items()])
    return rag


@pytest.fixture(scope="module")
def ids(engine: ReMindRAG) -> dict[str, str]:
    """Each document's chunk id."""
    return {d: engine.store.document_chunks(d)[0].id for d in TEXTS}


@pytest.fixture(scope="module")
def the_prior(ids: dict[str, str]) -> Prior:
    a, b, c = ids["a"], ids["b"], ids["c"]
    return Prior(
        score={a: 2.0, b: 1.0, c: 0.5},
        parts={
            a: {"cosine": 0.9, "lexical": 1.0, "graph": 0.0},
            b: {"cosine": 0.6, "lexical": 0.0, "graph": 0.4},
            c: {"cosine": 0.95, "lexical": 0.0, "graph": 0.0},
        },
        graph={},
    )


def _walk(engine: ReMindRAG, first: Prior | None = None, **cfg: Any) -> Walk:
    q = engine.embedder.embed(["Alpha built near Beta"])[0]
    walk = Walk(engine.store, q, RetrievalConfig.build(**cfg))
    walk.prior = first
    return walk


def test_every_rule_names_a_documented_config_field() -> None:
    """Each rule's knobs are RetrievalConfig fields, each with its row in docs/config.md."""
    cfg = RetrievalConfig().model_dump()
    rows = DOCS.read_text()
    assert [r.name for r in ranking.RULES] == [
        "first_pass",
        "memory",
        "title_hop",
        "fill",
        "dense_seat",
    ]
    for rule in ranking.RULES:
        for knob in rule.knobs:
            node: Any = cfg
            for part in knob.split("."):
                assert part in node, (rule.name, knob)
                node = node[part]
            assert re.search(rf"^\| `{re.escape(knob)}` \|", rows, re.M), knob
        assert callable(rule.apply) and rule.doc


def test_first_pass_is_the_prior_score_or_the_cosine(
    engine: ReMindRAG, ids: dict[str, str], the_prior: Prior
) -> None:
    got = ranking.first_pass_scores(_walk(engine, the_prior), [ids["a"], ids["b"]], [0.1, 0.2])
    assert got.tolist() == [2.0, 1.0]  # the fused scores, not the cosines given
    assert ranking.first_pass_scores(_walk(engine), [ids["a"]], [0.25]).tolist() == [0.25]


def test_memory_adds_its_weighed_evidence(the_prior: Prior) -> None:
    base = np.asarray([1.0, 0.5], dtype=np.float32)
    got = ranking.memory_scores(base, np.asarray([0.0, 0.5], dtype=np.float32), 2.0)
    assert got.tolist() == pytest.approx([1.0, 1.5])
    assert ranking.memory_scores(base, np.zeros(2, np.float32), 2.0).tolist() == [1.0, 0.5]
    assert ranking.score_span(None, 0.2, 0.5) == 1.0
    assert ranking.score_span(the_prior, 0.25, 0.5) == pytest.approx(1.75)


def test_the_title_hop_lifts_the_page_the_best_passage_names(
    engine: ReMindRAG, ids: dict[str, str], the_prior: Prior
) -> None:
    """ "Alpha was built near Beta" names the page titled "Beta": it gains, never above the
    passage that names it; "Gamma", not named, gains nothing; off (0) or no prior: nothing."""
    a = ids["a"]
    on = _walk(engine, the_prior, prior={"title_hop": 0.7})
    gains = ranking.title_hop_gains(on, [a], [2.0])
    assert set(gains) == {ids["b"]} and 0 < gains[ids["b"]] < 2.0 - 1.0
    off = _walk(engine, the_prior, prior={"title_hop": 0.0})
    assert ranking.title_hop_gains(off, [a], [2.0]) == {}
    assert ranking.title_hop_gains(_walk(engine), [a], [2.0]) == {}


def test_fill_takes_the_next_best_unread_candidates(
    engine: ReMindRAG, ids: dict[str, str], the_prior: Prior
) -> None:
    a, b, c = ids["a"], ids["b"], ids["c"]
    walk = _walk(engine, the_prior)
    assert ranking.fill(walk, {a}, 1) == [(b, 1.0)]
    assert ranking.fill(walk, {a}, 5, {c: 0.75}) == [(c, 1.25), (b, 1.0)]
    # without a prior: the nearest anchors by dense search, their chunks, none already had
    dense = ranking.fill(_walk(engine), {a}, 2)
    assert len(dense) == 2 and {cid for cid, _ in dense} == {b, c}


def test_the_dense_seat_lifts_the_nearest_candidate(ids: dict[str, str], the_prior: Prior) -> None:
    """The best cosine (c) ranked third is lifted to the second place's score; ranked well
    enough, vouched for or off: as given; not ranked at all: it comes in."""
    a, b, c = ids["a"], ids["b"], ids["c"]
    scored = [(a, 2.0, "seed"), (b, 1.0, "seed"), (c, 0.5, "dense_fill")]
    got, seat = ranking.dense_seat(2, the_prior, scored, {}, vouched=False)
    assert [x for x, _, _ in got] == [a, c, b]
    assert seat == ranking.Seat(c, 0.5, 1.0, added=False)
    assert scored[2] == (c, 0.5, "dense_fill")  # the input is not changed
    assert ranking.dense_seat(3, the_prior, scored, {}, vouched=False) == (scored, None)
    assert ranking.dense_seat(2, the_prior, scored, {}, vouched=True) == (scored, None)
    assert ranking.dense_seat(0, the_prior, scored, {}, vouched=False) == (scored, None)
    got, seat = ranking.dense_seat(2, the_prior, scored[:2], {c: 0.1}, vouched=False)
    assert [x for x, _, _ in got] == [a, c, b]
    assert seat is not None and seat.added and seat.before == pytest.approx(0.6)


def test_stop_reasons_keep_the_strings_stored_traces_hold(the_prior: Prior) -> None:
    assert str(Stop(StopReason.MAX_HOPS)) == "max_hops" == StopReason.MAX_HOPS
    assert str(Stop()) == ""
    assert str(Stop(StopReason.LLM_ERROR, "timed out")) == "llm_error: timed out"
    with pytest.raises(AttributeError):
        Stop().reason = StopReason.ENOUGH  # type: ignore[misc]
    with pytest.raises(AttributeError):
        the_prior.score = {}  # type: ignore[misc]


def test_one_function_word_list_decides_what_is_a_name() -> None:
    """A span of function words alone is no name, for the prior as for the extractor: the
    prior reads the extractor's list (it had a 94-word one of its own)."""
    from remindrag_integrations.core import prior
    from remindrag_integrations.core.entity_words import FUNCTION_WORDS

    assert not any(prior.is_name(w.capitalize()) for w in FUNCTION_WORDS)
    assert not prior.is_name("However Then") and prior.is_name("Then Nine Inch Nails")
    assert not hasattr(prior, "_FUNCTION_WORDS")


def test_one_word_tokenizer() -> None:
    from remindrag_integrations.core.calibration import name_share
    from remindrag_integrations.core.text import word_list, words

    assert word_list("Trent Reznor's band, Nine-Inch") == [
        "Trent",
        "Reznor",
        "s",
        "band",
        "Nine",
        "Inch",
    ]
    assert words("A a B") == frozenset({"a", "b"})
    assert name_share(["Nine Inch", "Kansas"], "the nine-inch nails of it") == 0.5


def test_every_stop_reason_is_documented() -> None:
    text = (DOCS.parent / "engine.md").read_text()
    for reason in StopReason:
        if reason.value:
            assert f"`{reason.value}" in text, reason


def test_the_walk_reads_through_its_cache_once(engine: ReMindRAG, ids: dict[str, str]) -> None:
    """The read cache is the walk's room: a second read of the same nodes asks the store
    nothing."""
    walk = _walk(engine)
    anchors = [anchor_of(ids["a"]), anchor_of(ids["b"])]
    calls: list[list[str]] = []

    class Counted:
        def __getattr__(self, name: str) -> Any:
            return getattr(engine.store, name)

        def node_embeddings(self, node_ids: list[str]) -> Any:
            calls.append(list(node_ids))
            return engine.store.node_embeddings(node_ids)

    walk.reads.store = Counted()  # type: ignore[assignment]
    first = walk.reads.sims(anchors)
    assert walk.reads.sims(anchors[::-1]) == first[::-1]
    assert calls == [anchors]


def test_the_zero_token_scratch_is_the_navigators_own_per_walk(engine: ReMindRAG) -> None:
    nav = ZeroTokenNavigator()
    w1, w2 = _walk(engine), _walk(engine)
    values = nav.values(w1)
    assert nav.values(w1) is values and nav.values(w2) is not values
    assert not hasattr(w1, "anchor_values") and not hasattr(w1, "node_values")


class _Declared:
    """A navigator of the user's own (not the packaged class) that declares it spends no
    token."""

    spends_tokens = False

    def __init__(self) -> None:
        self.inner = ZeroTokenNavigator()

    def decide(self, walk: Walk, query: str, current: str, opts: list, feedback: str) -> Any:
        return self.inner.decide(walk, query, current, opts, feedback)


def test_the_mode_is_the_navigators_declared_capability(engine: ReMindRAG) -> None:
    """A navigator that declares ``spends_tokens = False`` gets the zero-token ranking (read
    and unread candidates on one score): the packaged navigator's result, and the trace says
    no LLM walked."""
    from remindrag_integrations.core.pipeline import retrieve
    from remindrag_integrations.core.steps import Runtime, drive
    from remindrag_integrations.core.types import CostLedger

    cfg = RetrievalConfig.build(k=3, llm_navigation="always")  # "always" asks one that can
    rt = Runtime(NoLLM(), engine.embedder, engine.store.dim)

    def run(nav: Any) -> Any:
        ledger = CostLedger()
        return drive(retrieve(engine.store, "Alpha near Beta", cfg, nav, ledger), rt, ledger)

    packaged, declared = run(ZeroTokenNavigator()), run(_Declared())
    assert [(rc.chunk.id, rc.source, rc.rank_score) for rc in declared.chunks] == [
        (rc.chunk.id, rc.source, rc.rank_score) for rc in packaged.chunks
    ]
    # the title hop is a rule of the zero-token ranking only: "Alpha" names "Beta"
    assert any("title" in parts for parts in declared.trace.rank_evidence.values())
    assert declared.trace.navigation["llm"] is False
    assert declared.trace.rank_evidence == packaged.trace.rank_evidence
