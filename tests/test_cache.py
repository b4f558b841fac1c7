"""The on-disk LLM response cache: a second run costs no LLM call and gives the same graph."""

from __future__ import annotations

import asyncio
import json

import pytest

from remindrag_integrations import ReMindRAG
from remindrag_integrations.adapters.cache import CachedLLM, ResponseCache, cache_key
from remindrag_integrations.core.protocols import Completion
from remindrag_integrations.testing import HashEmbedder, OracleLLM

DOCS = [
    ("d1", "Scott Derrickson directed Sinister. Sinister is a horror film from 2012."),
    ("d2", "Ed Wood was an American filmmaker. Ed Wood directed Plan 9 from Outer Space."),
    ("d3", "Denver is the capital of Colorado. Scott Derrickson was born in Denver."),
]


class Echo:
    """A ChatLLM that answers with a numbered echo, so each real call is distinguishable."""

    def __init__(self) -> None:
        self.served = 0

    def complete(self, prompt: str) -> Completion:
        self.served += 1
        return Completion(f"reply {self.served} to {prompt}", 7, 3)

    async def acomplete(self, prompt: str) -> Completion:
        return self.complete(prompt)


def test_second_index_run_costs_no_llm_call(tmp_path):
    runs = []
    for _ in range(2):
        llm = CachedLLM(OracleLLM(), tmp_path / "cache", model_id="oracle")
        engine = ReMindRAG(llm=llm, embeddings=HashEmbedder())
        report = engine.insert(DOCS)
        runs.append((report, engine.store.counts()))
    (first, counts1), (second, counts2) = runs
    assert first.costs.llm_calls["extraction"] == 3
    assert first.costs.total_tokens > 0
    assert second.costs.total_calls == 0
    assert second.costs.total_tokens == 0
    assert counts1 == counts2


def test_cached_reply_is_the_original_reply_with_its_usage(tmp_path):
    backend = Echo()
    llm = CachedLLM(backend, tmp_path, model_id="echo")
    first = llm.complete("hello")
    again = CachedLLM(Echo(), tmp_path, model_id="echo").complete("hello")
    assert again.text == first.text == "reply 1 to hello"
    assert (again.prompt_tokens, again.completion_tokens) == (7, 3)
    assert again.cached and not first.cached


def test_async_path_shares_the_cache(tmp_path):
    llm = CachedLLM(Echo(), tmp_path, model_id="echo")
    first = asyncio.run(llm.acomplete("q"))
    second = asyncio.run(CachedLLM(Echo(), tmp_path, model_id="echo").acomplete("q"))
    assert second.text == first.text and second.cached


def test_model_id_separates_entries(tmp_path):
    a = CachedLLM(Echo(), tmp_path, model_id="model-a").complete("same prompt")
    b = CachedLLM(Echo(), tmp_path, model_id="model-b").complete("same prompt")
    assert not b.cached and a.text == b.text  # both fresh calls (each Echo starts at 1)
    assert cache_key("model-a", "p") != cache_key("model-b", "p")
    assert len(ResponseCache(tmp_path)) == 2


@pytest.mark.parametrize("damage", ["{not json", json.dumps({"format": 1, "key": "other"}), ""])
def test_corrupt_entry_is_ignored_with_a_warning_and_replaced(tmp_path, damage):
    CachedLLM(Echo(), tmp_path, model_id="m").complete("p")
    (entry,) = tmp_path.glob("??/*.json")
    entry.write_text(damage, encoding="utf-8")
    llm = CachedLLM(Echo(), tmp_path, model_id="m")
    with pytest.warns(UserWarning, match="unreadable LLM cache entry"):
        fresh = llm.complete("p")
    assert not fresh.cached and fresh.text == "reply 1 to p"
    assert CachedLLM(Echo(), tmp_path, model_id="m").complete("p").cached


def test_writes_leave_no_temporary_files(tmp_path):
    llm = CachedLLM(Echo(), tmp_path, model_id="m")
    for i in range(5):
        llm.complete(f"prompt {i}")
    assert not list(tmp_path.rglob(".tmp-*"))
    assert len(ResponseCache(tmp_path)) == 5
