"""The frameworks' habits: the user's metadata comes back untouched, each ecosystem's argument
names are honoured or refused loudly, metadata filters hold across the whole walk, memory happens
in chat engines, tool loops and concurrent calls, and id-less documents do not duplicate."""

from __future__ import annotations

import asyncio
from typing import Any

import pg_fixture
import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import create_retriever_tool
from llama_index.core import Document as LIDocument
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from remindrag_integrations import (
    ConfigError,
    IndexConfig,
    ReMindMemoryCallback,
    ReMindMemoryEventHandler,
    ReMindRetriever,
)
from remindrag_integrations import Document as EngineDocument
from remindrag_integrations.core.filters import parse
from remindrag_integrations.core.indexing import make_chunks
from remindrag_integrations.errors import NoTraceError
from remindrag_integrations.testing import HashEmbedder, OracleLLM

pg_dsn = pg_fixture.pg_dsn  # a real PostgreSQL, started once per process when a test needs it


@pytest.fixture(scope="module")
def habits_dsn(pg_dsn: str) -> str:
    """A database of its own on the test server: these tests' rows and planner statistics
    leave the other PostgreSQL tests' database as it was."""
    from urllib.parse import urlsplit

    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        try:
            conn.execute("CREATE DATABASE remindrag_habits")
        except psycopg.errors.DuplicateDatabase:
            pass
    return urlsplit(pg_dsn)._replace(path="/remindrag_habits").geturl()


N_QUESTIONS = 3


def _corpus(hotpot: Any) -> tuple[list[dict], list[LCDocument]]:
    """Three questions' passages; each document says where it came from (``source``), which
    half of the corpus it is in (``half``) and a number (``year``)."""
    questions, rows = hotpot
    qs = questions[:N_QUESTIONS]
    pids = list(dict.fromkeys(p for q in qs for p in (*q["gold_pids"], *q["context_pids"])))
    docs = [
        LCDocument(
            id=p,
            page_content=f"{rows[p]['title']}\n{rows[p]['text']}",
            metadata={"source": f"{p}.txt", "half": i % 2, "year": 2000 + i},
        )
        for i, p in enumerate(pids)
    ]
    return qs, docs


@pytest.fixture(scope="module")
def corpus(hotpot: Any) -> tuple[list[dict], list[LCDocument]]:
    return _corpus(hotpot)


def _retriever(corpus: Any, llm: Any = None, **kwargs: Any) -> ReMindRetriever:
    return ReMindRetriever.from_documents(corpus[1], llm=llm, embeddings=HashEmbedder(), **kwargs)


def _oracle(corpus: Any, **kwargs: Any) -> ReMindRetriever:
    """A guided walk whose navigator heads for the gold chunks of each question, in either
    half of the corpus."""
    qs, docs = corpus
    text = {d.id: d.page_content for d in docs}
    gold = {
        q["question"]: {
            c.id
            for p in q["gold_pids"]
            for c in make_chunks(EngineDocument(p, text[p]), IndexConfig())
        }
        for q in qs
    }
    oracle = OracleLLM(gold=gold)
    r = _retriever(corpus, llm=oracle, **kwargs)
    oracle.store = r.engine.store
    return r


# --- 1. the user's metadata ----------------------------------------------------------------


def test_user_metadata_comes_back_untouched_in_both_frameworks(corpus: Any) -> None:
    qs, docs = corpus
    given = {d.id: d.metadata for d in docs}
    r = _retriever(corpus)
    for d in r.invoke(qs[0]["question"]):
        own = d.metadata["remindrag"]
        assert {k: v for k, v in d.metadata.items() if k != "remindrag"} == given[own["doc_id"]]
        assert own["found_by"] in {"seed", "replay", "traversal", "dense_fill"}
    for n in r.retrieve(qs[0]["question"]):
        doc_id = n.node.metadata["remindrag"]["doc_id"]
        assert n.node.metadata["source"] == f"{doc_id}.txt"
        assert n.node.excluded_llm_metadata_keys == ["remindrag"]


# --- 2. each ecosystem's argument names -----------------------------------------------------


