"""Memory learns only what a turn earned (issue 46, items 1-4): hedges, partial refusals and
guesses write nothing; a citation earns no pass for an off-topic question; a trace is learned
only with its own answer (LangChain tool loops, LlamaIndex agents, MCP); the LlamaIndex handler
is one per retriever however often it is asked for, and fusion retrievers keep the trace."""

from __future__ import annotations

import glob
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from capitals import QUESTION, TEXTS

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.core.config import RECOMMENDED_MIN_SCORE, RetrievalConfig
from remindrag_integrations.core.memory.grounding import abstains
from remindrag_integrations.testing import HashEmbedder

DATA = Path(__file__).parent / "data"

# hedges, partial refusals and guesses as chat models write them over a retrieval prompt (the
# issue's three first); each must write nothing
HEDGES = [
    "The passages talk about the Zephyr X2 frame and gears but not its price.",
    "Maybe 3,400 euros?",
    "Probably 3,400 euros, but I'm guessing.",
    "The context mentions the frame and the gears but does not say the price.",
    "The documents describe the ferry's route, but nothing about how many cars it carries.",
    "I'm not entirely sure, but it may be 3,400 euros.",
    "Perhaps the Vistula.",
    "It might be the Vistula [c-0123abcd45].",
    "I think it is the Vistula.",
    "My best guess is the Vistula.",
    "The Vistula, though this is only a guess.",
    "The text says nothing about its price.",
    "This only partially answers the question: the frame is aluminium.",
    "The passages mention G. Stanley Hall in the U.S. [c-0123abcd45] but not the rest.",
    "The context gives 6.8 inches but not the weight.",
]


@pytest.mark.parametrize("answer", HEDGES)
def test_hedges_partial_refusals_and_guesses_abstain(answer: str) -> None:
    assert abstains(answer)


def recorded_answers() -> list[str]:
    """The answers a real model (Qwen2.5-1.5B) wrote over this library's answer prompt, as
    recorded in tests/data, and the gold answers of the sample sets: answers that commit."""
    out = []
    for f in sorted(glob.glob(str(DATA / "qwen*.json"))):
        for r in json.loads(Path(f).read_text())["replies"].values():
            if r.get("stage") == "answer" and not r["reply"].lstrip().startswith("{"):
                out.append(r["reply"])
    for f in sorted(glob.glob(str(DATA / "*questions.jsonl"))):
        for line in Path(f).read_text().splitlines():
            out += [a for a in json.loads(line).get("answers", []) if isinstance(a, str)]
    return list(dict.fromkeys(out))


def test_recorded_model_answers_and_gold_answers_still_commit() -> None:
    answers = recorded_answers()
    assert len(answers) > 20
    assert [a for a in answers if abstains(a)] == ["I do not know."]


def test_a_hedged_answer_writes_nothing_through_memorize() -> None:
    rag = ReMindRAG(embeddings=HashEmbedder())
    rag.insert([Document(k, v) for k, v in TEXTS.items()])
    r = rag.retrieve(QUESTION)
    warsaw = next(rc.chunk.id for rc in r.chunks if rc.chunk.doc_id == "warsaw.txt")
    w = rag.memorize(r.trace_id, answer=f"Probably the Vistula [{warsaw}], but I'm guessing.")
    assert not w.applied and "abstains (a guess)" in (w.skipped_reason or "")
    assert rag.memory_stats().touched_edges == 0
    assert rag.memorize(rag.retrieve(QUESTION).trace_id, answer=f"The Vistula [{warsaw}].").applied


# --- citations earn trust, not a pass ------------------------------------------------------

OFF_TOPIC = "What is the capital of Peru?"


@pytest.mark.packaged_embedder
def test_a_cited_answer_to_an_off_topic_question_writes_nothing_and_lifts_nothing() -> None:
    rag = ReMindRAG()  # the packaged embedder, no cutoff set: the setting
    rag.insert([Document(k, v) for k, v in TEXTS.items()])
    first = rag.retrieve(OFF_TOPIC)
    assert first.chunks and first.chunks[0].score < RECOMMENDED_MIN_SCORE - 0.05
    for _ in range(3):  # the model answers from its own knowledge and cites the top passage
        r = rag.retrieve(OFF_TOPIC)
        w = rag.memorize(
            r.trace_id, answer=f"Lima is the capital of Peru [{r.chunks[0].chunk.id}]."
        )
        assert not w.applied and "citation alone teaches nothing" in (w.skipped_reason or "")
    assert rag.memory_stats().touched_edges == 0
    last = rag.retrieve(OFF_TOPIC)
    assert last.chunks[0].score < RECOMMENDED_MIN_SCORE - 0.05
    # a cited answer to an on-topic question still writes
    on = rag.retrieve(QUESTION)
    warsaw = next(rc.chunk.id for rc in on.chunks if rc.chunk.doc_id == "warsaw.txt")
    assert rag.memorize(on.trace_id, answer=f"The Vistula [{warsaw}].").applied


