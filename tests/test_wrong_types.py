"""Every caller-caused error is a ``ReMindError`` that says what to do: a wrong type given to a
public method or constructor, a filter that could never match, a filter or request nested too deep.
A call that would write writes nothing."""

from __future__ import annotations

import asyncio
import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pg_fixture
import pytest

from remindrag_integrations import ConfigError, Document, ReMindError, ReMindRAG, ReMindRetriever
from remindrag_integrations.app import mcp_depth
from remindrag_integrations.core import filters
from remindrag_integrations.errors import InvalidArgumentError, InvalidQueryError
from remindrag_integrations.testing import HashEmbedder

pg_dsn = pg_fixture.pg_dsn
make_pg_store = pg_fixture.make_pg_store

DOCS = [
    Document("d1", "Alice lives in Paris. Bob visits Alice in Paris.", {"year": 2020, "dept": "x"}),
    Document("d2", "Carol works in Berlin with Dave.", {"year": 2023, "tags": ["faq", "hr"]}),
]


def _engine(**kwargs: Any) -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder(16), **kwargs)
    eng.insert(DOCS)
    return eng


def _snapshot(eng: ReMindRAG) -> tuple:
    """What a write would change: the store's counts, the edges holding memory, the writes."""
    return eng.store.counts(), eng.store.touched_edges(), eng.memory_stats()


def _nested(levels: int, leaf: Any = None) -> dict[str, Any]:
    """``levels`` of ``$and`` around ``leaf`` (default ``{"year": 2020}``), built without
    recursion (so a deep one can be built at all)."""
    f: dict[str, Any] = leaf if leaf is not None else {"year": 2020}
    for _ in range(levels):
        f = {"$and": [f]}
    return f


def _branching(levels: int) -> dict[str, Any]:
    """``levels`` of ``$and`` / ``$or`` that stay in the canonical form (two items each)."""
    f: dict[str, Any] = {"year": {"$gte": 2020}}
    for i in range(levels):
        f = {"$or" if i % 2 else "$and": [f, {"dept": {"$ne": f"z{i}"}}]}
    return f


# --- the engine: wrong types, refused before anything is written ------------------------------

TRACE_IDS = [None, 5, "", 0, b"t-1", ["t-1"]]


@pytest.mark.parametrize("bad", TRACE_IDS)
@pytest.mark.parametrize("method", ["memorize", "feedback", "trace", "amemorize"])
def test_a_trace_id_that_is_not_a_string_says_so(method: str, bad: Any) -> None:
    eng = _engine()
    eng.retrieve("Who lives in Paris?")
    before = _snapshot(eng)
    calls: dict[str, Callable[[], Any]] = {
        "memorize": lambda: eng.memorize(bad, answer="Alice."),
        "feedback": lambda: eng.feedback(bad, True),
        "trace": lambda: eng.trace(bad),
        "amemorize": lambda: asyncio.run(eng.amemorize(bad, answer="Alice.")),
    }
    with pytest.raises(InvalidArgumentError, match="trace_id must be a non-empty string"):
        calls[method]()
    assert _snapshot(eng) == before


ENGINE_CALLS: dict[str, Callable[[ReMindRAG], Any]] = {
    "insert one dict": lambda e: e.insert({"id": "z", "text": "t"}),
    "insert a str": lambda e: e.insert("one text"),
    "insert one Document": lambda e: e.insert(Document("z", "t")),
    "insert a list holding a dict": lambda e: e.insert([{"id": "z", "text": "t"}]),
    "estimate_insert one dict": lambda e: e.estimate_insert({"id": "z", "text": "t"}),
    "ainsert one dict": lambda e: asyncio.run(e.ainsert({"id": "z", "text": "t"})),
    "teach one pair": lambda e: e.teach({"question": "q", "doc_ids": ["d1"]}),
    "teach None": lambda e: e.teach(None),
    "delete one id": lambda e: e.delete("d1"),
    "delete a number": lambda e: e.delete(5),
    "feedback helpful='no'": lambda e: e.feedback(e.retrieve("Alice").trace_id, "no"),
    "memorize answer=5": lambda e: e.memorize(e.retrieve("Alice").trace_id, answer=5),
    "retrieve a number": lambda e: e.retrieve(5),
    "export_memory None": lambda e: e.export_memory(None),
    "import_memory 5": lambda e: e.import_memory(5),
    "decay_memory '0.5'": lambda e: e.decay_memory("0.5"),
}


