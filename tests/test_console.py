"""`remindrag serve` (issue 47): the console's API over a real folder store, through
Starlette's TestClient; every change goes through the engine's public API, is recorded in
the store and can be undone; bad input gets a typed 4xx JSON answer. The real-browser test is
tests/test_console_browser.py (`make test-console`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_fixture
import numpy as np
import pg_fixture
import pytest
from mcp_fixture import QUESTION
from starlette.testclient import TestClient  # the test extra (and the console extra)

from remindrag_integrations import ReMindRAG
from remindrag_integrations.app.console import audit
from remindrag_integrations.app.console.server import MAX_BODY, build_app
from remindrag_integrations.core.errors import EmbeddingError, UnknownNodeError
from remindrag_integrations.stores import SQLiteGraphStore

indexed_store = mcp_fixture.indexed_store
fresh_store = mcp_fixture.fresh_store


@pytest.fixture
def engine(fresh_store: Path) -> Iterator[ReMindRAG]:
    e = ReMindRAG(store=fresh_store)
    yield e
    e.close()


@pytest.fixture
def client(engine: ReMindRAG) -> TestClient:
    return TestClient(build_app(engine, who="tester"))


def ask(client: TestClient, question: str = QUESTION) -> dict[str, Any]:
    r = client.post("/api/ask", json={"question": question, "min_score": 0})
    assert r.status_code == 200, r.text
    return r.json()


def remembered(store: Path) -> dict[str, float]:
    """Memory norms per edge as a second process sees them: the store reopened."""
    with SQLiteGraphStore.open(store, create=False) as s:
        vecs = s.export_memory()
    return {e: float(np.linalg.norm(v)) for e, v in vecs.items() if any(v)}


# --- the engine's new public methods -----------------------------------------------------------
def test_forget_and_restore_edges_through_the_engine(engine: ReMindRAG) -> None:
    a = engine.answer(QUESTION, min_score=0)
    w = engine.feedback(a.trace_id, True)
    assert w.applied and w.enhanced
    before = engine.memory_vectors()
    edge = w.enhanced[0]
    assert edge in before
    held = engine.forget_edges([edge])
    assert list(held) == [edge] and edge not in engine.memory_vectors()
    assert engine.memory_vectors([edge]) == {}
    assert engine.restore_memory(held) == 1
    assert np.allclose(engine.memory_vectors([edge])[edge], before[edge])
    wrote = engine.forget_trace(a.trace_id)
    assert set(wrote) >= set(w.enhanced) and engine.memory_vectors() == {
        e: v for e, v in before.items() if e not in wrote
    }
    with pytest.raises(UnknownNodeError):
        engine.forget_edges(["k-0000000000"])
    with pytest.raises(EmbeddingError):
        engine.restore_memory({edge: [2.0] * engine.store.dim})  # norm above 1
    with pytest.raises(EmbeddingError):
        engine.restore_memory({edge: [0.0, 1.0]})  # wrong dimension


# --- pages and reads -------------------------------------------------------------------------
def test_every_page_and_the_vendored_library_load(client: TestClient) -> None:
    trace = ask(client)["trace_id"]
    for path in ("/", "/graph", "/queries", "/correct", "/documents", "/memory"):
        r = client.get(path)
        assert r.status_code == 200 and "ReMindRAG console" in r.text, path
    page = client.get(f"/queries/{trace}")
    assert page.status_code == 200 and QUESTION in page.text
    js = client.get("/static/cytoscape.min.js")
    assert js.status_code == 200 and "cytoscape" in js.text[:2000]
    assert "MIT" in client.get("/static/cytoscape-LICENSE.txt").text
    assert "cytoscape.min.js" in client.get("/graph").text


def test_overview_counts_and_series(client: TestClient, engine: ReMindRAG) -> None:
    first = ask(client)
    client.post(f"/api/traces/{first['trace_id']}/feedback", json={"helpful": True})
    ask(client)  # the confirmed path replayed
    o = client.get("/api/overview").json()
    assert o["counts"]["documents"] == 10 and o["counts"]["edges"] > 0
    assert o["remembered_edges"] == len(engine.memory_vectors()) > 0
    assert o["memory_bytes"] == o["touched_edges"] * o["dim"] * 4
    edge = next(iter(engine.memory_vectors()))
    client.post(f"/api/edges/{edge}/forget", json={})  # the count drops: no memory left there
    assert client.get("/api/overview").json()["remembered_edges"] == o["remembered_edges"] - 1
    assert [p["trace_id"] for p in o["series"]][-2:] == [
        first["trace_id"],
        client.get("/api/traces?limit=1").json()[0]["trace_id"],
    ]
    assert o["series"][-1]["replayed"] > 0 and o["series"][-1]["replay_share"] > 0
    assert o["recent_writes"][0]["what"] == "confirm trace"


def test_graph_search_and_neighbourhood(client: TestClient, engine: ReMindRAG) -> None:
    hits = client.get("/api/graph/search", params={"q": "Lilu", "kind": "entity"}).json()
    assert hits and hits[0]["name"] == "Lilu" and hits[0]["kind"] == "entity"
    n = client.get(f"/api/graph/node/{hits[0]['id']}", params={"limit": 3}).json()
    assert n["node"]["id"] == hits[0]["id"] and len(n["edges"]) == min(3, n["degree"])
    ends = {x["id"] for x in n["nodes"]}
    assert all(e["source"] in ends and e["target"] in ends for e in n["edges"])
    passages = client.get("/api/graph/search", params={"q": "Gallu demon", "kind": "passage"})
    assert passages.status_code == 200
    assert all(p["kind"] == "chunk" and p["text"] for p in passages.json())
    edge = n["edges"][0]["id"]
    got = client.get(f"/api/edges/{edge}").json()
    assert got["id"] == edge and got["strength"] == 0 and got["u_name"]


def test_remembered_edges_come_first_with_their_strength(client: TestClient) -> None:
    a = ask(client)
    client.post(f"/api/traces/{a['trace_id']}/feedback", json={"helpful": True})
    t = client.get(f"/api/traces/{a['trace_id']}").json()
    assert t["memory_result"]["applied"]
    edge = t["memory_result"]["enhanced"][0]
    e = client.get(f"/api/edges/{edge}").json()
    n = client.get(f"/api/graph/node/{e['source']}", params={"limit": 1}).json()
    assert n["edges"][0]["strength"] > 0  # the strongest first


def test_queries_list_and_detail(client: TestClient) -> None:
    a = ask(client)
    rows = client.get("/api/traces").json()
    assert rows[0]["trace_id"] == a["trace_id"] and rows[0]["query"] == QUESTION
    t = client.get(f"/api/traces/{a['trace_id']}").json()
    assert {p["chunk"] for p in t["passages"]} == {p["chunk"] for p in a["passages"]}
    assert t["seeds"] and t["walker"] and not t["memorized"]


# --- corrections: recorded in the store, undoable ------------------------------------------------
def test_forget_an_edge_is_recorded_in_the_store_and_undone(
    client: TestClient, fresh_store: Path
) -> None:
    a = ask(client)
    client.post(f"/api/traces/{a['trace_id']}/feedback", json={"helpful": True})
    before = remembered(fresh_store)
    edge = next(iter(before))
    r = client.post(f"/api/edges/{edge}/forget", json={})
    assert r.status_code == 200, r.text
    action = r.json()
    assert action["what"] == "forget edge" and action["who"] == "tester" and action["undoable"]
    assert edge not in remembered(fresh_store)  # another process sees it
    with SQLiteGraphStore.open(fresh_store, create=False) as s:  # the log is in the store
        row = s.settings()[audit.PREFIX + action["id"]]
    assert row["args"] == {"edge": edge} and row["at"]
    undo = client.post(f"/api/actions/{action['id']}/undo", json={})
    assert undo.status_code == 200 and undo.json()["result"] == {"restored_edges": 1}
    assert remembered(fresh_store)[edge] == pytest.approx(before[edge])
    again = client.post(f"/api/actions/{action['id']}/undo", json={})
    assert again.status_code == 422 and "already" in again.json()["message"]
    log = client.get("/api/actions").json()
    assert [x["what"] for x in log[:2]] == ["undo", "forget edge"]
    assert log[1]["undone"]["who"] == "tester"


def test_forget_what_a_trace_wrote_and_undo(client: TestClient, fresh_store: Path) -> None:
    a = ask(client)
    client.post(f"/api/traces/{a['trace_id']}/feedback", json={"helpful": True})
    before = remembered(fresh_store)
    action = client.post(f"/api/traces/{a['trace_id']}/forget", json={}).json()
    assert set(action["result"]["forgot"]) == set(before) and remembered(fresh_store) == {}
    client.post(f"/api/actions/{action['id']}/undo", json={})
    assert remembered(fresh_store) == pytest.approx(before)


def test_penalise_and_teach_are_recorded_and_undone(client: TestClient, fresh_store: Path) -> None:
    a = ask(client)
    down = client.post(f"/api/traces/{a['trace_id']}/feedback", json={"helpful": False}).json()
    assert down["what"] == "penalise trace" and down["result"]["penalised"] > 0
    client.post(f"/api/actions/{down['id']}/undo", json={})
    assert remembered(fresh_store) == {}
    chunk = a["passages"][-1]["chunk"]
    taught = client.post("/api/teach", json={"question": "Who is Gallu?", "chunk_ids": [chunk]})
    assert taught.status_code == 200, taught.text
    body = taught.json()
    assert body["result"]["taught"] == 1 and body["result"]["edges_changed"] > 0
    assert len(remembered(fresh_store)) == body["result"]["edges_changed"]
    client.post(f"/api/actions/{body['id']}/undo", json={})
    assert remembered(fresh_store) == {}


def test_a_write_by_another_process_is_seen(client: TestClient, fresh_store: Path) -> None:
    assert client.get("/api/overview").json()["remembered_edges"] == 0
    other = ReMindRAG(store=fresh_store)
    try:
        a = other.answer(QUESTION, min_score=0)
        other.feedback(a.trace_id, True)
    finally:
        other.close()
    o = client.get("/api/overview").json()
    assert o["remembered_edges"] > 0 and o["memorized_traces"][0]["trace_id"] == a.trace_id


# --- documents -------------------------------------------------------------------------------
def test_documents_list_search_delete_undo_and_reindex(
    client: TestClient, engine: ReMindRAG, tmp_path: Path
) -> None:
    d = client.get("/api/documents", params={"q": "lilu"}).json()
    assert d["total"] == 2 and all("Lilu" in x["id"] for x in d["documents"])
    gone = d["documents"][0]["id"]
    r = client.post("/api/documents/delete", json={"doc_id": gone})
    assert r.status_code == 200 and r.json()["result"]["documents"] == 1
    assert gone not in engine.document_ids()
    client.post(f"/api/actions/{r.json()['id']}/undo", json={})
    assert gone in engine.document_ids()
    f = tmp_path / "note.md"
    f.write_text("Gallu demons dragged Dumuzid to the underworld.", encoding="utf-8")
    job = client.post("/api/documents/reindex", json={"path": str(f)}).json()
    for _ in range(200):
        job = client.get(f"/api/jobs/{job['id']}").json()
        if job["state"] != "running":
            break
        import time

        time.sleep(0.05)
    assert job["state"] == "done", job
    assert job["result"]["documents"] == 1 and job["total"] >= 1
    assert client.get("/api/documents").json()["total"] == 11
    act = client.get("/api/actions").json()[0]
    assert act["what"] == "re-index" and act["undoable"]
    client.post(f"/api/actions/{act['id']}/undo", json={})
    assert client.get("/api/documents").json()["total"] == 10


# --- bad input: typed 4xx JSON ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "body", "status", "error"),
    [
        ("get", "/api/traces/0123456789abcdef", None, 404, "UnknownTraceError"),
        ("get", "/api/graph/node/e-0000000000", None, 404, "UnknownNodeError"),
        ("get", "/api/edges/k-0000000000", None, 404, "UnknownNodeError"),
        ("post", "/api/edges/k-0000000000/forget", {}, 404, "UnknownNodeError"),
        ("post", "/api/traces/nope/forget", {}, 404, "UnknownTraceError"),
        ("post", "/api/actions/nope/undo", {}, 404, "UnknownActionError"),
        ("get", "/api/jobs/nope", None, 404, "UnknownJobError"),
        ("get", "/api/nothing", None, 404, "NotFound"),
        ("post", "/api/teach", {"question": "q", "chunk_ids": ["c-0000000000"]}, 404, None),
        ("post", "/api/teach", {"question": "q", "chunk_ids": "c-1"}, 422, None),
        ("post", "/api/teach", {"question": "", "chunk_ids": ["c-1"]}, 422, None),
        ("post", "/api/teach", {"question": "q", "chunk_ids": ["c"], "extra": 1}, 422, None),
        ("post", "/api/ask", {"question": 3}, 422, "InvalidArgumentError"),
        ("post", "/api/ask", {"question": "q", "min_score": "high"}, 422, None),
        ("get", "/api/graph/search?q=x&kind=planet", None, 422, None),
        ("get", "/api/graph/search?q=x&limit=100000", None, 422, None),
        ("get", "/api/traces?limit=zero", None, 422, None),
        ("get", "/api/documents?offset=-1", None, 422, None),
        ("post", "/api/documents/delete", {"doc_id": "no such doc"}, 404, None),
        (
            "post",
            "/api/documents/reindex",
            {"path": "/no/such/file.md"},
            404,
            "SourceNotFoundError",
        ),
        ("post", "/api/traces/x/feedback", {"helpful": "yes"}, 422, None),
        ("get", "/api/teach", None, 405, "MethodNotAllowed"),
    ],
)
def test_bad_input_gets_a_typed_4xx(
    client: TestClient,
    method: str,
    path: str,
    body: dict | None,
    status: int,
    error: str | None,
) -> None:
    r = client.post(path, json=body) if method == "post" else client.get(path)
    assert r.status_code == status, r.text
    got = r.json()
    assert set(got) == {"error", "message"} and got["message"]
    if error:
        assert got["error"] == error


def test_bodies_too_large_not_json_or_cross_site_are_refused(client: TestClient) -> None:
    big = client.post(
        "/api/ask",
        content=b'{"question": "' + b"x" * MAX_BODY + b'"}',
        headers={"content-type": "application/json"},
    )
    assert big.status_code == 413 and big.json()["error"] == "BodyTooLarge"
    bad = client.post("/api/ask", content=b"{nope", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"] == "BadBody"
    arr = client.post("/api/ask", json=[1, 2])
    assert arr.status_code == 400
    form = client.post("/api/ask", data={"question": "q"})
    assert form.status_code == 415
    other = client.post(
        "/api/ask", json={"question": "q"}, headers={"origin": "http://evil.example"}
    )
    assert other.status_code == 403


def test_the_token_guards_every_request(engine: ReMindRAG) -> None:
    app = build_app(engine, token="s3cret")
    c = TestClient(app)
    for path in ("/", "/api/overview", "/static/console.js"):
        r = c.get(path)
        assert r.status_code == 401 and r.json() == {"error": "unauthorized"}, path
    assert c.get("/api/overview", headers={"authorization": "Bearer wrong"}).status_code == 401
    ok = c.get("/api/overview", headers={"authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    assert c.get("/?token=wrong").status_code == 401
    browser = TestClient(app)
    first = browser.get("/?token=s3cret")
    assert first.status_code == 200 and "HttpOnly" in first.headers["set-cookie"]
    assert browser.get("/api/overview").status_code == 200  # the cookie carries it


def test_serve_refuses_a_public_address_without_a_token(fresh_store: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "remindrag_integrations.app.cli",
            "serve",
            "--store",
            str(fresh_store),
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=mcp_fixture.server_env(),
    )
    assert proc.returncode == 2 and "--token" in proc.stderr


def test_serve_answers_over_http(fresh_store: Path) -> None:
    """The command itself: a real uvicorn process on a free port."""
    import urllib.request

    with mcp_fixture.serving_console(fresh_store) as base:
        with urllib.request.urlopen(base + "/api/overview") as r:
            data = json.loads(r.read())
        assert data["counts"]["documents"] == 10


# --- PostgreSQL: the same console over a DSN, the log in the namespace's settings ---------
pg_dsn = pg_fixture.pg_dsn
own_pg_database = pg_fixture.own_pg_database


@pytest.mark.postgres
def test_the_console_over_postgres_records_and_undoes(
    own_pg_database: str, indexed_store: Path
) -> None:
    from remindrag_integrations.app.cli import main
    from remindrag_integrations.stores import open_store

    dsn, ns = own_pg_database, "console"
    docs = indexed_store.parent / "docs"
    assert main(["index", str(docs), "--store", dsn, "--namespace", ns, "--no-cache"]) == 0
    store = open_store(dsn, namespace=ns)
    engine = ReMindRAG(store=store)
    try:
        c = TestClient(build_app(engine, who="pg-tester"))
        assert c.get("/api/overview").json()["counts"]["documents"] == 10
        a = ask(c)
        up = c.post(f"/api/traces/{a['trace_id']}/feedback", json={"helpful": True}).json()
        assert up["result"]["enhanced"] > 0
        wrote = engine.memory_vectors()
        edge = next(iter(wrote))
        forgot = c.post(f"/api/edges/{edge}/forget", json={}).json()
        other = open_store(dsn, namespace=ns)  # another connection sees the change and the log
        assert not np.any(other.memory([edge])[0])
        row = other.settings()[audit.PREFIX + forgot["id"]]  # type: ignore[attr-defined]
        assert row["who"] == "pg-tester" and row["what"] == "forget edge"
        c.post(f"/api/actions/{forgot['id']}/undo", json={})
        assert np.allclose(other.memory([edge])[0], wrote[edge])
        assert [x["what"] for x in c.get("/api/actions").json()] == [
            "undo",
            "forget edge",
            "confirm trace",
        ]
        other.close()
    finally:
        store.drop_namespace()  # type: ignore[attr-defined]
        engine.close()


def test_the_browser_test_fails_rather_than_skips_without_a_browser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import shutil

    import test_console_browser

    monkeypatch.delenv("REMINDRAG_CHROMIUM", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="no Chromium found"):
        test_console_browser.chromium_path()
