"""The LLM navigator with the replies real models give: intent-based moves (a "forward" to a
visited node means going back), numbered choices, names and ids, the re-ask, the zero-token
fallback, the token budget and the no-progress stop, and the cache-friendly prompt layout."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from remindrag_integrations import ReMindRAG, Trace
from remindrag_integrations.adapters.llm import LangChainLLM, LlamaIndexLLM
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.core.steps import current_ask
from remindrag_integrations.core.types import CostLedger
from remindrag_integrations.testing import HashEmbedder, ScriptedLLM

ALWAYS = RetrievalConfig(llm_navigation="always")  # these test the LLM's walk itself


@pytest.fixture(scope="module")
def engine_and_question(hotpot: Any) -> tuple[ReMindRAG, dict]:
    qs, rows = hotpot
    q = qs[1]  # "Are Christopher Nolan and Sathish Kalathil both film directors?": two seeds
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder(), retrieval_config=ALWAYS)
    eng.insert([(p, rows[p]["title"] + "\n" + rows[p]["text"]) for p in q["context_pids"]])
    return eng, q


def scripted(replies: Any) -> tuple[ScriptedLLM, list[dict]]:
    """A fake whose reply is computed from the Ask's context; records what it saw."""
    seen: list[dict] = []

    def fn(prompt: str) -> str:
        ask = current_ask()
        assert ask is not None
        seen.append({"prompt": prompt, **ask.context})
        return replies(len(seen), ask.context, prompt)

    return ScriptedLLM(fn), seen


def test_forward_to_a_subgraph_node_is_read_as_going_back(engine_and_question) -> None:
    """The reply Qwen2.5-Coder-1.5B gave in issue #11: "forward" to the *other seed*."""
    eng, q = engine_and_question

    def reply(i: int, ctx: dict, prompt: str) -> str:
        if i == 1:
            other = next(n for n in ctx["subgraph"] if n != ctx["current"])
            return json.dumps({"enough": False, "action": "forward", "node": other})
        return '{"enough": true}'

    llm, seen = scripted(reply)
    r = eng.retrieve(q["question"], llm=llm)
    moves = [m for m in r.trace.moves if m.action != "read"]
    assert moves[0].action == "backward" and moves[0].node_id == r.trace.seeds[1]
    assert r.trace.unusable_replies == 0 and r.trace.stop_reason == "enough"


def test_numbers_labels_and_names_all_name_a_choice(engine_and_question) -> None:
    eng, q = engine_and_question
    for form in ("3", "n3", "#3", "3.", "choice 3", "name"):

        def reply(i: int, ctx: dict, prompt: str, form: str = form) -> str:
            if i > 1:
                return '{"enough": true}'
            line = re.search(r"^3\. (.+)$", prompt, re.MULTILINE)
            assert line is not None
            name = re.sub(r" \((entity|anchor)\).*$|, via .*$", "", line.group(1))
            return json.dumps({"enough": False, "go": name.strip('"') if form == "name" else form})

        llm, seen = scripted(reply)
        r = eng.retrieve(q["question"], llm=llm)
        target = seen[0]["choices"][2]
        first = next(m for m in r.trace.moves if m.action in ("forward", "backward"))
        assert first.node_id == target, form


def test_the_reask_lists_the_legal_choices_then_falls_back(engine_and_question) -> None:
    eng, q = engine_and_question
    llm, seen = scripted(lambda i, ctx, p: '{"enough": false, "go": 99}')
    # the fallback weighs the choices the LLM was shown: as many as the zero-token walk weighs
    r = eng.retrieve(q["question"], llm=llm, max_iterations=2, max_hops=2, max_neighbors_shown=30)
    assert "there is no choice 99" in seen[1]["prompt"]
    n = len(seen[1]["choices"])
    assert f'{{"enough": false, "go": {n}}}' in seen[1]["prompt"]
    assert r.trace.unusable_replies == 2 and r.trace.fallbacks == 1
    fallback = [m for m in r.trace.moves if m.note.startswith("fallback:")]
    zero = eng.retrieve(q["question"], max_iterations=1, max_hops=1)
    assert fallback[0].node_id == next(m.node_id for m in zero.trace.moves if m.action != "read")
    stopped = eng.retrieve(q["question"], llm=llm, on_invalid_move="stop")
    assert stopped.trace.stop_reason == "invalid_llm_output" and stopped.trace.fallbacks == 0


def test_the_token_budget_ends_a_wandering_walk(engine_and_question) -> None:
    eng, q = engine_and_question
    llm, seen = scripted(lambda i, ctx, p: '{"enough": false, "go": 1}')
    free = eng.retrieve(q["question"], llm=llm)
    budget = 2500
    r = eng.retrieve(q["question"], llm=llm, max_traversal_tokens=budget)
    assert free.trace.costs.stages["traversal"].tokens > budget
    assert r.trace.stop_reason == "token_budget"
    assert r.trace.costs.stages["traversal"].tokens <= budget