@pytest.mark.parametrize("name", list(ENGINE_CALLS))
def test_engine_calls_with_a_wrong_type_write_nothing(name: str) -> None:
    eng = _engine()
    eng.retrieve("Alice")  # a trace, so the memory writes have one to refuse
    before = _snapshot(eng)
    with pytest.raises(ReMindError) as raised:
        ENGINE_CALLS[name](eng)
    assert not isinstance(raised.value, (AttributeError, KeyError))
    assert _snapshot(eng)[:2] == before[:2]


def test_one_mapping_is_not_a_list_of_documents() -> None:
    eng = ReMindRAG(embeddings=HashEmbedder(16))
    with pytest.raises(InvalidArgumentError, match=r"not a dict.*\[Document\(id, text"):
        eng.insert({"id": "z", "text": "t"})  # once indexed its keys as two documents
    assert eng.store.counts()["documents"] == 0


CONSTRUCTOR_ARGS: list[tuple[dict[str, Any], str]] = [
    ({"store": 5}, "store must be a graph store"),
    ({"store": b"folder"}, "store must be a graph store"),
    ({"store": object()}, "store must be a graph store"),
    ({"index_config": 5}, "index_config must be an IndexConfig, a dict"),
    ({"index_config": "x"}, "index_config must be an IndexConfig, a dict"),
    ({"retrieval_config": "x"}, "retrieval_config must be a RetrievalConfig, a dict"),
    ({"retrieval_config": {"k": "3"}}, "k"),  # a dict is checked like keyword arguments
    ({"retrieval_config": {"no_such": 1}}, "no such field"),
    ({"index_config": {5: 1}}, "index_config must be an IndexConfig"),
    ({"max_cached_traces": "x"}, "max_cached_traces must be an int"),
    ({"max_cached_traces": -1}, "max_cached_traces must be 0 or more"),
    ({"prompts": 5}, "prompts must be a Prompts"),
    ({"namespace": 5}, "namespace must be a non-empty string"),
    ({"namespace": ""}, "namespace must be a non-empty string"),
]