def test_search_kwargs_and_similarity_top_k_are_honoured(corpus: Any) -> None:
    q = corpus[0][0]["question"]
    engine = _retriever(corpus).engine
    assert len(ReMindRetriever(engine=engine, search_kwargs={"k": 1}).invoke(q)) == 1
    assert len(ReMindRetriever(engine=engine, similarity_top_k=1).retrieve(q)) == 1
    only = ReMindRetriever(engine=engine, search_kwargs={"k": 2, "filter": {"half": 1}})
    got = only.invoke(q)
    assert len(got) == 2 and {d.metadata["half"] for d in got} == {1}
    via = _retriever(corpus, similarity_top_k=1, search_kwargs={"filter": {"half": 0}})
    (one,) = via.invoke(q)
    assert one.metadata["half"] == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"search_kwargs": {"k": 1, "fetch_k": 20}},
        {"search_type": "mmr"},
        {"top_k": 3},
        {"k": 1, "similarity_top_k": 2},
        {"filter": {"year": {"$regex": "20"}}},
    ],
)
def test_unknown_or_conflicting_construction_arguments_raise(corpus: Any, kwargs: dict) -> None:
    engine = _retriever(corpus).engine
    with pytest.raises(ConfigError):
        ReMindRetriever(engine=engine, **kwargs)


def test_unknown_per_call_arguments_raise(corpus: Any) -> None:
    r = _retriever(corpus)
    q = corpus[0][0]["question"]
    with pytest.raises(ConfigError, match="search_type"):
        r.invoke(q, search_type="mmr")
    with pytest.raises(ConfigError, match="top_k"):
        r.invoke(q, top_k=1)
    with pytest.raises(ConfigError, match="operator"):
        r.invoke(q, filter={"half": {"$like": 1}})


# --- 3. metadata filters --------------------------------------------------------------------


def test_filter_parsing_and_semantics() -> None:
    f = parse(
        {"$or": [{"dept": "x"}, {"year": {"$gte": 2020, "$lt": 2023}}], "lang": {"$ne": "de"}}
    )
    assert f is not None
    assert f.test({"dept": "x"}) and f.test({"year": 2021, "lang": "en"})
    assert not f.test({"dept": "x", "lang": "de"}) and not f.test({"year": 2023})
    assert not f.test({"year": "2021"})  # a string never compares with a number
    tags = parse({"tag": {"$in": ["a", "b"]}, "owner": {"$nin": ["eve"]}})
    assert (
        tags is not None and tags.test({"tag": "a"}) and not tags.test({"tag": "a", "owner": "eve"})
    )
    for bad in ({"$not": {"a": 1}}, {"a": {"$in": "ab"}}, {"a": {}}, {"$and": []}, {"a": [1]}):
        with pytest.raises(ConfigError):
            parse(bad)


def _entered_documents(r: ReMindRetriever, trace_id: str) -> set[str]:
    """Documents of every anchor or chunk the walk entered."""
    nodes = r.engine.store.get_nodes(list(r.trace(trace_id).parents))
    return {n.doc_id for n in nodes if n.kind != "entity" and n.doc_id}


@pytest.mark.parametrize(
    "backend", ["memory", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_filter_holds_for_seeds_walk_replay_and_fill(
    corpus: Any, backend: str, request: pytest.FixtureRequest
) -> None:
    qs, docs = corpus
    half = {d.id: d.metadata["half"] for d in docs}
    if backend == "postgres":
        dsn = request.getfixturevalue("habits_dsn")
        r = _oracle(corpus, store=dsn, namespace="habits-filter")
        request.addfinalizer(r.engine.store.drop_namespace)
    else:
        r = _oracle(corpus)
    for q in qs:  # memory from unfiltered walks, so replay would cross into both halves
        r.invoke(q["question"])
        r.memorize(answer="x", supporting=[d.id for d in r.invoke(q["question"])])
    for q in qs:
        for f, ok in [({"half": 1}, {1}), ({"half": {"$in": [0]}}, {0})]:
            got = r.invoke(q["question"], filter=f, k=6)
            assert got and {d.metadata["half"] for d in got} == ok
            assert {half[d] for d in _entered_documents(r, r.last_trace_id)} <= ok
    late = r.invoke(qs[0]["question"], filter={"year": {"$gte": 2000 + len(docs) - 2}})
    assert {d.metadata["remindrag"]["doc_id"] for d in late} <= {d.id for d in docs[-2:]}


@pytest.mark.postgres
def test_postgres_filters_documents_in_sql_on_the_metadata_index(habits_dsn: str) -> None:
    import psycopg

    from remindrag_integrations.stores.postgres import PostgresGraphStore

    PostgresGraphStore(habits_dsn, namespace="habits-plan").close()  # the schema
    from remindrag_integrations.core.filters import parse
    from remindrag_integrations.stores.postgres.filter_sql import where_sql

    params: dict[str, Any] = {"ns": "habits-plan"}
    cond = where_sql(parse({"dept": {"$in": ["d1", "d2"]}}), params)  # type: ignore[arg-type]
    with psycopg.connect(habits_dsn) as conn:  # 50,000 documents in 5,000 departments
        conn.execute(
            "INSERT INTO rr_documents (namespace, id, hash, metadata) SELECT 'habits-plan', "
            "'doc' || i, 'h', jsonb_build_object('dept', 'd' || (i % 5000)) "
            "FROM generate_series(1, 50000) i"
        )
        conn.execute("ANALYZE rr_documents")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                f"EXPLAIN SELECT id FROM rr_documents WHERE namespace = %(ns)s AND {cond}", params
            )
        )
        conn.rollback()
    assert "rr_documents_meta" in plan


