"""The local GGUF chat model with real packaged tiny models. These prove the plumbing
(grammar-constrained JSON, usage, chat template or plain prompt, engine and cache), never
quality."""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import run_cli
from hypothesis import given
from hypothesis import strategies as st

from remindrag_integrations import ReMindRAG, RetrievalConfig
from remindrag_integrations.adapters.cache import CachedLLM
from remindrag_integrations.adapters.llm import as_chat_llm
from remindrag_integrations.adapters.local_llm import LlamaCppChatModel, close_json, smollm2_path
from remindrag_integrations.core.prompts import EXTRACTION_PROMPT
from remindrag_integrations.testing import HashEmbedder

slow = pytest.mark.slow
needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="needs the 'local' extra"
)

DOCS = [
    ("d1", "Scott Derrickson directed Sinister. Sinister is a 2012 horror film."),
    ("d2", "Ed Wood was an American filmmaker who directed Plan 9 from Outer Space."),
]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=4))
def test_a_cut_off_json_object_is_closed_into_a_whole_prefix(obj):
    text = json.dumps(obj, separators=(",", ": "))
    for end in range(len(text) + 1):
        closed = json.loads(close_json(text[:end]))
        assert isinstance(closed, dict)
    assert json.loads(close_json(text)) == obj


def test_a_cut_off_extraction_keeps_its_whole_entries():
    cut = '{"title": "Demon algorithm", "entities": ["Demon", "Algorithm", "the dem'
    assert json.loads(close_json(cut)) == {
        "title": "Demon algorithm",
        "entities": ["Demon", "Algorithm"],
    }


@pytest.fixture(scope="module")
def smollm2():
    return LlamaCppChatModel(model_path="smollm2", n_ctx=1024, max_tokens=96)


@slow
@needs_llama
def test_json_prompt_gets_a_json_reply_with_usage(smollm2):
    prompt = EXTRACTION_PROMPT.format(text="Scott Derrickson directed Sinister.")
    msg = smollm2.invoke(prompt)
    assert isinstance(json.loads(msg.content), dict)
    usage = msg.usage_metadata
    assert usage["input_tokens"] > 100 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert smollm2.has_chat_template


@slow
@needs_llama
def test_other_prompts_are_free_text(smollm2):
    msg = smollm2.invoke("Name a colour.", max_tokens=12)
    assert msg.content.strip() and not msg.content.lstrip().startswith("{")


@slow
@needs_llama
def test_engine_indexes_through_the_local_model_and_the_cache(smollm2, tmp_path):
    runs = []
    for _ in range(2):
        llm = CachedLLM(as_chat_llm(smollm2), tmp_path, model_id="local:smollm2")
        engine = ReMindRAG(llm=llm, embeddings=HashEmbedder())
        runs.append((engine.insert(DOCS), engine.store.counts()))
    (first, counts1), (second, counts2) = runs
    assert first.costs.llm_calls["extraction"] == 2 and first.costs.total_tokens > 0
    assert counts1["entities"] > 0
    assert second.costs.total_calls == 0 and counts2 == counts1


@slow
@needs_llama
def test_gemma3_base_model_uses_a_plain_prompt(tmp_path):
    gemma = LlamaCppChatModel(model_path="gemma3", n_ctx=512, max_tokens=24)
    assert not gemma.has_chat_template
    msg = gemma.invoke('Is Paris in France? Reply with JSON only: {"enough": true}')
    assert isinstance(json.loads(msg.content), dict)
    assert msg.usage_metadata["input_tokens"] > 0


@slow
@needs_llama
def test_cli_index_with_local_model_twice_costs_nothing_the_second_time(tmp_path):
    assert smollm2_path().suffix == ".gguf"
    (tmp_path / "doc.txt").write_text(DOCS[0][1])
    outs = []
    for store in ("s1", "s2"):
        proc = run_cli(
            *("index", "doc.txt", "--store", store, "--llm", "local:smollm2", "--cache", "cache"),
            cwd=tmp_path,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert "estimated cost: 1 LLM calls" in outs[0]
    assert "actual cost: 1 LLM calls" in outs[0]
    assert "actual cost: 0 LLM calls, 0 tokens (1 replies from the cache)" in outs[1]


@slow
@needs_llama
def test_a_walk_with_a_real_model_gets_only_legal_moves_and_reuses_its_prefix(smollm2):
    """The traversal grammar allows only the listed choice numbers or stop; llama.cpp reuses
    the evaluated prefix of the previous step, reported as cached prompt tokens."""
    engine = ReMindRAG(llm=None, embeddings=HashEmbedder())
    engine.insert(DOCS)
    walks = {"llm_navigation": "always"}  # the model walks even where the first pass is sure
    r = engine.retrieve(
        "Who directed Sinister?", llm=smollm2, max_iterations=3, max_hops=3, **walks
    )
    st = r.trace.costs.stages["traversal"]
    assert st.calls >= 1 and r.trace.unusable_replies == 0
    one_step = {"max_iterations": 1, "max_hops": 1, **walks}
    engine.retrieve("Who directed Sinister?", llm=smollm2, **one_step)
    again = engine.retrieve("Who directed Sinister?", llm=smollm2, **one_step)
    cached = again.trace.costs.stages["traversal"].cached_prompt_tokens
    # the same prompt as the previous call: all but its last token come from the cache
    assert cached == again.trace.costs.stages["traversal"].prompt_tokens - 1


@slow
@needs_llama
def test_a_real_models_filter_names_only_collected_chunks(smollm2):
    # memorize_judge="filter": the filter judges even an answer whose words ground it
    cfg = RetrievalConfig(memorize_judge="filter")
    engine = ReMindRAG(llm=None, embeddings=HashEmbedder(), retrieval_config=cfg)
    engine.insert(DOCS)
    r = engine.retrieve("Who directed Sinister?", max_hops=2)
    assert r.trace.subgraph_edges
    write = engine.memorize(r.trace_id, answer="Scott Derrickson", llm=smollm2)
    named = engine.trace(r.trace_id).costs.stages["memorize"]
    assert named.calls == 1
    # the chunks it was shown: every one the answer was written from (read, then returned)
    assert set(write.supporting_chunks) <= {*r.trace.chunk_ids, *r.trace.rank_evidence}
    assert write.applied == bool(write.supporting_chunks)