def test_below_the_cutoff_a_cited_passage_that_holds_the_answer_still_teaches() -> None:
    strict = RetrievalConfig().with_overrides(memory={"uncited_min_score": 0.99})
    rag = ReMindRAG(embeddings=HashEmbedder(), retrieval_config=strict)  # every question below
    rag.insert([Document(k, v) for k, v in TEXTS.items()])
    r = rag.retrieve(QUESTION)
    assert r.chunks[0].score < 0.99
    warsaw = next(rc.chunk.id for rc in r.chunks if rc.chunk.doc_id == "warsaw.txt")
    paris = next(rc.chunk.id for rc in r.chunks if rc.chunk.doc_id == "paris.txt")
    w = rag.memorize(r.trace_id, answer=f"The Vistula [{warsaw}] [{paris}].")
    assert w.applied and w.supporting_chunks == [warsaw]  # the passage that answers, only
    r2 = rag.retrieve(QUESTION)
    w2 = rag.memorize(r2.trace_id, answer=f"The Danube [{paris}].")  # held by no cited passage
    assert not w2.applied and "citation alone teaches nothing" in (w2.skipped_reason or "")


# --- a trace is learned only with its own answer -------------------------------------------

FERRY = "How many cars does the Nordwind ferry carry?"
BIKE = "How much does a bike service cost at the Velo shop?"
SHOP = {
    "ferry.txt": "The Nordwind ferry sails from Kiel to Oslo and carries 220 cars on two decks.",
    "bike.txt": "A bike service at the Velo shop costs 49 euros and takes one working day.",
    "rome.txt": TEXTS["rome.txt"],
}
BIKE_ANSWER = "A bike service costs 49 euros and takes one working day."


def shop_retriever() -> Any:
    from remindrag_integrations import ReMindRetriever

    return ReMindRetriever.from_texts(
        list(SHOP.values()), embeddings=HashEmbedder(), memory={"uncited_min_score": 0.0}
    )


