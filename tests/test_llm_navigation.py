"""``llm_navigation``: the LLM walks always, never, or (auto) only when the first pass is
unsure of its top k. Scripted fakes count the calls: a sure first pass must not call the LLM,
and "never" must return the zero-token result while the LLM still answers."""

from __future__ import annotations

from typing import Any

import pytest

from remindrag_integrations import ReMindRAG, Trace
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.errors import ConfigError
from remindrag_integrations.testing import HashEmbedder, ScriptedLLM


@pytest.fixture(scope="module")
def engine_and_question(hotpot: Any) -> tuple[ReMindRAG, str]:
    qs, rows = hotpot
    q = qs[1]
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    eng.insert([(p, rows[p]["title"] + "\n" + rows[p]["text"]) for p in q["context_pids"]])
    return eng, q["question"]


def walker() -> ScriptedLLM:
    """Always takes the first choice; answers "Yes." to anything else."""
    return ScriptedLLM(lambda p: '{"enough": false, "go": 1}' if "Choices:" in p else "Yes.")


def ids(r: Any) -> list[str]:
    return [c.chunk.id for c in r.chunks]


def test_never_walks_zero_token_and_asks_nothing(engine_and_question) -> None:
    eng, q = engine_and_question
    llm = walker()
    r = eng.retrieve(q, llm=llm, llm_navigation="never")
    assert llm.prompts == []
    assert ids(r) == ids(eng.retrieve(q))
    assert r.trace.navigation["llm"] is False
    assert "never" in r.trace.navigation["reason"]
    assert r.trace.decisions > 0  # the zero-token navigator walked


def test_never_still_answers_with_the_llm(engine_and_question) -> None:
    eng, q = engine_and_question
    llm = walker()
    a = eng.answer(q, llm=llm, llm_navigation="never")
    assert a.text == "Yes."
    assert len(llm.prompts) == 1 and "Choices:" not in llm.prompts[0]
    trace = a.retrieval.trace
    assert trace.llm_calls.get("traversal", 0) == 0 and trace.llm_calls["answer"] == 1


def test_always_asks_the_llm(engine_and_question) -> None:
    eng, q = engine_and_question
    llm = walker()
    r = eng.retrieve(q, llm=llm, llm_navigation="always", max_iterations=3, max_hops=3)
    assert len(llm.prompts) == r.trace.traversal_calls > 0
    assert r.trace.navigation == {
        "mode": "always",
        "llm": True,
        "reason": "llm_navigation='always'",
    }


def test_auto_asks_exactly_when_the_graph_pulls_beyond_the_top_k(engine_and_question) -> None:
    eng, q = engine_and_question
    probe = eng.retrieve(q, llm=walker(), navigator={"llm_threshold": 1.0})
    pull = probe.trace.navigation["outside"]
    assert pull is not None and pull > 0
    assert probe.trace.navigation["margin"] >= 0.0
    assert 0.0 <= probe.trace.navigation["agreement"] <= 1.0
    sure, unsure = walker(), walker()
    r_sure = eng.retrieve(q, llm=sure, navigator={"llm_threshold": pull})  # pull > pull: no
    r_unsure = eng.retrieve(q, llm=unsure, navigator={"llm_threshold": pull - 1e-6}, max_hops=2)
    assert sure.prompts == [] and ids(r_sure) == ids(eng.retrieve(q))
    assert r_sure.trace.navigation["reason"].startswith("sure: graph pull")
    assert len(unsure.prompts) == r_unsure.trace.traversal_calls > 0
    assert r_unsure.trace.navigation["reason"].startswith("unsure: a passage ranked 6-10")
    assert r_unsure.trace.navigation["mode"] == "auto" and r_unsure.trace.navigation["llm"]


def test_auto_does_not_ask_when_every_candidate_is_returned(engine_and_question) -> None:
    eng, q = engine_and_question
    llm = walker()
    r = eng.retrieve(q, llm=llm, k=200, navigator={"llm_threshold": 0.0})
    assert llm.prompts == [] and r.trace.navigation["outside"] is None
    assert "nothing to choose" in r.trace.navigation["reason"]


def test_auto_without_a_prior_lets_the_llm_walk(engine_and_question) -> None:
    eng, q = engine_and_question
    llm = walker()
    r = eng.retrieve(q, llm=llm, prior={"enabled": False}, max_hops=2)
    assert llm.prompts and r.trace.navigation["llm"]
    assert "no graph signal" in r.trace.navigation["reason"]


def test_the_engine_default_and_a_per_call_override(engine_and_question) -> None:
    eng, q = engine_and_question
    cfg = RetrievalConfig(llm_navigation="never")
    with_llm = ReMindRAG(
        llm=walker(), embeddings=eng.embedder, store=eng.store, retrieval_config=cfg
    )
    assert with_llm.retrieve(q).trace.traversal_calls == 0
    r = with_llm.retrieve(q, llm_navigation="always", max_hops=1)
    assert r.trace.traversal_calls > 0


def test_the_decision_survives_a_trace_round_trip(engine_and_question) -> None:
    eng, q = engine_and_question
    r = eng.retrieve(q, llm=walker(), navigator={"llm_threshold": 1.0})
    back = Trace.from_dict(r.trace.to_dict())
    assert back.navigation == r.trace.navigation and back.navigation["llm"] is False
    assert eng.retrieve(q).trace.navigation["reason"] == "no LLM: zero-token walk"


@pytest.mark.parametrize(
    "bad",
    [{"llm_navigation": "sometimes"}, {"navigator": {"llm_threshold": 1.5}}, {"llm_navigation": 1}],
)
def test_bad_values_are_config_errors(engine_and_question, bad: dict) -> None:
    eng, q = engine_and_question
    with pytest.raises(ConfigError):
        eng.retrieve(q, **bad)


def test_the_trace_page_and_the_path_say_who_walked_and_why(engine_and_question) -> None:
    from remindrag_integrations.app.display import describe_path
    from remindrag_integrations.app.html_trace import render_trace

    eng, q = engine_and_question
    r = eng.retrieve(q, llm=walker(), llm_navigation="never")
    page = render_trace(eng.store, r.trace)
    assert "walk: zero-token (llm_navigation=&#x27;never&#x27;)" in page
    assert describe_path(eng, r.trace)[-1] == "walk     llm_navigation='never'"
