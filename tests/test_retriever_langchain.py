"""ReMindRetriever as a LangChain retriever: documents out, runs nested, chains, tools, an
agent, and post-answer memory through ReMindMemoryCallback. LangChain's own fakes only."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler, UsageMetadataCallbackHandler
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever as LCBaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.tools import create_retriever_tool
from llama_index.core.retrievers import BaseRetriever as LIBaseRetriever

from remindrag_integrations import (
    ConfigError,
    IndexConfig,
    ReMindMemoryCallback,
    ReMindRAG,
    ReMindRetriever,
)
from remindrag_integrations import Document as EngineDocument
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.core.indexing import make_chunks
from remindrag_integrations.testing import HashEmbedder, OracleLLM

ALWAYS = RetrievalConfig(llm_navigation="always")  # these test the LLM's walk

N_QUESTIONS = 3


def text_of(row: dict) -> str:
    return f"{row['title']}\n{row['text']}"


def lc_docs(hotpot: Any, n: int = N_QUESTIONS) -> tuple[list[dict], list[LCDocument]]:
    questions, rows = hotpot
    qs = questions[:n]
    pids = list(dict.fromkeys(p for q in qs for p in (*q["gold_pids"], *q["context_pids"])))
    docs = [
        LCDocument(id=p, page_content=text_of(rows[p]), metadata={"title": rows[p]["title"]})
        for p in pids
    ]
    return qs, docs


def gold_chunks(q: dict, rows: dict) -> set[str]:
    return {
        c.id
        for p in q["gold_pids"]
        for c in make_chunks(EngineDocument(p, text_of(rows[p])), IndexConfig())
    }


def oracle_retriever(hotpot: Any, **kwargs: Any) -> tuple[ReMindRetriever, list[dict]]:
    """A retriever whose navigator is the OracleLLM (reads the real prompts, knows gold)."""
    qs, docs = lc_docs(hotpot)
    oracle = OracleLLM(gold={q["question"]: gold_chunks(q, hotpot[1]) for q in qs})
    r = ReMindRetriever.from_documents(
        docs, llm=oracle, embeddings=HashEmbedder(), **{"llm_navigation": "always", **kwargs}
    )
    oracle.store = r.engine.store
    return r, qs


def format_docs(docs: list[LCDocument]) -> str:
    return "\n\n".join(d.page_content for d in docs)


PROMPT = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")


def rag_chain(retriever: ReMindRetriever, llm: Any) -> Any:
    return (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | PROMPT
        | llm
        | StrOutputParser()
    )


@pytest.fixture(scope="module")
def zero(hotpot: Any) -> ReMindRetriever:
    """Zero-token retriever (no LLM) over the first questions' documents."""
    _, docs = lc_docs(hotpot)
    return ReMindRetriever.from_documents(docs, embeddings=HashEmbedder())


# --- construction --------------------------------------------------------------------------


def test_is_both_frameworks_retriever(zero: ReMindRetriever) -> None:
    assert isinstance(zero, LCBaseRetriever)
    assert isinstance(zero, LIBaseRetriever)


