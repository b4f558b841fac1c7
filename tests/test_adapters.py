"""LLM and embedding adapters with the frameworks' own fakes, and replaceable prompts."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from remindrag_integrations import ConfigError, Document, ReMindRAG
from remindrag_integrations.adapters.llm import (
    CallableLLM,
    LangChainLLM,
    LlamaIndexLLM,
    as_chat_llm,
)
from remindrag_integrations.core.prompts import EXTRACTION_PROMPT, Prompts
from remindrag_integrations.testing import HashEmbedder

REPLY = '{"title": "Paris", "entities": ["Paris", "France"], "triples": [["Paris", "Paris is in France.", "France"]]}'


def test_langchain_chat_model_usage_metadata_is_used() -> None:
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    msg = AIMessage(
        content=REPLY,
        usage_metadata={"input_tokens": 111, "output_tokens": 22, "total_tokens": 133},
    )
    model = GenericFakeChatModel(messages=iter([msg]))
    llm = as_chat_llm(model)
    assert isinstance(llm, LangChainLLM)
    eng = ReMindRAG(llm=model, embeddings=HashEmbedder())
    report = eng.insert([Document("d", "Paris is the capital of France.")])
    assert report.costs.stages["extraction"].prompt_tokens == 111
    assert report.costs.stages["extraction"].completion_tokens == 22
    assert report.relations == 1


def test_langchain_model_without_usage_is_counted() -> None:
    from langchain_core.language_models import FakeListChatModel

    eng = ReMindRAG(llm=FakeListChatModel(responses=[REPLY]), embeddings=HashEmbedder())
    report = eng.insert([Document("d", "Paris is the capital of France.")])
    assert report.costs.stages["extraction"].prompt_tokens > 100
    assert report.costs.stages["extraction"].completion_tokens > 10


def test_llamaindex_llm_adapter() -> None:
    from llama_index.core.llms import MockLLM

    llm = as_chat_llm(MockLLM(max_tokens=5))
    assert isinstance(llm, LlamaIndexLLM)
    c = llm.complete("hello world")
    assert c.text and c.prompt_tokens == 2
    assert asyncio.run(llm.acomplete("hello world")).text == c.text


def test_callables_sync_and_async() -> None:
    async def afn(p: str) -> str:
        return "a:" + p

    assert isinstance(as_chat_llm(lambda p: p.upper()), CallableLLM)
    assert as_chat_llm(lambda p: p.upper()).complete("x").text == "X"
    assert asyncio.run(as_chat_llm(afn).acomplete("x")).text == "a:x"
    with pytest.raises(ConfigError):
        as_chat_llm(42)


def test_embedding_adapters() -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from llama_index.core.embeddings import MockEmbedding

    for emb in (DeterministicFakeEmbedding(size=32), MockEmbedding(embed_dim=32)):
        eng = ReMindRAG(embeddings=emb)
        eng.insert([Document("d", "Paris is the capital of France. France is in Europe.")])
        assert eng.store.dim == 32
        assert eng.retrieve("capital of France").chunks


def test_wrong_embedding_dimension_is_a_typed_error() -> None:
    from remindrag_integrations.errors import EmbeddingError

    eng = ReMindRAG(embeddings=HashEmbedder(64))
    eng.insert([Document("d", "Paris is the capital of France.")])
    eng.embedder = HashEmbedder(32)
    with pytest.raises(EmbeddingError):
        eng.insert([Document("e", "Berlin is the capital of Germany.")])
    with pytest.raises(EmbeddingError):
        eng.retrieve("Berlin")


def test_prompts_are_replaceable_and_checked() -> None:
    seen: list[str] = []

    def llm(p: str) -> str:
        seen.append(p)
        return REPLY

    custom = Prompts(extraction="MY TEMPLATE. Reply JSON.\n{text}")
    eng = ReMindRAG(llm=llm, embeddings=HashEmbedder(), prompts=custom)
    eng.insert([Document("d", "Paris is the capital of France.")])
    assert seen[0].startswith("MY TEMPLATE") and "Paris is the capital" in seen[0]
    with pytest.raises(ConfigError):
        Prompts(extraction="no placeholder here")
    with pytest.raises(ConfigError):
        Prompts(extraction=EXTRACTION_PROMPT + "{unknown}")


def test_packaged_sentence_transformer_loads_offline() -> None:
    from remindrag_integrations.adapters.embeddings import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder()
    vecs = emb.embed(
        [
            "Paris is the capital of France.",
            "The capital of France is Paris.",
            "Bananas are yellow.",
        ]
    )
    assert vecs.shape == (3, 384)
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2]) + 0.3
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)


def test_a_small_batch_runs_on_one_torch_thread_and_gives_the_count_back() -> None:
    """A question and its names (a small batch) run on one CPU thread, where torch's
    threads cost more than they save (benchmarks/st_query.py); a long batch keeps them, and
    torch's thread count is what it was after either."""
    import torch

    from remindrag_integrations.adapters.embeddings import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder()
    model = emb._load()
    seen: list[int] = []
    hook = model[0].register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        small = emb.embed(["Who directed Sinister?", "Sinister"])
        emb.embed(["Paris is the capital of France. " * 20] * 4)  # 4 x ~140 tokens
        assert seen == [1, 2] and torch.get_num_threads() == 2
    finally:
        hook.remove()
        torch.set_num_threads(before)
    # the same vectors as on every thread
    ref = np.asarray(model.encode(["Who directed Sinister?", "Sinister"]), dtype=np.float32)
    np.testing.assert_allclose(small, ref / np.linalg.norm(ref, axis=1, keepdims=True), atol=1e-5)


def test_concurrent_small_batches_give_torch_its_thread_count_back() -> None:
    import threading

    from remindrag_integrations.adapters.embeddings import one_thread

    class FakeTorch:
        threads = 8

        def get_num_threads(self) -> int:
            return self.threads

        def set_num_threads(self, n: int) -> None:
            self.threads = n

    torch, inside, go = FakeTorch(), threading.Barrier(3), threading.Event()

    def small_batch() -> None:
        with one_thread(torch):
            inside.wait()
            go.wait()

    threads = [threading.Thread(target=small_batch) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert torch.threads == 1  # both inside: one thread each
    go.set()
    for t in threads:
        t.join()
    assert torch.threads == 8