def test_llamaindex_metadata_filters(corpus: Any) -> None:
    q = corpus[0][0]["question"]
    engine = _retriever(corpus).engine
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="half", value=0),
            MetadataFilter(key="year", value=2003, operator=FilterOperator.GTE),
        ],
        condition=FilterCondition.AND,
    )
    nodes = ReMindRetriever(engine=engine, filters=filters, similarity_top_k=10).retrieve(q)
    assert nodes and all(
        n.node.metadata["half"] == 0 and n.node.metadata["year"] >= 2003 for n in nodes
    )
    with pytest.raises(ConfigError, match="text_match"):
        ReMindRetriever(
            engine=engine,
            filters=MetadataFilters(
                filters=[MetadataFilter(key="t", value="a", operator=FilterOperator.TEXT_MATCH)]
            ),
        )


# --- 4. memory in every app shape -----------------------------------------------------------


# what a reader answers to the first three sample questions (words of their gold passages)
ANSWERS = [
    "A lilu is a spirit.",
    "Yes: Nolan is an English-American director, Kalathil an Indian one.",
    "Latin.",
]


def answering(questions: list[str]) -> MockLLM:
    """LlamaIndex's MockLLM, answering the last of ``questions`` its prompt holds."""

    def answer(prompt: str) -> str:
        at = [prompt.rfind(q) for q in questions]
        return ANSWERS[max(range(len(at)), key=at.__getitem__)]

    class Answering(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            return CompletionResponse(text=answer(prompt))

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            return iter([CompletionResponse(text=answer(prompt), delta=answer(prompt))])

    return Answering()


def test_chat_engine_chat_and_stream_chat_memorize(corpus: Any) -> None:
    qs = corpus[0]
    r = _retriever(corpus)
    llm = answering([q["question"] for q in qs[:3]])
    chat = ContextChatEngine.from_defaults(retriever=r, llm=llm)
    with ReMindMemoryEventHandler(r) as handler:
        reply = chat.chat(qs[0]["question"])
        assert r.memory_stats().writes_applied == 1
        streamed = chat.stream_chat(qs[1]["question"])
        text = "".join(streamed.response_gen)
        asyncio.run(chat.achat(qs[2]["question"]))
    assert str(reply) and text
    assert r.memory_stats().writes_applied == 3 and not handler.errors
    assert len({w.trace_id for w in handler.writes}) == 3


def test_bare_tool_calling_loop_memorizes(corpus: Any) -> None:
    qs = corpus[0]
    r = _retriever(corpus)
    tool = create_retriever_tool(r, "remind_search", "Search the knowledge graph.")
    memory = ReMindMemoryCallback(r)
    q = qs[0]["question"]
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    "", tool_calls=[{"name": "remind_search", "id": "c1", "args": {"query": q}}]
                ),
                AIMessage("A lilu is a spirit."),
            ]
        )
    )
    messages: list[Any] = [HumanMessage(q)]
    ai = model.invoke(messages)
    messages.append(ai)
    for tc in ai.tool_calls:
        messages.append(tool.invoke(tc, config={"callbacks": [memory]}))
    assert r.memory_stats().writes_applied == 0  # no answer yet
    final = model.invoke(messages, config={"callbacks": [memory]})
    assert final.content == "A lilu is a spirit."
    assert r.memory_stats().writes_applied == 1 and memory.writes[0].applied
    # the one-liner when the final model call does not carry the callback
    tool.invoke(
        {**ai.tool_calls[0], "args": {"query": qs[1]["question"]}}, config={"callbacks": [memory]}
    )
    (w,) = memory.answered(ANSWERS[1])
    assert w.applied and r.memory_stats().writes_applied == 2