def tool_loop_model(script: list[Any]) -> Any:
    """A chat model that binds tools, replying with the scripted messages in turn and raising
    where the script holds an exception (a provider error after the tool ran)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class ToolLoopModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            reply = next(self.messages)
            if isinstance(reply, BaseException):
                raise reply
            self.messages = itertools.chain([reply], self.messages)
            return super()._generate(*args, **kwargs)

    return ToolLoopModel(messages=iter(script))


def call(q: str, n: int) -> Any:
    from langchain_core.messages import AIMessage

    return AIMessage("", tool_calls=[{"name": "search", "id": f"c{n}", "args": {"query": q}}])


def run_turn(model: Any, tool: Any, cb: Any, history: list[Any], question: str) -> Any:
    """One user turn of a bare tool-calling loop, the callback on every call."""
    from langchain_core.messages import HumanMessage

    history.append(HumanMessage(question))
    while True:
        ai = model.invoke(history, config={"callbacks": [cb]})
        history.append(ai)
        if not ai.tool_calls:
            return ai
        history += [tool.invoke(tc, config={"callbacks": [cb]}) for tc in ai.tool_calls]


@pytest.mark.parametrize("history", ["kept", "new"])
@pytest.mark.parametrize("failure", ["seen", "unseen"])
def test_a_failed_tool_loop_turn_is_never_learned_with_the_next_answer(
    history: str, failure: str
) -> None:
    """The issue's loop: the model call after the ferry search fails; the next question's
    answer (bike service) must not be memorized for the ferry trace, whether the failing call
    carried the callback or not, and whether the app keeps the conversation or starts anew."""
    from langchain_core.messages import AIMessage
    from langchain_core.tools import create_retriever_tool

    from remindrag_integrations import ReMindMemoryCallback

    r = shop_retriever()
    tool = create_retriever_tool(r, "search", "Search the documents.")
    model = tool_loop_model(
        [call(FERRY, 1), RuntimeError("provider down"), call(BIKE, 2), AIMessage(BIKE_ANSWER)]
    )
    cb = ReMindMemoryCallback(r)
    msgs: list[Any] = []
    with pytest.raises(RuntimeError):
        if failure == "seen":
            run_turn(model, tool, cb, msgs, FERRY)
        else:  # the failing call did not carry the callback
            from langchain_core.messages import HumanMessage

            msgs.append(HumanMessage(FERRY))
            ai = model.invoke(msgs)
            msgs += [ai, *(tool.invoke(tc, config={"callbacks": [cb]}) for tc in ai.tool_calls)]
            model.invoke(msgs)
    (ferry_trace,) = cb.waiting if failure == "unseen" else [*cb.dropped]
    run_turn(model, tool, cb, msgs if history == "kept" else [], BIKE)
    assert [r.trace(w.trace_id).query for w in cb.writes] == [BIKE]
    assert cb.writes[0].applied and cb.waiting == []
    assert ferry_trace in cb.dropped and not r.trace(ferry_trace).memorized
    reason = cb.dropped[ferry_trace]
    assert ("failed" if failure == "seen" else "superseded") in reason
    # the ferry question is not answered from the bike-service memory
    again = r.invoke(FERRY)
    assert not any(d.metadata["remindrag"]["replayed"] for d in again)


def test_a_tool_loop_turn_that_answers_is_still_learned_with_its_answer() -> None:
    from langchain_core.messages import AIMessage
    from langchain_core.tools import create_retriever_tool

    from remindrag_integrations import ReMindMemoryCallback

    r = shop_retriever()
    tool = create_retriever_tool(r, "search", "Search the documents.")
    model = tool_loop_model(
        [call(FERRY, 1), AIMessage("It carries 220 cars."), call(BIKE, 2), AIMessage(BIKE_ANSWER)]
    )
    cb = ReMindMemoryCallback(r)
    msgs: list[Any] = []
    run_turn(model, tool, cb, msgs, FERRY)
    run_turn(model, tool, cb, msgs, BIKE)
    assert [r.trace(w.trace_id).query for w in cb.writes] == [FERRY, BIKE]
    assert all(w.applied for w in cb.writes) and cb.dropped == {}


# --- LlamaIndex: fusion retrievers, one handler per retriever ------------------------------


def says(text: str) -> Any:
    from llama_index.core.base.llms.types import CompletionResponse
    from llama_index.core.llms import MockLLM

    class Says(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            return CompletionResponse(text=text)

    return Says()


@pytest.mark.parametrize("mode", ["reciprocal_rerank", "relative_score"])
@pytest.mark.parametrize("first", [True, False])
def test_a_fusion_retriever_keeps_the_trace_whichever_copy_it_keeps(mode: str, first: bool) -> None:
    """``QueryFusionRetriever`` merges the passage this retriever and a vector index both
    return into one node, in some orders the index's (no trace id): the answer still writes."""
    from llama_index.core import Document as LIDocument
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever

    from remindrag_integrations import ReMindRetriever

    r = ReMindRetriever.from_texts(list(TEXTS.values()), embeddings=HashEmbedder())
    docs = [LIDocument(text=t) for t in TEXTS.values()]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    vec = index.as_retriever(similarity_top_k=3)
    fused = QueryFusionRetriever(
        [r, vec] if first else [vec, r], llm=says("x"), num_queries=1, mode=mode, use_async=False
    )
    handler = r.memory_event_handler()
    try:
        RetrieverQueryEngine.from_args(fused, llm=says("The Vistula.")).query(QUESTION)
    finally:
        handler.detach()
    (w,) = handler.writes
    assert w.applied and TEXTS["warsaw.txt"] in [
        r.engine.store.get_chunk(c).text for c in w.supporting_chunks
    ]


def test_asking_for_the_handler_on_every_request_attaches_one() -> None:
    """An app that calls ``memory_event_handler()`` per request and never detaches: still one
    handler, one write per answer, no skipped write, the same work for the 200th query."""
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.query_engine import RetrieverQueryEngine

    from remindrag_integrations import ReMindRetriever
    from remindrag_integrations.faces import memory_hooks
    from remindrag_integrations.faces.llama_index.events import ReMindMemoryEventHandler

    r = ReMindRetriever.from_texts(list(TEXTS.values()), embeddings=HashEmbedder())
    engine = RetrieverQueryEngine.from_args(r, llm=says("The Vistula."))
    calls = {"n": 0}
    real = memory_hooks.MemoryWriter.write

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        real(self, *args, **kwargs)

    dispatcher = get_dispatcher()
    per_query = []
    try:
        memory_hooks.MemoryWriter.write = counted  # type: ignore[method-assign]
        for _ in range(200):
            before = calls["n"]
            handler = r.memory_event_handler()
            engine.query(QUESTION)
            per_query.append(calls["n"] - before)
        mine = [
            h
            for h in dispatcher.event_handlers
            if isinstance(h, ReMindMemoryEventHandler) and h.retriever is r
        ]
        assert mine == [handler] and len(handler.writes) == 200
        assert per_query == [1] * 200  # one memorize call per answer, the first and the last
        stats = r.memory_stats()
        assert stats.writes_applied == 200 and stats.writes_skipped == 0
        # a second handler made by hand replaces the first: still one attached
        other = ReMindMemoryEventHandler(r).attach()
        assert [h for h in dispatcher.event_handlers if getattr(h, "retriever", None) is r] == [
            other
        ]
        assert not handler.attached and other.attached
    finally:
        memory_hooks.MemoryWriter.write = real  # type: ignore[method-assign]
        for h in list(dispatcher.event_handlers):
            if isinstance(h, ReMindMemoryEventHandler) and h.retriever is r:
                h.detach()


