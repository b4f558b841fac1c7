"""``remindrag mcp`` for real: the SDK's client against server subprocesses over stdio and
streamable HTTP, memory across server processes, two servers on one store, a write waiting
for another process's, ``kill -9`` during a write."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import mcp_fixture
import pg_fixture
import pytest
from mcp.shared.exceptions import McpError
from mcp_fixture import QUESTION, TOOLS, call, client, error, server_args, server_env

from remindrag_integrations.stores import SQLiteGraphStore
from remindrag_integrations.stores.sqlite_store import db_path

fresh_store = mcp_fixture.fresh_store
indexed_store = mcp_fixture.indexed_store
pg_dsn = pg_fixture.pg_dsn
own_pg_database = pg_fixture.own_pg_database


@contextlib.contextmanager
def opened(store: Path) -> Iterator[SQLiteGraphStore]:
    """The store as a new process opens it (closed after)."""
    found = SQLiteGraphStore.load(store)
    try:
        yield found
    finally:
        found.close()


def dump(store: Path) -> list[str]:
    """Every row of the store's database, as SQL (what a write would change)."""
    con = sqlite3.connect(db_path(store))
    try:
        return list(con.iterdump())
    finally:
        con.close()


def test_search_remember_then_a_new_server_answers_from_memory(fresh_store: Path) -> None:
    async def first_session() -> tuple[dict, dict]:
        async with client(fresh_store) as s:
            listed = await s.list_tools()
            assert {t.name for t in listed.tools} == TOOLS
            search = next(t for t in listed.tools if t.name == "search")
            assert search.inputSchema["required"] == ["query"]
            assert "trace_id" in search.description and "replay" in search.description

            found = await call(s, "search", query=QUESTION, k=4)
            assert [p["n"] for p in found["passages"]] == [1, 2, 3, 4]
            first = found["passages"][0]
            assert first["chunk_id"].startswith("c-") and first["metadata"]["source"]
            assert {p["found_by"] for p in found["passages"]} <= {
                "seed",
                "traversal",
                "dense_fill",
            }
            assert found["stop_reason"] != "replay" and found["walk_steps"] > 0
            answer = f"Lilu is a spirit [{first['chunk_id']}]."
            wrote = await call(s, "remember", trace_id=found["trace_id"], answer=answer)
            assert wrote["applied"] and wrote["enhanced_edges"] > 0
            again = await call(s, "remember", trace_id=found["trace_id"], answer=answer)
            assert not again["applied"] and again["skipped_reason"] == "already memorized"

            text = (await s.read_resource(f"trace://{found['trace_id']}")).contents[0].text
            assert f"query: {QUESTION}" in text and "edges enhanced" in text
            page = (await s.read_resource("memory://view")).contents[0].text
            assert page.startswith("<!DOCTYPE html>") and QUESTION in page

            # bad arguments and unknown ids: tool errors with the message; the server lives on
            assert "query" in await error(s, "search")
            assert "non-empty" in await error(s, "search", query="  ")
            assert "unknown trace id" in await error(s, "remember", trace_id="nope")
            assert "helpful" in await error(s, "feedback", trace_id=found["trace_id"])
            assert "texts or paths" in await error(s, "add_documents")
            assert "no chunk_ids" in await error(s, "teach", pairs=[{"question": "q"}])
            with pytest.raises(McpError, match="unknown trace id"):
                await s.read_resource("trace://nope")

            other = await call(s, "search", query="Which mythology does the Alû come from?")
            down = await call(s, "feedback", trace_id=other["trace_id"], helpful=False)
            assert down["applied"] and down["penalised_edges"] > 0 and not down["enhanced_edges"]
            stats = await call(s, "stats")
            return found, stats

    found, stats = asyncio.run(first_session())
    assert stats["documents"] == 10 and stats["touched_edges"] > 0

    async def second_session() -> dict:
        async with client(fresh_store) as s:
            return await call(s, "search", query=QUESTION, k=4)

    replayed = asyncio.run(second_session())
    assert replayed["stop_reason"] == "replay" or replayed["replayed_edges"] > 0
    assert replayed["walk_steps"] < found["walk_steps"]
    with opened(fresh_store) as store:
        saved = store.load_trace(found["trace_id"])
    assert saved is not None and saved["memorized"]