def test_decisions_that_read_nothing_end_the_walk(engine_and_question) -> None:
    eng, q = engine_and_question

    def reply(i: int, ctx: dict, prompt: str) -> str:  # bounce between the two seeds
        other = next(n for n in ctx["subgraph"] if n != ctx["current"])
        return json.dumps({"enough": False, "go": other})

    llm, _ = scripted(reply)
    r = eng.retrieve(q["question"], llm=llm, max_idle_decisions=3)
    assert r.trace.stop_reason == "no_progress" and r.trace.decisions == 3


def test_consecutive_prompts_share_everything_but_the_choices(engine_and_question) -> None:
    eng, q = engine_and_question
    llm, seen = scripted(
        lambda i, ctx, p: '{"enough": false, "go": 1}' if i < 5 else '{"enough": true}'
    )
    eng.retrieve(q["question"], llm=llm)
    prompts = [s["prompt"] for s in seen]
    assert len(prompts) == 5
    for before, after in zip(prompts, prompts[1:]):
        assert after.startswith(before.split("\nYou are at:")[0])
    assert "memory" not in prompts[0].split("Choices:")[1]  # a fresh graph has none to show


def test_memory_is_shown_where_it_exists(hotpot: Any) -> None:
    qs, rows = hotpot
    q = qs[1]
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder(), retrieval_config=ALWAYS)
    eng.insert([(p, rows[p]["title"] + "\n" + rows[p]["text"]) for p in q["context_pids"]])
    r = eng.retrieve(q["question"])
    eng.feedback(r.trace_id, helpful=True)
    llm, seen = scripted(lambda i, ctx, p: '{"enough": true}')
    # a replay threshold nothing reaches: the remembered edges stay choices
    again = eng.retrieve(q["question"], llm=llm, memory={"lam": 2.0})
    assert again.trace.stop_reason == "enough" and not again.trace.replayed_edges
    assert "[memory +" in seen[0]["prompt"]


def test_cached_prompt_tokens_reach_the_ledger_and_old_traces_load() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    usage = {
        "input_tokens": 1200,
        "output_tokens": 9,
        "total_tokens": 1209,
        "input_token_details": {"cache_read": 1024},
    }
    model = GenericFakeChatModel(messages=iter([AIMessage("{}", usage_metadata=usage)]))
    c = LangChainLLM(model).complete("prompt")
    assert (c.prompt_tokens, c.completion_tokens, c.cached_prompt_tokens) == (1200, 9, 1024)

    class Resp:  # a LlamaIndex CompletionResponse with OpenAI's raw usage
        text = "{}"
        raw = {
            "usage": {
                "prompt_tokens": 800,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 640},
            }
        }

    class Index:
        def complete(self, prompt: str) -> Resp:
            return Resp()

    li = LlamaIndexLLM(Index()).complete("prompt")
    assert (li.prompt_tokens, li.cached_prompt_tokens) == (800, 640)
    ledger = CostLedger()
    ledger.record("traversal", 1200, 9, cached_prompt_tokens=1024)
    assert CostLedger.from_dict(ledger.to_dict()).cached_prompt_tokens["traversal"] == 1024
    old = {"traversal": {"calls": 1, "prompt_tokens": 10, "completion_tokens": 2}}
    assert CostLedger.from_dict(old).stages["traversal"].cached_prompt_tokens == 0
    t = Trace("t", "q", [0.0], costs=CostLedger.from_dict(old))
    assert Trace.from_dict(t.to_dict()).costs.stages["traversal"].prompt_tokens == 10


def test_the_navigator_s_own_time_is_timed_without_its_llm_calls(engine_and_question) -> None:
    """``timings_ms["navigate"]`` is the navigation's non-LLM work: a slow LLM's wait is not in
    it (it is in the wall time), and the zero-token navigator's decisions are."""
    import time

    eng, q = engine_and_question

    def reply(i: int, ctx: dict, prompt: str) -> str:
        time.sleep(0.25)  # a slow model
        return '{"enough": true}' if i > 1 else json.dumps({"enough": False, "go": 1})

    llm, seen = scripted(reply)
    t0 = time.perf_counter()
    r = eng.retrieve(q["question"], llm=llm)
    wall = (time.perf_counter() - t0) * 1e3
    assert len(seen) >= 2 and wall >= 250 * len(seen)
    assert 0 < r.trace.timings_ms["navigate"] < 200
    free = eng.retrieve(q["question"])  # zero-token: its decisions are the navigation
    assert free.trace.decisions > 0 and free.trace.timings_ms["navigate"] > 0