def test_concurrent_calls_keep_their_own_traces(corpus: Any) -> None:
    qs = corpus[0]
    r = _retriever(corpus)
    chain = r | (lambda docs: docs[0].metadata["remindrag"]["trace_id"])

    async def ask(q: str) -> tuple[str, str]:
        docs = await r.ainvoke(q)
        await asyncio.sleep(0)
        return docs[0].metadata["remindrag"]["trace_id"], r.last_trace_id or ""

    async def three() -> list[tuple[str, str]]:
        return list(await asyncio.gather(*(ask(q["question"]) for q in qs)))

    pairs = asyncio.run(three())
    assert all(mine == seen for mine, seen in pairs)  # inside a task: its own trace
    assert len({t for t, _ in pairs}) == 3
    assert chain.invoke(qs[0]["question"]) == r.last_trace_id  # sequential: the last one


def test_memorize_refuses_to_guess_after_overlapping_retrievals(corpus: Any) -> None:
    qs = corpus[0]
    r = _retriever(corpus)

    async def three() -> None:
        await asyncio.gather(*(r.ainvoke(q["question"]) for q in qs))

    asyncio.run(three())
    assert r.last_trace_id is None
    with pytest.raises(NoTraceError):
        r.memorize(answer="which one?")
    r.invoke(qs[0]["question"])
    assert r.memorize(answer="x").trace_id == r.last_trace_id


def test_last_trace_follows_a_chain_that_retrieves_in_a_worker_thread(corpus: Any) -> None:
    from langchain_core.runnables import RunnableParallel

    qs = corpus[0]
    r = _retriever(corpus)
    r.invoke(qs[0]["question"])  # an earlier retrieval in this thread
    chain = RunnableParallel(docs=r, other=lambda q: q)  # LangChain runs branches in threads
    out = chain.invoke(qs[1]["question"])
    assert r.last_trace_id == out["docs"][0].metadata["remindrag"]["trace_id"]


# --- 5. id-less documents -------------------------------------------------------------------


def test_llamaindex_documents_without_ids_do_not_duplicate() -> None:
    docs = [LIDocument(text="Kiwis are flightless birds of New Zealand.", metadata={"r": "NZ"})]
    r = ReMindRetriever.from_documents(docs, embeddings=HashEmbedder())
    again = r.add_documents(
        [LIDocument(text="Kiwis are flightless birds of New Zealand.", metadata={"r": "NZ"})]
    )
    assert again.documents == 0 and len(r.engine.store.document_ids()) == 1
    kept = r.add_documents([LIDocument(id_="mine", text="Emus live in Australia.")])
    assert kept.documents == 1 and "mine" in r.engine.store.document_ids()


# --- 6. the graph out, and where memory lives -----------------------------------------------


def test_to_networkx_has_every_node_and_edge_with_memory(corpus: Any) -> None:
    import networkx as nx

    qs = corpus[0]
    r = _oracle(corpus)
    for q in qs:
        r.invoke(q["question"])
        r.memorize(answer="x")
    g = r.to_networkx()
    counts = r.engine.store.counts()
    assert isinstance(g, nx.MultiGraph)
    assert g.number_of_nodes() == counts["chunks"] + counts["anchors"] + counts["entities"]
    assert g.number_of_edges() == counts["edges"]
    for n, d in g.nodes(data=True):
        node = r.engine.store.get_node(n)
        assert (d["kind"], d["name"], d["document"]) == (node.kind, node.name, node.doc_id)
    remembered = {k for *_, k, d in g.edges(keys=True, data=True) if d["memory"] > 0}
    assert len(remembered) == r.memory_stats().touched_edges > 0
    u, v, k, d = next(e for e in g.edges(keys=True, data=True) if e[2] in remembered)
    assert d["text"] == r.engine.store.get_edge(k).text and d["kind"] in {
        "relation",
        "mention",
        "contains",
        "context",
    }
    assert nx.number_connected_components(g) >= 1  # a real networkx graph to analyse


def test_memory_view_shows_remembered_edges_and_the_queries_behind_them(corpus: Any) -> None:
    import re

    from remindrag_integrations.app.memory_view import render_memory_view

    qs = corpus[0]
    r = _oracle(corpus)
    traces = []
    for q in qs[:2]:
        r.invoke(q["question"])
        w = r.memorize(answer="x")
        traces.append(r.trace(w.trace_id))
    page = render_memory_view(r.engine.store, traces)
    drawn = dict(re.findall(r'data-edge="([^"]+)" data-memory-norm="([\d.]+)"', page))
    enhanced = {e for t in traces for e in t.memory_result["enhanced"]}
    assert enhanced and enhanced <= set(drawn)
    assert all(float(v) > 0 for v in drawn.values())
    for q in qs[:2]:
        assert f"enhanced by: {q['question']}" in page.replace("&#x27;", "'")
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # self-contained