def test_documents_carry_ids_provenance_and_traversal_facts(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    q = qs[0]
    docs = r.invoke(q["question"])
    gold = gold_chunks(q, hotpot[1])
    assert gold <= {d.id for d in docs}
    for d in docs:
        m, own = d.metadata, d.metadata["remindrag"]
        assert set(m) == {"title", "remindrag"}  # the document's own keys, plus ours
        assert d.id == own["chunk_id"] and own["doc_id"] in {x.id for x in lc_docs(hotpot)[1]}
        assert own["trace_id"] == r.last_trace_id
        assert m["title"] == hotpot[1][own["doc_id"]]["title"]  # the document's own metadata
        assert d.page_content in text_of(hotpot[1][own["doc_id"]])
        assert isinstance(own["replayed"], bool) and isinstance(own["path"], list)
        json.dumps(m)  # JSON-serialisable
    walked = [d for d in docs if d.metadata["remindrag"]["found_by"] != "dense_fill"]
    assert all(d.metadata["remindrag"]["path_ids"][-1] == d.id for d in walked)
    names = {
        n.id: n.name for n in r.engine.store.get_nodes(walked[0].metadata["remindrag"]["path_ids"])
    }
    assert walked[0].metadata["remindrag"]["path"] == list(names.values())
    got = sorted(d.metadata["remindrag"]["doc_id"] for d in docs if d.id in gold)
    assert got == sorted(q["gold_pids"])


def test_document_ids_fall_back_to_metadata_then_content_hash() -> None:
    docs = [
        LCDocument(
            page_content="Ada Lovelace wrote the first program.", metadata={"doc_id": "ada"}
        ),
        LCDocument(page_content="Alan Turing proposed the Turing test.", metadata={"id": "turing"}),
        LCDocument(page_content="Grace Hopper built the first compiler."),
    ]
    r = ReMindRetriever.from_documents(docs, embeddings=HashEmbedder())
    ids = set(r.engine.store.document_ids())
    assert {"ada", "turing"} <= ids and len(ids) == 3
    again = r.add_documents(docs)  # same ids and text: nothing re-indexed
    assert again.documents == 0 and again.skipped_documents == 3


def test_from_texts_with_metadatas_ids_and_config() -> None:
    r = ReMindRetriever.from_texts(
        ["Paris is the capital of France.", "Berlin is the capital of Germany."],
        metadatas=[{"lang": "en"}, {"lang": "de"}],
        ids=["fr", "de"],
        embeddings=HashEmbedder(),
        k=1,
        chunk_tokens=64,
    )
    assert r.engine.index_config.chunk_tokens == 64 and r.engine.retrieval_config.k == 1
    (doc,) = r.invoke("capital of Germany")
    assert doc.metadata["remindrag"]["doc_id"] == "de" and doc.metadata["lang"] == "de"
    with pytest.raises(ConfigError):
        ReMindRetriever.from_texts(["x y z"], embeddings=HashEmbedder(), no_such_field=1)


def test_add_documents_makes_new_text_retrievable(zero: ReMindRetriever) -> None:
    r = ReMindRetriever(engine=ReMindRAG(embeddings=HashEmbedder(), store=None))
    r.add_documents([LCDocument(id="a", page_content="Kiwis are flightless birds of New Zealand.")])
    report = r.add_documents(
        [LCDocument(id="b", page_content="Emus are flightless birds of Australia.")]
    )
    assert report.documents == 1
    assert r.invoke("Which birds live in Australia?", k=1)[0].metadata["remindrag"]["doc_id"] == "b"


def test_save_and_load_keep_graph_memory_and_k(hotpot: Any, tmp_path: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    r.k = 3
    q = qs[0]["question"]
    first = r.invoke(q)
    assert r.memorize(first[0].metadata["remindrag"]["trace_id"], answer="a spirit").applied
    r.save(tmp_path / "idx")
    loaded = ReMindRetriever.load(tmp_path / "idx", embeddings=HashEmbedder())
    assert loaded.k == 3
    assert loaded.memory_stats().touched_edges == r.memory_stats().touched_edges > 0
    assert [d.id for d in loaded.invoke(q)] == [d.id for d in r.invoke(q)]


# --- invoke / ainvoke / batch / k ----------------------------------------------------------


def test_k_as_field_and_per_call(zero: ReMindRetriever, hotpot: Any) -> None:
    q = hotpot[0][0]["question"]
    assert len(ReMindRetriever(engine=zero.engine, k=2).invoke(q)) == 2
    assert len(zero.invoke(q, k=3)) == 3
    assert len(ReMindRetriever(engine=zero.engine, k=2).invoke(q, k=4)) == 4
    with pytest.raises(ConfigError):
        zero.invoke(q, no_such_override=1)


def test_ainvoke_and_batch_match_invoke(zero: ReMindRetriever, hotpot: Any) -> None:
    qs = [q["question"] for q in hotpot[0][:N_QUESTIONS]]
    sync = [[d.id for d in zero.invoke(q)] for q in qs]
    assert [[d.id for d in docs] for docs in zero.batch(qs)] == sync
    got = asyncio.run(zero.ainvoke(qs[0]))
    assert [d.id for d in got] == sync[0]


class _AsyncOnlyModel(GenericFakeChatModel):
    """Fails on the sync path: proves ainvoke awaits the model instead of using a thread."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("sync path used")

    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        return GenericFakeChatModel._generate(self, *args, **kwargs)


def test_ainvoke_is_a_real_async_path(zero: ReMindRetriever, hotpot: Any) -> None:
    model = _AsyncOnlyModel(messages=iter(['{"enough": true}'] * 10))
    r = ReMindRetriever(
        engine=ReMindRAG(
            llm=model, embeddings=HashEmbedder(), store=zero.engine.store, retrieval_config=ALWAYS
        )
    )
    q = hotpot[0][0]["question"]
    docs = asyncio.run(r.ainvoke(q))
    trace = r.trace(docs[0].metadata["remindrag"]["trace_id"])
    assert trace.traversal_calls == 1 and trace.stop_reason == "enough"


# --- runs, callbacks, tokens ---------------------------------------------------------------


class _RunTree(BaseCallbackHandler):
    def __init__(self) -> None:
        self.retriever_runs: list[Any] = []
        self.model_parents: list[Any] = []
        self.chains: dict[Any, tuple[str, Any]] = {}  # run id: (name, parent run id)

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None, **kw: Any
    ) -> None:
        self.chains[run_id] = (kw.get("name"), parent_run_id)

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: Any, **kw: Any) -> None:
        self.retriever_runs.append(run_id)

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: Any, parent_run_id: Any = None, **kw: Any
    ) -> None:
        self.model_parents.append(parent_run_id)


def _usage_model(n: int) -> GenericFakeChatModel:
    msg = AIMessage(
        content='{"enough": true}',
        response_metadata={"model_name": "fake-nav"},
        usage_metadata={"input_tokens": 100, "output_tokens": 7, "total_tokens": 107},
    )
    return GenericFakeChatModel(messages=iter([msg] * n))


@pytest.mark.parametrize("use_async", [False, True])
def test_inner_llm_calls_are_children_and_tokens_are_reported(
    zero: ReMindRetriever, hotpot: Any, use_async: bool
) -> None:
    r = ReMindRetriever(
        engine=ReMindRAG(
            llm=_usage_model(10),
            embeddings=HashEmbedder(),
            store=zero.engine.store,
            retrieval_config=ALWAYS,
        )
    )
    tree, usage = _RunTree(), UsageMetadataCallbackHandler()
    config = {"callbacks": [tree, usage]}
    q = hotpot[0][1]["question"]
    docs = asyncio.run(r.ainvoke(q, config)) if use_async else r.invoke(q, config)
    # each model call is a child of the walk's run (issue 47), a child of the retriever run
    walks = {tree.chains[p] for p in tree.model_parents}
    assert tree.model_parents and walks == {("ReMindRAG.walk", tree.retriever_runs[0])}
    trace = r.trace(docs[0].metadata["remindrag"]["trace_id"])
    assert usage.usage_metadata["fake-nav"]["input_tokens"] == 100 * trace.traversal_calls
    assert trace.tokens["traversal"] == 107 * trace.traversal_calls > 0


# --- LCEL chain and tools ------------------------------------------------------------------


def test_lcel_chain_puts_our_chunks_in_the_prompt(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    q = qs[1]
    out = rag_chain(r, ParrotFakeChatModel()).invoke(q["question"])  # echoes the prompt
    for cid in gold_chunks(q, hotpot[1]):
        assert r.engine.store.get_chunk(cid).text in out
    assert out.endswith(f"Question: {q['question']}")


def test_retriever_tool_returns_chunks(zero: ReMindRetriever, hotpot: Any) -> None:
    q = hotpot[0][0]["question"]
    expected = zero.invoke(q)
    tool = create_retriever_tool(zero, "remind_search", "Search the knowledge graph.")
    text = tool.invoke({"query": q})
    assert all(d.page_content in text for d in expected)


def test_retriever_tool_content_and_artifact(zero: ReMindRetriever, hotpot: Any) -> None:
    q = hotpot[0][0]["question"]
    tool = create_retriever_tool(
        zero, "remind_search", "Search the knowledge graph.", response_format="content_and_artifact"
    )
    msg = tool.invoke(
        {"name": "remind_search", "args": {"query": q}, "id": "call-1", "type": "tool_call"}
    )
    assert isinstance(msg, ToolMessage)
    assert [d.id for d in msg.artifact] == [d.id for d in zero.invoke(q)]
    assert msg.artifact[0].page_content in msg.content


def run_agent(model: Any, tools: list[Any], question: str) -> list[Any]:
    """A minimal tool-calling agent loop built from LangChain primitives."""

    def loop(q: str) -> list[Any]:
        messages: list[Any] = [HumanMessage(q)]
        by_name = {t.name: t for t in tools}
        for _ in range(5):
            ai = model.invoke(messages)
            messages.append(ai)
            if not ai.tool_calls:
                return messages
            messages += [by_name[c["name"]].invoke(c) for c in ai.tool_calls]
        return messages

    return RunnableLambda(loop, name="agent")


def test_agent_calls_the_tool_and_gets_our_chunks(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    q = qs[0]
    tool = create_retriever_tool(
        r, "remind_search", "Search the knowledge graph.", response_format="content_and_artifact"
    )
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {"name": "remind_search", "id": "c1", "args": {"query": q["question"]}}
                    ],
                ),
                AIMessage(content="A lilu is a spirit."),
            ]
        )
    )
    cb = ReMindMemoryCallback(r)
    messages = run_agent(model, [tool], q["question"]).invoke(
        q["question"], config={"callbacks": [cb]}
    )
    tool_msg = next(m for m in messages if isinstance(m, ToolMessage))
    assert gold_chunks(q, hotpot[1]) <= {d.id for d in tool_msg.artifact}
    assert messages[-1].content == "A lilu is a spirit."
    assert r.memory_stats().writes_applied == 1 and cb.writes[0].applied


# --- memory after the answer ---------------------------------------------------------------


def test_callback_memorizes_once_per_answer_and_second_ask_is_cheaper(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    cb = ReMindMemoryCallback(r)
    chain = rag_chain(r, FakeListChatModel(responses=["It is a spirit."]))
    calls = []
    for n, q in enumerate([qs[0], qs[0], qs[1]], start=1):
        chain.invoke(q["question"], config={"callbacks": [cb]})
        calls.append(r.trace(r.last_trace_id).traversal_calls)
        assert r.memory_stats().writes_applied == n  # exactly one write per answer
    assert calls[1] < calls[0]  # memory replay replaced LLM traversal steps
    assert gold_chunks(qs[0], hotpot[1]) <= set(r.trace(cb.writes[1].trace_id).chunk_ids)
    assert r.memory_stats().writes_skipped == 0 and r.memory_stats().touched_edges > 0


def test_callback_on_a_streamed_answer_writes_after_the_last_chunk(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    cb = ReMindMemoryCallback(r)
    chain = rag_chain(r, FakeListChatModel(responses=["It is a spirit."] * 3))
    cfg = {"callbacks": [cb]}
    stream = chain.stream(qs[0]["question"], config=cfg)
    first = next(stream)
    assert first and r.memory_stats().writes_applied == 0  # not yet: still streaming
    rest = "".join(stream)
    assert first + rest == "It is a spirit."
    assert r.memory_stats().writes_applied == 1
    abandoned = chain.stream(qs[1]["question"], config=cfg)
    next(abandoned)
    abandoned.close()  # the user stopped reading: no final answer, no write
    assert r.memory_stats().writes_applied == 1


def test_callback_never_writes_for_an_errored_run_or_a_bare_retrieval(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    cb = ReMindMemoryCallback(r)

    def boom(_: Any) -> str:
        raise RuntimeError("provider down")

    broken = {"context": r | format_docs, "question": RunnablePassthrough()} | PROMPT | boom
    with pytest.raises(RuntimeError):
        broken.invoke(qs[0]["question"], config={"callbacks": [cb]})
    with pytest.warns(UserWarning, match="no answer to learn from yet"):
        r.invoke(qs[0]["question"], config={"callbacks": [cb]})  # no answer to learn from
    assert r.memory_stats().writes_applied == 0 and cb.writes == [] and len(cb.waiting) == 1


def test_callback_with_async_chain(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    cb = ReMindMemoryCallback(r)
    chain = rag_chain(r, FakeListChatModel(responses=["It is a spirit."]))

    async def ask_twice() -> None:
        await chain.ainvoke(qs[0]["question"], config={"callbacks": [cb]})
        await chain.ainvoke(qs[2]["question"], config={"callbacks": [cb]})

    asyncio.run(ask_twice())
    assert r.memory_stats().writes_applied == 2
    assert [w.trace_id for w in cb.writes] == list(dict.fromkeys(w.trace_id for w in cb.writes))


def test_explicit_memorize_and_feedback(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    q = qs[0]["question"]
    gold = gold_chunks(qs[0], hotpot[1])
    docs = r.invoke(q)
    w = r.memorize(docs[0].metadata["remindrag"]["trace_id"], supporting=sorted(gold))
    assert w.applied and set(w.supporting_chunks) == gold
    assert not r.memorize(w.trace_id).applied  # each trace is written once
    r.invoke(qs[1]["question"])
    up = r.feedback(r.last_trace_id, helpful=True)
    down = r.feedback(r.last_trace_id, helpful=False)
    assert up.enhanced and set(down.penalised) == set(r.trace().subgraph_edges)
    assert r.memory_stats().writes_applied == 3 and r.memory_stats().writes_skipped == 1