def test_read_only_offers_and_does_no_writes(fresh_store: Path) -> None:
    """A read-only server writes nothing to the store (not its searches' traces, which it
    keeps in memory) and sees what a writing server adds meanwhile."""
    before = dump(fresh_store)
    assert any('INSERT INTO "settings"' in row for row in before)  # a dump shows writes

    async def session() -> str:
        async with client(fresh_store, "--read-only") as s:
            listed = {t.name for t in (await s.list_tools()).tools}
            assert listed == {"search", "list_documents", "stats"}
            page = await call(s, "list_documents", limit=4)  # a read: offered, paged
            assert page["total"] == 10 and len(page["doc_ids"]) == 4 and page["next_offset"] == 4
            last = await call(s, "list_documents", offset=8)
            assert len(last["doc_ids"]) == 2 and last["next_offset"] is None
            assert page["doc_ids"] == sorted(page["doc_ids"]) < last["doc_ids"]
            assert "limit" in await error(s, "list_documents", limit=0)
            found = await call(s, "search", query=QUESTION)
            assert "remember" in await error(s, "remember", trace_id=found["trace_id"])
            stats = await call(s, "stats")
            assert stats["read_only"] is True and stats["documents"] == 10
            text = (await s.read_resource(f"trace://{found['trace_id']}")).contents[0].text
            assert f"query: {QUESTION}" in text and "not memorized" in text
            page = (await s.read_resource("memory://view")).contents[0].text
            assert page.startswith("<!DOCTYPE html>")
            return str(found["trace_id"])

    trace_id = asyncio.run(session())
    assert dump(fresh_store) == before
    with opened(fresh_store) as store:
        assert store.load_trace(trace_id) is None

    async def beside_a_writer() -> tuple[dict, dict]:
        async with client(fresh_store, "--read-only") as ro, client(fresh_store) as rw:
            await call(ro, "search", query=QUESTION)
            added = await call(rw, "add_documents", texts=["Ninurta is a god."], ids=["ninurta"])
            return added, await call(ro, "stats")  # the other process's write, seen

    added, stats = asyncio.run(beside_a_writer())
    assert added["documents"] == 1 and stats["documents"] == 11


def test_remember_in_another_server_process_and_documents_round_trip(fresh_store: Path) -> None:
    """Clients that start a server per tool call (the adapters' default) still remember."""

    async def run() -> str:
        async with client(fresh_store) as s:
            found = await call(s, "search", query=QUESTION)
        with opened(fresh_store) as store:  # the trace is in the store for another process
            kept = store.load_trace(found["trace_id"])
        assert kept is not None and not kept["memorized"]
        async with client(fresh_store) as s:
            wrote = await call(
                s, "remember", trace_id=found["trace_id"], answer="An Akkadian spirit.", cited=[]
            )
            assert wrote["applied"]
            added = await call(
                s,
                "add_documents",
                texts=["Ninurta is a Mesopotamian god of farming and war."],
                ids=["ninurta"],
                metadata={"kind": "god"},
            )
            assert added["documents"] == 1 and added["doc_ids"] == ["ninurta"]
            hit = await call(s, "search", query="Who is Ninurta?", filter={"kind": "god"})
            assert {p["doc_id"] for p in hit["passages"]} == {"ninurta"}
            assert hit["passages"][0]["metadata"] == {"kind": "god"}
        async with client(fresh_store) as s:
            assert (await call(s, "stats"))["documents"] == 11
            again = await call(
                s, "remember", trace_id=found["trace_id"], answer="An Akkadian spirit."
            )
            assert again["skipped_reason"] == "already memorized"  # once, across processes
            assert (await call(s, "delete_documents", ids=["ninurta"]))["documents"] == 1
            taught = await call(
                s, "teach", pairs=[{"question": "Who is Gallu?", "texts": ["Gallu"]}]
            )
            assert taught["pairs"] == 1
        return str(found["trace_id"])

    trace_id = asyncio.run(run())
    with opened(fresh_store) as store:
        assert store.counts()["documents"] == 10 and store.load_trace(trace_id)["memorized"]
    assert not (fresh_store / "mcp-traces").exists()  # traces are rows of the store


