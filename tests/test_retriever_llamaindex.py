"""ReMindRetriever as a LlamaIndex retriever: nodes out, query engines, tools, a chat engine,
a FunctionAgent, and post-answer memory through ReMindMemoryEventHandler. LlamaIndex's own
fakes (MockLLM, MockFunctionCallingLLM) only."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from llama_index.core import Document as LIDocument
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.tools import QueryEngineTool, RetrieverTool

from remindrag_integrations import Document as EngineDocument
from remindrag_integrations import IndexConfig, ReMindMemoryEventHandler, ReMindRAG, ReMindRetriever
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.core.indexing import make_chunks
from remindrag_integrations.core.protocols import Completion
from remindrag_integrations.testing import HashEmbedder, OracleLLM

ALWAYS = RetrievalConfig(llm_navigation="always")  # these test the LLM's walk

N_QUESTIONS = 3

# llama_index.core's workflow machinery inspects FunctionAgent with deprecated pydantic APIs
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect")


def text_of(row: dict) -> str:
    return f"{row['title']}\n{row['text']}"


def li_docs(hotpot: Any) -> tuple[list[dict], list[LIDocument]]:
    questions, rows = hotpot
    qs = questions[:N_QUESTIONS]
    pids = list(dict.fromkeys(p for q in qs for p in (*q["gold_pids"], *q["context_pids"])))
    return qs, [
        LIDocument(id_=p, text=text_of(rows[p]), metadata={"title": rows[p]["title"]}) for p in pids
    ]


def gold_chunks(q: dict, rows: dict) -> set[str]:
    return {
        c.id
        for p in q["gold_pids"]
        for c in make_chunks(EngineDocument(p, text_of(rows[p])), IndexConfig())
    }


def oracle_retriever(hotpot: Any) -> tuple[ReMindRetriever, list[dict]]:
    qs, docs = li_docs(hotpot)
    oracle = OracleLLM(gold={q["question"]: gold_chunks(q, hotpot[1]) for q in qs})
    r = ReMindRetriever.from_documents(
        docs, llm=oracle, embeddings=HashEmbedder(), llm_navigation="always"
    )
    oracle.store = r.engine.store
    return r, qs


@pytest.fixture(scope="module")
def zero(hotpot: Any) -> ReMindRetriever:
    return ReMindRetriever.from_documents(li_docs(hotpot)[1], embeddings=HashEmbedder())


class BrokenLLM(MockLLM):
    def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("provider down")


# --- construction and nodes ----------------------------------------------------------------


def test_from_llamaindex_documents_and_text_nodes() -> None:
    parent = RelatedNodeInfo(node_id="guide")
    r = ReMindRetriever.from_documents(
        [
            LIDocument(
                id_="kiwi",
                text="Kiwis are flightless birds of New Zealand.",
                metadata={"region": "NZ"},
            ),
            TextNode(
                id_="emu-1",
                text="Emus are flightless birds of Australia.",
                relationships={NodeRelationship.SOURCE: parent},
            ),
        ],
        embeddings=HashEmbedder(),
    )
    # a node with a SOURCE relationship is a piece of its parent document (issue 33)
    assert set(r.engine.store.document_ids()) == {"kiwi", "guide"}
    (emu,) = r.retrieve("Which birds live in Australia?")[:1]
    assert emu.node.ref_doc_id == "guide" and emu.node.metadata["ref_doc_id"] == "guide"
    kiwi = next(n for n in r.retrieve("New Zealand birds") if n.node.ref_doc_id == "kiwi")
    assert kiwi.node.metadata["region"] == "NZ"


def test_nodes_carry_chunk_ids_source_and_hide_traversal_keys(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    q = qs[0]
    nodes = r.retrieve(q["question"])
    assert gold_chunks(q, hotpot[1]) <= {n.node.node_id for n in nodes}
    for n in nodes:
        chunk = r.engine.store.get_chunk(n.node.node_id)
        assert n.node.text == chunk.text and n.score == n.node.metadata["remindrag"]["score"]
        assert n.node.ref_doc_id == chunk.doc_id
        assert n.node.relationships[NodeRelationship.SOURCE].node_id == chunk.doc_id
        assert n.node.metadata["remindrag"]["trace_id"] == r.last_trace_id
        llm_view = n.node.get_content(metadata_mode=MetadataMode.LLM)
        embed_view = n.node.get_content(metadata_mode=MetadataMode.EMBED)
        for hidden in ("remindrag", "trace_id", "path", "score"):
            assert hidden + ":" not in llm_view and hidden + ":" not in embed_view
        assert f"title: {n.node.metadata['title']}" in llm_view
        json.dumps(n.node.metadata)


class _AsyncOnly:
    """A navigator whose sync path fails: proves aretrieve awaits instead of blocking."""

    def complete(self, prompt: str) -> Completion:
        raise RuntimeError("sync path used")

    async def acomplete(self, prompt: str) -> Completion:
        return Completion('{"enough": true}', 10, 3)


def test_aretrieve_is_a_real_async_path(zero: ReMindRetriever, hotpot: Any) -> None:
    r = ReMindRetriever(
        engine=ReMindRAG(
            llm=_AsyncOnly(),
            embeddings=HashEmbedder(),
            store=zero.engine.store,
            retrieval_config=ALWAYS,
        )
    )
    q = hotpot[0][0]["question"]
    nodes = asyncio.run(r.aretrieve(q))
    assert r.trace().traversal_calls == 1 and r.trace().stop_reason == "enough"
    assert nodes and all(n.node.metadata["remindrag"]["trace_id"] == r.last_trace_id for n in nodes)


def test_get_prompts_answers_in_llamaindex_shape(zero: ReMindRetriever) -> None:
    # the one method name both base classes define; LlamaIndex recurses into it
    assert zero.get_prompts() == {}


def test_k_applies_to_llamaindex_retrieval(zero: ReMindRetriever, hotpot: Any) -> None:
    q = hotpot[0][0]["question"]
    assert len(ReMindRetriever(engine=zero.engine, k=2).retrieve(q)) == 2


# --- query engines, tools, chat ------------------------------------------------------------


def test_retriever_query_engine_answers_from_our_chunks(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    q = qs[1]
    qe = RetrieverQueryEngine.from_args(r, llm=MockLLM())  # MockLLM echoes the prompt
    resp = qe.query(q["question"])
    assert gold_chunks(q, hotpot[1]) <= {n.node.node_id for n in resp.source_nodes}
    for cid in gold_chunks(q, hotpot[1]):
        assert r.engine.store.get_chunk(cid).text in str(resp)
    assert "trace_id" not in str(resp)


def test_retriever_tool_and_query_engine_tool(zero: ReMindRetriever, hotpot: Any) -> None:
    q = hotpot[0][0]["question"]
    rt = RetrieverTool.from_defaults(zero, name="remind_search", description="Search.")
    out = rt.call(q)
    assert all(n.node.node_id.startswith("c-") for n in out.raw_output)
    assert all(n.node.text in out.content for n in out.raw_output)
    qt = QueryEngineTool.from_defaults(
        RetrieverQueryEngine.from_args(zero, llm=MockLLM()), name="remind_qa", description="Answer."
    )
    answer = qt.call(q)
    top = zero.retrieve(q)[0].node.text
    assert top in answer.content and top in str(answer.raw_output)


def test_context_chat_engine_uses_our_chunks(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    q = qs[0]
    chat = ContextChatEngine.from_defaults(retriever=r, llm=MockLLM())
    resp = chat.chat(q["question"])
    assert gold_chunks(q, hotpot[1]) <= {n.node.node_id for n in resp.source_nodes}


def _tool_calling_llm(tool_name: str, query: str, answer: str) -> MockFunctionCallingLLM:
    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        if any(m.role == MessageRole.TOOL for m in messages):
            return ChatMessage(role=MessageRole.ASSISTANT, content=answer)
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[
                ToolCallBlock(
                    tool_call_id="call-1", tool_name=tool_name, tool_kwargs={"input": query}
                )
            ],
        )

    return MockFunctionCallingLLM(response_generator=respond)


async def _run_agent(agent: FunctionAgent, question: str) -> tuple[Any, list[ToolCallResult]]:
    handler = agent.run(user_msg=question)
    results = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
    return await handler, results


def test_function_agent_calls_the_retriever_tool_and_gets_our_chunks(
    zero: ReMindRetriever, hotpot: Any
) -> None:
    q = hotpot[0][0]
    tool = RetrieverTool.from_defaults(zero, name="remind_search", description="Search.")
    agent = FunctionAgent(
        tools=[tool], llm=_tool_calling_llm("remind_search", q["question"], "A lilu is a spirit.")
    )
    out, results = asyncio.run(_run_agent(agent, q["question"]))
    (result,) = results
    nodes = result.tool_output.raw_output
    assert nodes and all(
        zero.engine.store.get_chunk(n.node.node_id).text == n.node.text for n in nodes
    )
    assert set(q["gold_pids"]) & {n.node.ref_doc_id for n in nodes}
    assert str(out.response.content) == "A lilu is a spirit."


# --- memory after the answer ---------------------------------------------------------------


def test_event_handler_memorizes_once_per_query_and_second_ask_is_cheaper(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    qe = RetrieverQueryEngine.from_args(r, llm=MockLLM(max_tokens=8))
    calls = []
    with ReMindMemoryEventHandler(r) as handler:
        for n, q in enumerate([qs[0], qs[0], qs[1]], start=1):
            qe.query(q["question"])
            calls.append(r.trace().traversal_calls)
            assert r.memory_stats().writes_applied == n
        r.retrieve(qs[2]["question"])  # a bare retrieval: no answer, no write
    assert r.memory_stats().writes_applied == 3 and len(handler.writes) == 3
    assert calls[1] < calls[0]
    assert not handler.errors
    qe.query(qs[2]["question"])  # detached: no more writes
    assert r.memory_stats().writes_applied == 3


def test_event_handler_waits_for_a_streamed_response(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    qe = RetrieverQueryEngine.from_args(r, llm=MockLLM(max_tokens=8), streaming=True)
    with ReMindMemoryEventHandler(r):
        resp = qe.query(qs[0]["question"])
        assert r.memory_stats().writes_applied == 0  # nothing read yet
        text = "".join(resp.response_gen)
        assert text and r.memory_stats().writes_applied == 1
        abandoned = qe.query(qs[1]["question"])
        next(abandoned.response_gen)
        assert r.memory_stats().writes_applied == 1


def test_event_handler_never_writes_for_an_errored_query(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    qe = RetrieverQueryEngine.from_args(r, llm=BrokenLLM())
    with ReMindMemoryEventHandler(r):
        with pytest.raises(RuntimeError):
            qe.query(qs[0]["question"])
    assert r.memory_stats().writes_applied == 0


def test_event_handler_with_async_query_and_agent_tool(hotpot: Any) -> None:
    r, qs = oracle_retriever(hotpot)
    qe = RetrieverQueryEngine.from_args(r, llm=MockLLM(max_tokens=8))
    tool = QueryEngineTool.from_defaults(qe, name="remind_qa", description="Answer.")
    agent = FunctionAgent(
        tools=[tool], llm=_tool_calling_llm("remind_qa", qs[1]["question"], "Done.")
    )
    streaming = RetrieverQueryEngine.from_args(r, llm=MockLLM(max_tokens=8), streaming=True)

    async def stream(question: str) -> tuple[int, str]:
        resp = await streaming.aquery(question)
        before = r.memory_stats().writes_applied
        return before, "".join([t async for t in resp.async_response_gen()])

    with ReMindMemoryEventHandler(r) as handler:
        asyncio.run(qe.aquery(qs[0]["question"]))
        assert r.memory_stats().writes_applied == 1
        before, text = asyncio.run(stream(qs[2]["question"]))
        assert before == 1 and text and r.memory_stats().writes_applied == 2
        _, results = asyncio.run(_run_agent(agent, qs[1]["question"]))
        assert results and r.memory_stats().writes_applied == 3
    assert [w.applied for w in handler.writes] == [True, True, True]


def test_llamaindex_navigator_calls_nest_under_the_retrieve_span(
    zero: ReMindRetriever, hotpot: Any
) -> None:
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    spans = SimpleSpanHandler()
    root = get_dispatcher()
    root.add_span_handler(spans)
    try:  # MockLLM echoes the prompt: not a legal move, so the walk stops after the re-ask
        r = ReMindRetriever(
            engine=ReMindRAG(
                llm=MockLLM(),
                embeddings=HashEmbedder(),
                store=zero.engine.store,
                retrieval_config=ALWAYS,
            )
        )
        r.retrieve(hotpot[0][0]["question"])
    finally:
        root.span_handlers = [h for h in root.span_handlers if h is not spans]
    parent = {s.id_: s.parent_id for s in spans.completed_spans}
    llm_spans = [s for s in parent if s.startswith("MockLLM.complete")]
    assert len(llm_spans) == r.trace().traversal_calls > 0

    def chain(span: str | None) -> list[str]:
        out = []
        while span is not None:
            out.append(span.split("-")[0])
            span = parent.get(span)
        return out

    assert all("ReMindRetriever.retrieve" in chain(s) for s in llm_spans)
