"""Issue 35, "a big corpus streams in": ``kill -9`` at several points of a streamed index, on the
embedded folder store and on PostgreSQL, through the command line and the Python API
(tests/stream_kills.py runs them). Each killed run is followed by the same run again, which
finishes; the store then holds every document of the corpus exactly once and the same graph
as a run never killed (documents with their hashes, chunks, node and edge counts), and the
killed run had committed exactly the batches before the kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pg_fixture
import pytest
import stream_kills

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or not hasattr(os, "fork"), reason="kills forked children"
)
pg_dsn = pg_fixture.pg_dsn

# point -> the documents the killed run had committed (batches of 10; 50 documents)
FOLDER_CLI = {
    "between:2": 20,  # after the 2nd batch's commit, before the 3rd is read
    "mid-batch:3": 20,  # the 3rd batch extracted, not written
    "commit:1": 0,  # the first batch's rows all written in its transaction, not committed
    "commit:3": 20,  # the 3rd batch's rows all written in its transaction, not committed
    "external:2": None,  # kill -9 from outside after two progress lines (20 or 30)
}
PG_CLI = {
    "between:2": 20,
    "mid-batch:3": 20,
    "commit:3": 20,  # the 3rd batch's rows all written in its transaction, not committed
    "external:2": None,
}
FOLDER_API = {"mid-batch:3": 20, "commit:2": 10}
PG_API = {"mid-batch:3": 20, "commit:2": 10}
# embedding ahead (api-ahead): insert batches of 5, a transaction each (on both stores); a
# kill lands while the next insert batch embeds
FOLDER_AHEAD = {"mid-batch:3": 10, "commit:2": 5}
PG_AHEAD = {"mid-batch:3": 10, "commit:2": 5}


def _kill_runs(where: Path, how: str, store: str, points: dict[str, int | None]) -> dict:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(stream_kills.ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run(
        [sys.executable, stream_kills.__file__, str(where), how, store, *points],
        check=True,
        env=env,
        timeout=900,
    )
    return json.loads((where / "runs.json").read_text())


def _check(
    where: Path, runs: dict, points: dict[str, int | None], content: Callable[[str, str], Any]
) -> None:
    ids = sorted(json.loads(line)["id"] for line in (where / "corpus.jsonl").open())
    whole = runs.pop("whole")
    assert whole["runs"][0]["exit"] == 0, (where / whole["runs"][0]["out"]).read_text()
    want = content(whole["store"], "whole")
    assert sorted(want["documents"]) == ids  # every document once
    assert set(runs) == {stream_kills._name(p) for p in points}
    wrong = {}
    for name, run in runs.items():
        killed, again = run["runs"]
        expected = points[run["point"]]
        log = (where / killed["out"]).read_text() + (where / again["out"]).read_text()
        found = []
        if not killed["killed"]:
            found.append(f"not killed: {killed}")
        if expected is not None and killed["held"] != expected:
            found.append(f"the killed run left {killed['held']} documents, not {expected}")
        if expected is None and killed["held"] not in (20, 30):
            found.append(f"the killed run left {killed['held']} documents")
        if again["exit"] != 0:
            found.append(f"the run again exited {again['exit']}")
        elif content(run["store"], name) != want:
            found.append("the store differs from the run never killed")
        if found:
            wrong[run["point"]] = [*found, log[-3000:]]
    assert not wrong


def _folder_content(store: str, namespace: str) -> dict:
    import sqlite3

    from remindrag_integrations.stores import SQLiteGraphStore
    from remindrag_integrations.stores.sqlite_store import db_path

    s = SQLiteGraphStore.load(store)
    try:
        docs = s.document_ids()
        content = {
            "documents": {d: s.document_hash(d) for d in docs},
            "chunks": sorted((c.doc_id, c.text) for d in docs for c in s.document_chunks(d)),
            "counts": s.counts(),
        }
    finally:
        s.close()
    con = sqlite3.connect(db_path(store))
    try:
        content["integrity"] = con.execute("PRAGMA integrity_check").fetchall()
    finally:
        con.close()
    # the database only (its -wal and -shm beside it come and go): no file left half made
    content["files"] = sorted(
        p.name for p in Path(store).iterdir() if not p.name.endswith(("-wal", "-shm"))
    )
    return content


def _pg_content(dsn: str) -> Callable[[str, str], dict]:
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    def content(store: str, namespace: str) -> dict:
        s = PostgresGraphStore(dsn, namespace=namespace)
        try:
            docs = s.document_ids()
            return {
                "documents": {d: s.document_hash(d) for d in docs},
                "chunks": sorted((c.doc_id, c.text) for d in docs for c in s.document_chunks(d)),
                "counts": s.counts(),
            }
        finally:
            s.close()

    return content


def _fresh_namespaces(dsn: str, points: dict) -> None:
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    for name in ["whole", *(stream_kills._name(p) for p in points)]:
        s = PostgresGraphStore(dsn, namespace=name)
        s.drop_namespace()
        s.close()


@pytest.mark.slow
def test_kill_9_then_the_same_command_on_a_folder_store(tmp_path: Path) -> None:
    runs = _kill_runs(tmp_path, "cli", str(tmp_path / "stores"), FOLDER_CLI)
    _check(tmp_path, runs, FOLDER_CLI, _folder_content)


# the Python API, and the Python API embedding ahead (each stream batch in two insert batches)
API = [("api", FOLDER_API, PG_API), ("api-ahead", FOLDER_AHEAD, PG_AHEAD)]


@pytest.mark.slow
@pytest.mark.parametrize("how, points", [(h, f) for h, f, _ in API], ids=[h for h, *_ in API])
def test_kill_9_then_the_same_insert_stream_on_a_folder_store(
    tmp_path: Path, how: str, points: dict[str, int | None]
) -> None:
    runs = _kill_runs(tmp_path, how, str(tmp_path / "stores"), points)
    _check(tmp_path, runs, points, _folder_content)


@pytest.mark.slow
def test_kill_9_then_the_same_command_on_postgres(tmp_path: Path, pg_dsn: str) -> None:
    _fresh_namespaces(pg_dsn, PG_CLI)
    runs = _kill_runs(tmp_path, "cli", pg_dsn, PG_CLI)
    _check(tmp_path, runs, PG_CLI, _pg_content(pg_dsn))
    assert not any(pg_fixture.orphans(pg_dsn).values())


@pytest.mark.slow
@pytest.mark.parametrize("how, points", [(h, p) for h, _, p in API], ids=[h for h, *_ in API])
def test_kill_9_then_the_same_insert_stream_on_postgres(
    tmp_path: Path, pg_dsn: str, how: str, points: dict[str, int | None]
) -> None:
    _fresh_namespaces(pg_dsn, points)
    runs = _kill_runs(tmp_path, how, pg_dsn, points)
    _check(tmp_path, runs, points, _pg_content(pg_dsn))