def test_two_servers_on_one_store_lose_no_write(fresh_store: Path) -> None:
    questions = [QUESTION, "Which mythology does the Alû come from?"]

    async def run() -> list[str]:
        async with client(fresh_store) as a, client(fresh_store) as b:
            found = await asyncio.gather(
                call(a, "search", query=questions[0]), call(b, "search", query=questions[1])
            )
            ids = [f["trace_id"] for f in found]
            answers = ["An Akkadian spirit.", "Akkadian and Sumerian mythology."]
            wrote = await asyncio.gather(
                call(a, "remember", trace_id=ids[0], answer=answers[0]),
                call(b, "remember", trace_id=ids[1], answer=answers[1]),
            )
            assert all(w["applied"] for w in wrote)
            # each server sees the other's committed writes at its next call
            assert (await call(a, "stats"))["touched_edges"] == (await call(b, "stats"))[
                "touched_edges"
            ]

            async def reads() -> list[int]:  # while the other server writes
                return [len((await call(a, "search", query=q))["passages"]) for q in questions * 4]

            texts = [f"Ninurta fought the demon number {i}." for i in range(20)]
            counts, *added = await asyncio.gather(
                reads(),
                call(b, "add_documents", texts=texts[:10]),
                call(b, "add_documents", texts=texts[10:]),
            )
            assert counts == [5] * 8 and [x["documents"] for x in added] == [10, 10]
            assert (await call(a, "stats"))["documents"] == 30  # a sees both of b's writes
            return ids

    ids = asyncio.run(run())
    with opened(fresh_store) as store:
        assert all(store.load_trace(t)["memorized"] for t in ids)
        assert store.counts()["documents"] == 30 and store.touched_edges() > 0


def test_without_the_mcp_extra_the_command_says_what_to_install(indexed_store: Path) -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"  # as if the extra were not installed
        "from remindrag_integrations.app.cli import main\n"
        f"sys.exit(main(['mcp', '--store', {str(indexed_store)!r}]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and "needs the 'mcp' extra" in proc.stderr