@pytest.mark.parametrize("kwargs,message", CONSTRUCTOR_ARGS)
def test_constructor_arguments_of_a_wrong_type(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ReMindRAG(embeddings=HashEmbedder(16), **kwargs)


def test_a_wrong_argument_makes_no_store_folder(tmp_path: Path) -> None:
    folder = tmp_path / "new-store"
    with pytest.raises(ConfigError):
        ReMindRAG(embeddings=HashEmbedder(16), store=folder, retrieval_config="x")
    assert not folder.exists()


def test_configs_given_as_dicts_are_their_fields() -> None:
    eng = ReMindRAG(
        embeddings=HashEmbedder(16),
        index_config={"insert_batch_documents": 7},
        retrieval_config={"k": 2, "filter": {"year": {"$gte": 2020}}},
    )
    assert eng.index_config.insert_batch_documents == 7
    assert eng.retrieval_config.k == 2
    assert eng.retrieval_config.filter == {"year": {"$gte": 2020}}
    eng.insert(DOCS)
    assert len(eng.retrieve("Who lives in Paris?").chunks) <= 2


def test_export_memory_to_a_folder_or_a_missing_folder(tmp_path: Path) -> None:
    eng = _engine()
    with pytest.raises(InvalidArgumentError, match="is a folder.*memory.json"):
        eng.export_memory(tmp_path)
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        eng.export_memory(tmp_path / "nowhere" / "memory.json")
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind
    assert eng.export_memory(tmp_path / "memory.json") == 0


# --- the retriever (the LangChain and LlamaIndex faces) ----------------------------------------


def _retriever() -> ReMindRetriever:
    r = ReMindRetriever.from_documents(DOCS, embeddings=HashEmbedder(16))
    r.invoke("Who lives in Paris?")  # a last trace: None would mean it
    return r


RETRIEVER_CALLS: dict[str, Callable[[ReMindRetriever], Any]] = {
    "memorize 5": lambda r: r.memorize(5),
    "memorize ''": lambda r: r.memorize(""),  # not "the last one"
    "memorize 0": lambda r: r.memorize(0),
    "amemorize 5": lambda r: asyncio.run(r.amemorize(5)),
    "feedback 5": lambda r: r.feedback(5, True),
    "feedback helpful='yes'": lambda r: r.feedback(None, "yes"),
    "trace 5": lambda r: r.trace(5),
    "trace ''": lambda r: r.trace(""),
    "teach 5": lambda r: r.teach(5),
    "teach one pair": lambda r: r.teach({"question": "q", "doc_ids": ["d1"]}),
    "add_documents 5": lambda r: r.add_documents(5),
    "add_documents None": lambda r: r.add_documents(None),
    "add_documents one dict": lambda r: r.add_documents({"id": "z", "text": "t"}),
    "add_documents one str": lambda r: r.add_documents("text"),
    "aadd_documents one dict": lambda r: asyncio.run(r.aadd_documents({"id": "z", "text": "t"})),
    "delete 5": lambda r: r.delete(5),
    "delete one id": lambda r: r.delete("d1"),
    "invoke 5": lambda r: r.invoke(5),
    "retrieve (LlamaIndex) 5": lambda r: r.retrieve(5),
    "retrieve (LlamaIndex) None": lambda r: r.retrieve(None),
    "aretrieve (LlamaIndex) 5": lambda r: asyncio.run(r.aretrieve(5)),
    "invoke a NaN filter": lambda r: r.invoke("Alice", filter={"year": math.nan}),
}


@pytest.mark.parametrize("name", list(RETRIEVER_CALLS))
def test_retriever_calls_with_a_wrong_type_write_nothing(name: str) -> None:
    r = _retriever()
    before = _snapshot(r.engine)
    with pytest.raises(ReMindError):
        RETRIEVER_CALLS[name](r)
    assert _snapshot(r.engine)[:2] == before[:2]


def test_a_retriever_trace_id_of_the_wrong_type_is_not_the_last_one() -> None:
    r = _retriever()
    with pytest.raises(InvalidArgumentError, match="trace_id must be a non-empty string"):
        r.memorize("", answer="Alice lives in Paris.")
    assert r.memorize(None, answer="Alice lives in Paris.").trace_id == r.last_trace_id


H = HashEmbedder(16)
BUILDERS: dict[str, tuple[Callable[[], Any], str]] = {
    "from_texts 5": (lambda: ReMindRetriever.from_texts(5, embeddings=H), "texts must be a list"),
    "from_texts None": (
        lambda: ReMindRetriever.from_texts(None, embeddings=H),
        "texts must be a list",
    ),
    "from_texts one str": (
        lambda: ReMindRetriever.from_texts("text", embeddings=H),
        r"from_texts\(\[text\]\)",
    ),
    "from_texts [5]": (
        lambda: ReMindRetriever.from_texts([5], embeddings=H),
        "texts must hold strings",
    ),
    "from_texts metadatas=5": (
        lambda: ReMindRetriever.from_texts(["a"], metadatas=5, embeddings=H),
        "metadatas .* must be a list",
    ),
    "from_texts metadatas=one dict": (
        lambda: ReMindRetriever.from_texts(["a"], metadatas={"k": 1}, embeddings=H),
        r"wrap it in a list",
    ),
    "from_texts metadatas=[5]": (
        lambda: ReMindRetriever.from_texts(["a"], metadatas=[5], embeddings=H),
        "metadata must be a dict",
    ),
    "from_texts ids=one str": (
        lambda: ReMindRetriever.from_texts(["a", "b"], ids="ab", embeddings=H),
        "ids .* must be a list of ids",
    ),
    "from_texts ids=5": (
        lambda: ReMindRetriever.from_texts(["a"], ids=5, embeddings=H),
        "ids .* must be a list of ids",
    ),
    "from_texts ids=[5]": (
        lambda: ReMindRetriever.from_texts(["a"], ids=[5], embeddings=H),
        "must hold id strings",
    ),
    "from_documents 5": (
        lambda: ReMindRetriever.from_documents(5, embeddings=H),
        "takes a list of documents",
    ),
    "from_documents one dict": (
        lambda: ReMindRetriever.from_documents({"id": "z", "text": "t"}, embeddings=H),
        "not a dict",
    ),
    "from_documents store=5": (
        lambda: ReMindRetriever.from_documents([], embeddings=H, store=5),
        "store must be a graph store",
    ),
    "from_documents a deep filter": (
        lambda: ReMindRetriever.from_documents([], embeddings=H, filter=_nested(40, _branching(2))),
        "write it flatter",
    ),
    "ReMindRetriever engine=5": (
        lambda: ReMindRetriever(engine=5),
        "engine: Input should be an instance of ReMindRAG",
    ),
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_retriever_builders_with_a_wrong_type(name: str) -> None:
    build, message = BUILDERS[name]
    with pytest.raises(ReMindError, match=message):
        build()


def test_the_llamaindex_face_refuses_a_non_string_query_before_llamaindex_reads_it() -> None:
    with pytest.raises(InvalidQueryError, match="non-empty string"):
        _retriever().retrieve(5)


# --- filters that could never match: refused, before any store ---------------------------------

NEVER_MATCH: list[tuple[dict[str, Any], str]] = [
    ({"year": {"$gt": None}}, "None has no order"),
    ({"year": {"$lte": None}}, "None has no order"),
    ({"year": math.nan}, "finite"),
    ({"year": {"$ne": math.nan}}, "finite"),
    ({"year": {"$in": [2020, math.nan]}}, "finite"),
    ({"tags": {"$all": ["faq", math.nan]}}, "finite"),
    ({"year": {"$lt": math.inf}}, "finite"),
    ({"dept": "x\x00"}, "NUL"),
    ({"dept": {"$in": ["x", "y\x00"]}}, "NUL"),
    ({"tags": {"$contains": "f\ud800"}}, "surrogate"),
    ({"de\x00pt": "x"}, "NUL"),
    ({"$or": [{"dept": "x"}, {"year": {"$gte": math.nan}}]}, "finite"),
]


@pytest.mark.parametrize("spec,message", NEVER_MATCH)
def test_a_filter_that_could_never_match_is_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        filters.normalise(spec)
    eng = _engine()
    with pytest.raises(ConfigError, match=message):
        eng.retrieve("Who lives in Paris?", filter=spec)
    with pytest.raises(ConfigError, match=message):  # a store read with it, directly
        eng.store.search(HashEmbedder(16).embed(["Paris"])[0], 3, ["chunk"], where=spec)


def test_none_still_compares_for_equality() -> None:
    eng = ReMindRAG(embeddings=HashEmbedder(16))
    eng.insert([Document("a", "Alice lives in Paris.", {"owner": None}), *DOCS])
    found = eng.retrieve("Who lives in Paris?", filter={"owner": None}, k=5)
    assert {c.chunk.doc_id for c in found.chunks} == {"a"}
    others = eng.retrieve("Who lives in Paris?", filter={"owner": {"$ne": None}}, k=5)
    assert "a" not in {c.chunk.doc_id for c in others.chunks}


def test_an_empty_filter_holds_for_every_document_inside_and_or() -> None:
    every = filters.parse({"$or": [{}, {"dept": "x"}]})
    assert every is None  # an $or with a filter that always holds: no condition
    only_x = filters.normalise({"$and": [{}, {"dept": "x"}]})
    assert only_x == {"dept": {"$eq": "x"}}
    assert filters.normalise({"$and": [{}]}) is None
    assert filters.normalise(only_x) == only_x


# --- filters nested too deep: a typed error at a documented depth, never a RecursionError -------


def test_the_filter_depth_limit_is_32_levels_of_and_or() -> None:
    assert filters.MAX_DEPTH == 32
    deepest = _branching(32)
    assert filters.normalise(deepest) == deepest  # canonical already, and idempotent
    eng = _engine()
    assert eng.retrieve("Who lives in Paris?", filter=deepest).chunks
    for too_deep in (_branching(33), _nested(33), _nested(500), _nested(100_000)):
        with pytest.raises(ConfigError, match="at most 32 levels deep.*write it flatter"):
            filters.normalise(too_deep)
    with pytest.raises(ConfigError, match="at most 32 levels"):
        eng.retrieve("Who lives in Paris?", filter=_nested(500))


def test_a_deep_value_in_a_filter_is_refused_without_recursion() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    for spec in ({"year": {"$eq": deep}}, {"tags": {"$in": deep}}, {"$and": deep}):
        with pytest.raises(ConfigError):
            filters.normalise(spec)
    with pytest.raises(ConfigError):  # the config's error message shows it, shortened
        ReMindRAG(embeddings=HashEmbedder(16), retrieval_config={"filter": {"a": deep}})


def test_a_canonical_form_that_would_nest_deeper_is_refused_at_once() -> None:
    # an $or beside another key is one level deeper in the canonical form (an $and of both):
    # 20 such levels are 40 there, refused now rather than when a store reads it back
    spec: dict[str, Any] = {"year": 2020}
    for i in range(20):
        spec = {"$or": [spec, {"dept": f"d{i}"}], "lang": f"l{i}"}
    with pytest.raises(ConfigError, match="at most 32"):
        filters.normalise(spec)
    shallow = {"$or": [{"year": 2020}, {"dept": "x"}], "lang": "en"}
    assert filters.normalise(filters.normalise(shallow)) == filters.normalise(shallow)


def test_two_filters_anded_nest_no_deeper() -> None:
    a = filters.normalise({"$and": [_branching(31), {"k": 1}]})  # 32 levels, an $and on top
    b = filters.normalise(_branching(20))
    assert a is not None and b is not None
    joined = filters.both(a, b)
    assert joined == {"$and": [*a["$and"], b]}  # b is an $or: one item
    assert filters.normalise(joined) == joined  # still within the limit
    r = ReMindRetriever.from_documents(DOCS, embeddings=HashEmbedder(16), filter=_branching(31))
    assert isinstance(r.invoke("Who lives in Paris?", filter=_branching(31)), list)


# --- PostgreSQL: refused before any SQL (no psycopg error) --------------------------------------


@pytest.mark.postgres
def test_postgres_never_sees_a_nul_or_nan_filter(make_pg_store: Callable[..., Any]) -> None:
    eng = ReMindRAG(embeddings=HashEmbedder(16), store=make_pg_store("wrongtypes"))
    eng.insert(DOCS)
    for spec in ({"dept": "x\x00"}, {"year": math.nan}, {"year": {"$in": [math.nan]}}):
        with pytest.raises(ConfigError):
            eng.retrieve("Who lives in Paris?", filter=spec)
        with pytest.raises(ConfigError):
            eng.store.lexical_search("Paris", 3, where=spec)
        with pytest.raises(ConfigError):
            eng.store.search(HashEmbedder(16).embed(["Paris"])[0], 3, ["chunk"], where=spec)
    assert eng.retrieve("Who lives in Paris?", filter={"dept": "x"}).chunks  # still serving


# --- MCP: a request nested too deep for the SDK to read is answered ---------------------------


def _request(levels: int, request_id: Any = 7, method: str = "tools/call") -> bytes:
    arguments = {"query": "q", "filter": _nested(levels)}
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    message["params"] = {"name": "search", "arguments": arguments}
    return json.dumps(message).encode()


def test_how_deep_a_request_nests() -> None:
    assert mcp_depth.too_deep(_request(40)) is None  # the filter's own limit answers it
    deep = mcp_depth.too_deep(_request(100))
    assert deep is not None and deep.depth > mcp_depth.MAX_REQUEST_DEPTH
    assert (deep.id, deep.method) == (7, "tools/call")
    # the id found after the deep part too, and strings holding brackets are not nesting
    late = b'{"params": {"a": ' + b"[" * 300 + b"]" * 300 + b', "s": "[[[{{"}, "id": "x-1"}'
    found = mcp_depth.too_deep(late)
    assert found is not None and found.id == "x-1" and found.depth == 302
    assert mcp_depth.too_deep(b'{"s": "' + b"[" * 1000 + b'"}') is None
    assert mcp_depth.too_deep(b"[" * 100_000) == mcp_depth.Deep(100_000)


def test_stdio_answers_a_deep_request_and_passes_the_others_on() -> None:
    notification = b'{"jsonrpc": "2.0", "method": "notifications/x", "params": '
    notification += b"[" * 200 + b"]" * 200 + b"}"
    lines = [_request(40), _request(100), notification, _request(100, 8, "ping"), b'{"id": 9}']
    sink = io.BytesIO()
    out = mcp_depth._Lines(sink)
    reader = io.TextIOWrapper(
        io.BufferedReader(mcp_depth._Requests(io.BytesIO(b"\n".join(lines) + b"\n"), out)),
        encoding="utf-8",
    )
    passed = list(reader)
    assert [json.loads(x)["id"] for x in passed] == [7, 9]
    replies = [json.loads(x) for x in sink.getvalue().splitlines()]
    assert [r["id"] for r in replies] == [7, 8]  # the notification gets none
    tool_error, rpc_error = replies
    assert tool_error["result"]["isError"] is True
    assert "write it flatter" in tool_error["result"]["content"][0]["text"]
    assert rpc_error["error"]["code"] == mcp_depth.INVALID_REQUEST
    # a reply never lands inside a line the SDK is writing
    out.write(b'{"jsonrpc": "2.0", "id": 1, ')
    out.line(b'{"reply": true}')
    out.write(b'"result": {}}\n')
    assert sink.getvalue().splitlines()[-2:] == [
        b'{"reply": true}',
        b'{"jsonrpc": "2.0", "id": 1, "result": {}}',
    ]


def test_http_answers_a_deep_body_with_a_400() -> None:
    seen: list[bytes] = []

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        message = await receive()
        seen.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guarded = mcp_depth.refuse_deep_bodies(app)

    async def post(body: bytes) -> tuple[int, bytes]:
        chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)] or [b""]
        incoming = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)
        ]
        sent: list[dict] = []

        async def receive() -> dict:
            return incoming.pop(0) if incoming else {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            sent.append(message)

        await guarded({"type": "http", "method": "POST"}, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    status, body = asyncio.run(post(b"[" * 100_000))
    assert status == 400 and seen == []
    error = json.loads(body)
    assert error["id"] is None and "write it flatter" in error["error"]["message"]
    status, body = asyncio.run(post(_request(100, "r-2")))
    assert status == 400 and json.loads(body)["id"] == "r-2" and seen == []
    ordinary = _request(40)
    assert asyncio.run(post(ordinary)) == (200, b"{}") and seen == [ordinary]


@pytest.mark.parametrize("hook", ["ReMindMemoryCallback", "ReMindMemoryEventHandler"])
@pytest.mark.parametrize("given", [5, None, "retriever", ReMindRAG])
def test_a_memory_hook_without_a_retriever_says_how_to_build_one(hook: str, given: Any) -> None:
    """A hook built on something that is not a retriever failed at the first answer, inside
    the user's chain, where a hook only logs; it is refused when built."""
    import remindrag_integrations as top

    with pytest.raises(ConfigError, match=r"memory_callback\(\).*memory_event_handler\(\)"):
        getattr(top, hook)(given)


def test_the_llamaindex_hook_refuses_an_unknown_argument() -> None:
    from remindrag_integrations import ReMindMemoryEventHandler

    r = ReMindRetriever.from_texts(["Alice lives in Paris."], embeddings=HashEmbedder())
    with pytest.raises(ConfigError, match="unknown argument.*retirever"):
        ReMindMemoryEventHandler(retirever=r)
    with pytest.raises(ConfigError, match="needs the ReMindRetriever"):
        ReMindMemoryEventHandler()
    assert ReMindMemoryEventHandler(retriever=r).retriever is r