# --- MCP: by trace id; a citation earns no pass off the topic --------------------------------

import mcp_fixture  # noqa: E402

fresh_store = mcp_fixture.fresh_store
indexed_store = mcp_fixture.indexed_store


@pytest.mark.packaged_embedder
def test_mcp_remember_a_cited_off_topic_answer_writes_nothing(fresh_store: Path) -> None:
    import asyncio

    from mcp_fixture import QUESTION as LILU
    from mcp_fixture import call, client

    async def session() -> tuple[dict, dict, dict, str]:
        async with client(fresh_store) as s:
            off = await call(s, "search", query=OFF_TOPIC)
            top = off["passages"][0]["chunk_id"]
            answer = f"Lima is the capital of Peru [{top}]."
            wrote = await call(s, "remember", trace_id=off["trace_id"], answer=answer)
            failed = await call(s, "search", query=LILU)  # a turn that never answered
            other = await call(s, "search", query="Which mythology does the Alû come from?")
            chunk = other["passages"][0]["chunk_id"]
            answered = await call(
                s, "remember", trace_id=other["trace_id"], answer=f"Akkadian [{chunk}]."
            )
            text = (await s.read_resource(f"trace://{failed['trace_id']}")).contents[0].text
            return off, wrote, answered, text

    off, wrote, answered, failed_text = asyncio.run(session())
    assert off["passages"][0]["score"] < RECOMMENDED_MIN_SCORE
    assert not wrote["applied"] and "citation alone teaches nothing" in wrote["skipped_reason"]
    assert answered["applied"] and "memory: not memorized" in failed_text


def test_a_llamaindex_agent_turn_whose_model_fails_is_never_learned_with_the_next_answer() -> None:
    """A ``FunctionAgent`` searches with the retriever tool, then its model call fails; the
    next turn asks another question through a query-engine tool and is answered. The handler
    learns from an answer's own source nodes only: the failed turn's search writes nothing,
    the answered one writes its passage."""
    import asyncio

    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.tools import QueryEngineTool, RetrieverTool

    from remindrag_integrations import ReMindRetriever

    r = ReMindRetriever.from_texts(list(TEXTS.values()), embeddings=HashEmbedder(), k=1)
    search = RetrieverTool.from_defaults(r, name="search", description="Search.")
    qa = QueryEngineTool.from_defaults(
        RetrieverQueryEngine.from_args(r, llm=says("The Tiber.")), name="qa", description="Ask."
    )

    def scripted(tool: str, query: str, then: str | None) -> MockFunctionCallingLLM:
        def respond(messages: Any, **kwargs: Any) -> ChatMessage:
            if any(m.role == MessageRole.TOOL for m in messages):
                if then is None:
                    raise RuntimeError("the provider is down")
                return ChatMessage(role=MessageRole.ASSISTANT, content=then)
            call = ToolCallBlock(tool_call_id="c1", tool_name=tool, tool_kwargs={"input": query})
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

        return MockFunctionCallingLLM(response_generator=respond)

    async def turn(agent: FunctionAgent, question: str) -> Any:
        return await agent.run(user_msg=question)

    handler = r.memory_event_handler()
    try:
        failing = FunctionAgent(tools=[search, qa], llm=scripted("search", QUESTION, None))
        with pytest.raises(Exception, match="provider is down"):
            asyncio.run(turn(failing, QUESTION))
        rome = "Which river flows through Rome?"
        answering = FunctionAgent(tools=[search, qa], llm=scripted("qa", rome, "The Tiber."))
        asyncio.run(turn(answering, rome))
    finally:
        handler.detach()
    (w,) = handler.writes  # the answered turn only
    assert w.applied
    texts = [r.engine.store.get_chunk(c).text for c in w.supporting_chunks]
    assert texts == [TEXTS["rome.txt"]] and r.trace(w.trace_id).query == rome
    assert r.memory_stats().writes_applied == 1  # the failed turn's search wrote nothing