@contextlib.contextmanager
def another_writer(store: Path) -> Iterator[None]:
    """Another process's long write transaction (say a ``remindrag index`` batch): the
    store's write lock held until the block ends, nothing written."""
    con = sqlite3.connect(db_path(store), isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        yield
        con.execute("ROLLBACK")
    finally:
        con.close()


def test_a_write_waits_for_another_writer_then_goes_on(fresh_store: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    service = _service(fresh_store)
    found = service.search(QUESTION)
    with ThreadPoolExecutor(1) as pool, another_writer(fresh_store):
        wrote = pool.submit(service.remember, found["trace_id"], "An Akkadian spirit.")
        # the write is at the store's write lock (its writer connection taken), which the
        # other writer holds: it can only be waiting there
        while not service.engine.store._db_lock.locked():
            assert not wrote.done(), wrote.result()
            time.sleep(0.001)
        assert not wrote.done()
    assert wrote.result(timeout=60)["applied"]  # it waited, then wrote
    assert service.stats()["touched_edges"] > 0


def test_a_write_held_up_too_long_says_so_and_writes_nothing(
    fresh_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remindrag_integrations.app import mcp_service
    from remindrag_integrations.app.mcp_server import build_server, sdk
    from remindrag_integrations.errors import StoreLockedError

    monkeypatch.setattr(mcp_service, "LOCK_WAIT", 0.2)
    service = _service(fresh_store)
    found = service.search(QUESTION)
    before = service.stats()
    _, tool_error, _, _ = sdk()
    locked = "held by another writer longer than lock_wait"
    with another_writer(fresh_store):
        with pytest.raises(StoreLockedError, match=locked):
            service.remember(found["trace_id"], "An Akkadian spirit.")
        with pytest.raises(StoreLockedError, match=locked):
            service.add_documents(texts=["Ninurta is a god."], ids=["ninurta"])
        call = build_server(service, stdio=False).call_tool(
            "delete_documents", {"ids": [found["passages"][0]["doc_id"]]}
        )
        with pytest.raises(tool_error, match=locked):  # the agent reads why
            asyncio.run(call)
    assert service.stats() == before  # nothing of the three was written
    # the same calls go through once the other writer is done
    assert service.add_documents(texts=["Ninurta is a god."], ids=["ninurta"])["documents"] == 1
    assert service.stats()["documents"] == 11
    again = service.remember(found["trace_id"], "An Akkadian spirit.")
    assert again["applied"], again  # not taken for memorized by the claim that failed


def _children(name: str) -> list[int]:
    """Our own child processes whose command line holds ``name``."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and name in cmd:
            found.append(int(entry.name))
    return found


class _Probe:
    """Whether another process is inside a write transaction on the store (holds its write
    lock): a write transaction tried without waiting, rolled back at once."""

    def __init__(self, store: Path) -> None:
        self.con = sqlite3.connect(db_path(store), timeout=0, isolation_level=None)

    def writing(self) -> bool:
        try:
            self.con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return True
        self.con.execute("ROLLBACK")
        return False


def test_kill_9_during_a_write_keeps_every_acknowledged_write(fresh_store: Path) -> None:
    texts = [f"Document {i} about the demon Gallu and the spirit number {i}." for i in range(300)]
    probe = _Probe(fresh_store)

    async def session() -> tuple[str, int]:
        async with client(fresh_store) as s:
            (pid,) = _children("remindrag_integrations.app.cli mcp")
            found = await call(s, "search", query=QUESTION)  # acknowledged writes first
            answer = "An Akkadian spirit."
            assert (await call(s, "remember", trace_id=found["trace_id"], answer=answer))["applied"]
            added = await call(s, "add_documents", texts=["Ninurta is a god."], ids=["ninurta"])
            assert added["documents"] == 1
            touched = (await call(s, "stats"))["touched_edges"]
            task = asyncio.ensure_future(call(s, "add_documents", texts=texts))
            deadline = time.monotonic() + 120
            while not probe.writing() and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
            assert not task.done() and probe.writing()  # inside its write transaction
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(BaseException):  # noqa: B017 - whatever the transport raises
                await asyncio.wait_for(task, 30)
            return str(found["trace_id"]), int(touched)

    acknowledged: list[tuple[str, int]] = []

    async def run() -> None:
        acknowledged.append(await session())

    try:
        asyncio.run(run())
    except BaseException as exc:  # the client's context may also report the dead server
        if not isinstance(exc, (Exception, BaseExceptionGroup)):
            raise
    assert acknowledged, "the session did not reach the kill"
    ((trace_id, touched),) = acknowledged
    assert not probe.writing()  # the dead server's lock went with it
    probe.con.close()
    con = sqlite3.connect(db_path(fresh_store))
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    with opened(fresh_store) as store:  # opens, with every write the server acknowledged
        assert store.counts()["documents"] in (11, 311)  # the killed write: all of it or none
        assert "ninurta" in store.document_ids()
        assert store.load_trace(trace_id)["memorized"]
        assert store.touched_edges() == touched

    async def next_write() -> dict:
        async with client(fresh_store) as s:
            await call(s, "add_documents", texts=["Enlil is a god."], ids=["enlil"])
            return await call(s, "stats")

    after = asyncio.run(next_write())
    assert after["documents"] in (12, 312) and after["touched_edges"] == touched


# --- streamable HTTP ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_http(store: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, *server_args(store, "--http", f"127.0.0.1:{port}", *extra)],
        env=server_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}/mcp"
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the HTTP server did not start")


def test_http_needs_the_token(indexed_store: Path) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    proc, url = _serve_http(indexed_store, "--read-only", "--token", "s3cret")
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"accept": "application/json, text/event-stream"}
        assert httpx.post(url, json=hello, headers=headers).status_code == 401
        wrong = {**headers, "authorization": "Bearer nope"}
        assert httpx.post(url, json=hello, headers=wrong).status_code == 401

        async def session() -> dict:
            auth = httpx.AsyncClient(headers={"Authorization": "Bearer s3cret"}, timeout=60)
            async with auth, streamable_http_client(url, http_client=auth) as (read, write, _):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    return await call(s, "search", query=QUESTION)

        assert asyncio.run(session())["passages"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _nested(levels: int) -> dict:
    f: dict = {"kind": "god"}
    for _ in range(levels):
        f = {"$and": [f]}
    return f


def test_a_request_nested_too_deep_is_answered_on_both_transports(indexed_store: Path) -> None:
    """40 levels of $and: the tool refuses the filter (at most 32); 100 levels (200 of JSON):
    too deep for the SDK to read, answered before it (stdio once gave no reply at all, HTTP a
    500 for a body of 100,000 '['); the server keeps serving."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def over_stdio() -> dict:
        async with client(indexed_store, "--read-only") as s:
            read = await error(s, "search", query=QUESTION, filter=_nested(40))
            assert "at most 32 levels deep" in read and "write it flatter" in read
            unread = error(s, "search", query=QUESTION, filter=_nested(100))
            assert "write it flatter" in await asyncio.wait_for(unread, 60)
            return await call(s, "search", query=QUESTION, k=2)

    assert asyncio.run(over_stdio())["passages"]
    proc, url = _serve_http(indexed_store, "--read-only")
    try:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        sent = httpx.post(url, content=b"[" * 100_000, headers=headers, timeout=60)
        assert sent.status_code == 400, sent.text
        assert "write it flatter" in sent.json()["error"]["message"]

        async def over_http() -> dict:
            http = httpx.AsyncClient(timeout=60)
            async with http, streamable_http_client(url, http_client=http) as (read, write, _):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    refused = await error(s, "search", query=QUESTION, filter=_nested(40))
                    assert "at most 32 levels deep" in refused
                    return await call(s, "search", query=QUESTION, k=2)

        assert asyncio.run(over_http())["passages"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_non_local_bind_without_a_token_refuses_to_start(indexed_store: Path) -> None:
    env = {k: v for k, v in server_env().items() if k != "REMINDRAG_MCP_TOKEN"}
    proc = subprocess.run(
        [sys.executable, *server_args(indexed_store, "--http", "0.0.0.0:8765")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and "needs a bearer token" in proc.stderr


@pytest.mark.postgres
def test_servers_on_one_postgres_store_share_memory(
    own_pg_database: str, indexed_store: Path
) -> None:
    from remindrag_integrations.app.cli import main
    from remindrag_integrations.stores import open_store

    dsn, ns = own_pg_database, ["--namespace", "mcp"]
    open_store(dsn, namespace="mcp").drop_namespace()  # type: ignore[attr-defined]
    docs = indexed_store.parent / "docs"
    assert main(["index", str(docs), "--store", dsn, *ns, "--no-cache"]) == 0

    async def run() -> tuple[dict, dict, dict]:
        async with client(dsn, *ns) as a, client(dsn, *ns) as b:
            found = await call(a, "search", query=QUESTION)
            # remembered through the other server: the trace is in the shared store
            answer = "An Akkadian spirit."  # grounded in the passages naming Akkadian
            wrote = await call(b, "remember", trace_id=found["trace_id"], answer=answer)
            again = await call(a, "remember", trace_id=found["trace_id"], answer=answer)
            assert not again["applied"] and again["skipped_reason"] == "already memorized"
        async with client(dsn, *ns) as c:
            return found, wrote, await call(c, "search", query=QUESTION)

    try:
        found, wrote, replayed = asyncio.run(run())
    finally:
        open_store(dsn, namespace="mcp").drop_namespace()  # type: ignore[attr-defined]
    assert wrote["applied"]
    assert replayed["stop_reason"] == "replay" or replayed["replayed_edges"] > 0
    assert replayed["walk_steps"] < found["walk_steps"]


def _service(store: Path) -> object:
    from argparse import Namespace

    from remindrag_integrations.app import mcp_service

    args = Namespace(store=str(store), namespace="default", llm="none", cache=None)
    return mcp_service.StoreService(Namespace(**vars(args), no_cache=True))


class _Embedder:
    """The service's embedder, each thread's first ``embed`` call held at ``hold(thread)``."""

    def __init__(self, real: object, hold: Callable[[], None]) -> None:
        import threading

        self._real, self._hold, self._held = real, hold, threading.local()

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)

    def embed(self, texts: list[str]) -> object:
        if not getattr(self._held, "done", False):
            self._held.done = True
            self._hold()
        return self._real.embed(texts)


def test_http_searches_run_side_by_side(fresh_store: Path) -> None:
    """Two searches are inside the engine at once (each waits there for the other); before
    issue 34's item 7 the service ran one request at a time, and the pair never met."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    service = _service(fresh_store)
    meet = threading.Barrier(2, timeout=30)
    service.engine.embedder = _Embedder(service.engine.embedder, meet.wait)
    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(service.search, [QUESTION, "Who wrote the Enuma Elish?"]))
    assert all(f["passages"] for f in found)
    assert len({f["trace_id"] for f in found}) == 2


def test_a_write_during_a_search_keeps_the_search_rememberable(fresh_store: Path) -> None:
    """A write lands while a search is still under way: the search finishes, its trace can be
    read and is remembered once."""
    import threading

    service = _service(fresh_store)
    first = service.search(QUESTION)
    inside, go = threading.Event(), threading.Event()

    def hold() -> None:
        if threading.current_thread().name == "slow-search":
            inside.set()
            assert go.wait(30)

    service.engine.embedder = _Embedder(service.engine.embedder, hold)
    found: dict = {}
    slow = threading.Thread(
        target=lambda: found.update(service.search("Who wrote the Enuma Elish?")),
        name="slow-search",
    )
    slow.start()
    assert inside.wait(30)
    assert service.remember(first["trace_id"], "An Akkadian spirit.")["applied"]  # swaps
    go.set()
    slow.join(30)
    assert found["passages"]
    text = service.trace_text(found["trace_id"])
    assert "Enuma Elish" in text and "not memorized" in text
    assert service.remember(found["trace_id"], "Unknown.")["trace_id"] == found["trace_id"]
    again = service.remember(found["trace_id"], "Unknown.")
    assert not again["applied"]  # once per trace


def test_a_servers_traces_are_rows_of_the_store_the_newest_kept(fresh_store: Path) -> None:
    """Each search's trace is a row of the store (a ``remember`` from another process finds
    it); the store keeps the newest ``max_traces`` of them, pruned now and then (every 100
    traces), so an agent searching all day does not grow it without bound."""
    import dataclasses

    service = _service(fresh_store)
    store = service.engine.store
    store.max_traces = 20
    trace = service.engine.retrieve(QUESTION).trace
    ids = [f"t{n:03d}" for n in range(250)]
    con = sqlite3.connect(db_path(fresh_store))
    most = 0
    for tid in ids:
        store.save_trace(dataclasses.replace(trace, trace_id=tid).to_dict())
        most = max(most, con.execute("SELECT count(*) FROM traces").fetchone()[0])
    con.close()
    assert 20 < most <= 20 + 100
    with opened(fresh_store) as other:  # as another server process reads them
        assert all(other.load_trace(tid) is not None for tid in ids[-20:])
        assert other.load_trace(ids[0]) is None and other.load_trace(trace.trace_id) is None


@pytest.mark.parametrize("stdio", [False, True])
def test_http_tool_calls_run_side_by_side_stdio_ones_in_turn(
    fresh_store: Path, stdio: bool
) -> None:
    """Through the SDK server's own tool call: over HTTP (``stdio=False``) two searches meet
    inside the engine; over stdio (stdout is the transport's, redirected per call) they take
    turns, and the second waits for the first."""
    import threading

    from remindrag_integrations.app.mcp_server import build_server

    service = _service(fresh_store)
    meet = threading.Barrier(2, timeout=5)
    service.engine.embedder = _Embedder(service.engine.embedder, meet.wait)
    server = build_server(service, stdio=stdio)

    async def both() -> list:
        calls = [
            server.call_tool("search", {"query": q})
            for q in (QUESTION, "Who wrote the Enuma Elish?")
        ]
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(both())
    failed = [r for r in results if isinstance(r, BaseException)]
    if stdio:
        assert failed  # in turn: the first waited at the barrier alone
    else:
        assert not failed, failed
