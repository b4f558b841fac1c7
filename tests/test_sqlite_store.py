"""The embedded store is a database (issue 44): ``store="DIR"`` keeps an SQLite record in WAL
mode, each write call one transaction of the rows it changes; threads and processes write one
store without conflicts to handle; a long-lived reader sees another process's writes at its
next query; a failed write (a full disk) leaves nothing behind and its retry writes it; a
folder of the older generations format opens converted. Counted, never timed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from remindrag_integrations import ReMindRAG, ReMindRetriever
from remindrag_integrations.core.types import Document
from remindrag_integrations.errors import StoreError, StoreNotFoundError
from remindrag_integrations.stores import InMemoryGraphStore, SQLiteGraphStore, ann, sqlite_store
from remindrag_integrations.testing import HashEmbedder

DOCS = [
    Document("ferry", "The Nordwind ferry carries 120 cars between Kiel and Oslo every night."),
    Document("bikes", "Bike service at the Leeds shop takes two days; tyres are fitted at once."),
    Document("refund", "Refunds are paid within 14 days of the return to the Leeds warehouse."),
    Document("helpdesk", "The helpdesk in Oslo answers calls on weekdays from nine to five."),
]
ROOT = Path(__file__).resolve().parents[1]


def _engine(path: Path, **kw: object) -> ReMindRAG:
    return ReMindRAG(embeddings=HashEmbedder(), store=str(path), **kw)  # type: ignore[arg-type]


def _rows(path: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(path / sqlite_store.DB_FILE)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _count_statements(store: SQLiteGraphStore) -> list[str]:
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    return seen


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def test_every_write_is_committed_when_the_call_returns_and_a_new_process_sees_it(
    tmp_path: Path,
) -> None:
    engine = _engine(tmp_path / "s")
    engine.insert(DOCS)
    r = engine.retrieve("How many cars does the Nordwind ferry carry?")
    write = engine.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]])
    assert write.applied
    # no save(), no close(): another process opens the folder and finds it all
    proc = _python(
        """
        import sys
        from remindrag_integrations import ReMindRAG
        from remindrag_integrations.testing import HashEmbedder
        e = ReMindRAG(embeddings=HashEmbedder(), store=sys.argv[1])
        print(sorted(e.store.document_ids()), e.store.touched_edges())
        """,
        str(tmp_path / "s"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("]")[0] == str(sorted(d.id for d in DOCS)).rstrip("]")
    assert int(proc.stdout.split()[-1]) == engine.store.touched_edges() > 0


def test_a_memory_write_is_one_transaction_of_the_rows_it_changes(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "s")
    engine.insert(DOCS)
    store = engine.store
    assert isinstance(store, SQLiteGraphStore)
    r = engine.retrieve("How many cars does the Nordwind ferry carry?")
    seen = _count_statements(store)
    write = engine.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]])
    store._db.set_trace_callback(None)
    assert write.applied
    writes = [s for s in seen if s.startswith(("INSERT", "DELETE", "UPDATE"))]
    # the claim, the memory rows (one statement) and their change record, the trace's mark
    assert sum(s == "BEGIN IMMEDIATE" for s in seen) == sum(s == "COMMIT" for s in seen) == 3
    assert not any("INTO nodes" in s or "INTO edges" in s or "INTO chunks" in s for s in writes)
    memory_rows = _rows(tmp_path / "s", "SELECT count(*) FROM memory")[0][0]
    assert memory_rows == store.touched_edges() > 0
    last = json.loads(_rows(tmp_path / "s", "SELECT keys FROM changes ORDER BY seq DESC")[0][0])
    assert set(last) <= {"memory", "edges"} and len(last["memory"]) <= memory_rows


def test_an_insert_writes_only_its_batch(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "s")
    engine.insert(DOCS[:3])
    before = _rows(tmp_path / "s", "SELECT count(*) FROM nodes")[0][0]
    seen = _count_statements(engine.store)  # type: ignore[arg-type]
    engine.insert(DOCS[3:])
    node_inserts = [s for s in seen if "INTO nodes" in s]
    after = _rows(tmp_path / "s", "SELECT count(*) FROM nodes")[0][0]
    keys = json.loads(_rows(tmp_path / "s", "SELECT keys FROM changes ORDER BY seq DESC")[0][0])
    assert node_inserts and len(keys.get("nodes", [])) < after  # not the whole store again
    assert len(keys["documents"]) == 1 and after > before


def test_two_processes_remembering_the_same_edge_lose_no_update(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "s")
    engine.insert(DOCS)
    edge = engine.store.whole_graph()[1][0].id
    engine.close()
    code = """
        import sys
        import numpy as np
        from remindrag_integrations.stores import SQLiteGraphStore
        store = SQLiteGraphStore.open(sys.argv[1])
        for _ in range(int(sys.argv[3])):
            store.update_memory([sys.argv[2]], lambda m: m + np.float32(1.0))
        store.close()
        """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), str(tmp_path / "s"), edge, "25"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read() if p.stderr else ""
    store = SQLiteGraphStore.open(tmp_path / "s")
    assert float(store.memory([edge])[0][0]) == 100.0  # 4 processes × 25 additions, none lost


def test_a_long_lived_reader_sees_another_process_edit_and_delete_at_its_next_query(
    tmp_path: Path,
) -> None:
    worker = _engine(tmp_path / "s")
    worker.insert(DOCS)
    assert worker.retrieve("Nordwind ferry cars", k=1).chunks[0].chunk.doc_id == "ferry"
    proc = _python(
        """
        import sys
        from remindrag_integrations import ReMindRAG
        from remindrag_integrations.core.types import Document
        from remindrag_integrations.testing import HashEmbedder
        e = ReMindRAG(embeddings=HashEmbedder(), store=sys.argv[1])
        e.insert([Document("ferry", "The Nordwind ferry carries 95 cars since its refit.")])
        e.delete(["bikes"])
        """,
        str(tmp_path / "s"),
    )
    assert proc.returncode == 0, proc.stderr
    texts = [c.chunk.text for c in worker.retrieve("Nordwind ferry cars", k=4).chunks]
    assert any("95 cars" in t for t in texts) and not any("120 cars" in t for t in texts)
    assert "bikes" not in worker.store.document_ids()
    assert not any(
        "Bike service" in c.chunk.text for c in worker.retrieve("bike service", k=4).chunks
    )


def test_threads_racing_insert_and_delete_keep_every_acknowledged_write(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "s")
    engine.insert(DOCS)
    errors: list[BaseException] = []

    def insert(i: int) -> None:
        try:
            engine.insert([Document(f"extra-{i}", f"Extra note {i} about the Kiel harbour.")])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    for rnd in range(20):
        threads = [threading.Thread(target=insert, args=(rnd * 10 + i,)) for i in range(3)]
        threads.append(threading.Thread(target=engine.delete, args=([f"extra-{rnd * 10 - 9}"],)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    engine.close()
    again = _engine(tmp_path / "s")
    ids = set(again.store.document_ids())
    for rnd in range(20):
        for i in range(3):
            want = f"extra-{rnd * 10 + i}"
            deleted = any(want == f"extra-{r * 10 - 9}" for r in range(rnd, 20))
            assert (want in ids) != deleted or want == "extra-1"


def test_a_full_disk_is_a_typed_error_and_the_retry_writes_it(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "s")
    engine.insert(DOCS[:2])
    store = engine.store
    assert isinstance(store, SQLiteGraphStore)
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk full"
    big = Document(
        "manual", " ".join(f"Section {i} of the Kiel harbour manual." for i in range(400))
    )
    with pytest.raises(StoreError, match="disk is full"):
        engine.insert([big])
    assert "manual" not in store.document_ids()  # the cache holds nothing the disk lacks
    r = engine.retrieve("How many cars does the Nordwind ferry carry?")
    store._db.execute(
        f"PRAGMA max_page_count = {store._db.execute('PRAGMA page_count').fetchone()[0]}"
    )
    with pytest.raises(StoreError, match="disk is full"):
        for _ in range(50):  # memory rows of a few edges, until the pages run out
            store.update_memory([e.id for e in store.whole_graph()[1]], lambda m: m + 1)
    store._db.execute("PRAGMA max_page_count = 1073741823")  # space again
    report = engine.insert([big])  # the same call again: written, not "skipped"
    assert report.documents == 1 and "manual" in store.document_ids()
    write = engine.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]])
    assert write.applied  # not "already memorized"
    assert "manual" in _engine(tmp_path / "s").store.document_ids()


def test_a_failed_memory_write_is_retried_by_the_same_call(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "s")
    engine.insert(DOCS)
    store = engine.store
    assert isinstance(store, SQLiteGraphStore)
    r = engine.retrieve("How many cars does the Nordwind ferry carry?")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    failed = 0
    try:
        engine.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]])
    except StoreError:
        failed = 1
    store._db.execute("PRAGMA max_page_count = 1073741823")
    if failed:
        assert store.touched_edges() == 0
        write = engine.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]])
        assert write.applied
    assert _rows(tmp_path / "s", "SELECT count(*) FROM memory")[0][0] == store.touched_edges() > 0


def test_load_opens_the_live_store_and_copy_is_the_one_that_forgets(tmp_path: Path) -> None:
    _engine(tmp_path / "s").insert(DOCS)
    live = ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder())
    r = live.retrieve("Nordwind ferry")
    assert live.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]]).applied
    copy = live.copy()
    assert isinstance(copy.store, InMemoryGraphStore)
    assert not isinstance(copy.store, SQLiteGraphStore)
    copy.delete(["ferry"])
    reopened = ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder())
    assert "ferry" in reopened.store.document_ids()
    assert reopened.store.touched_edges() == live.store.touched_edges() > 0
    with pytest.raises(StoreNotFoundError):
        ReMindRAG.load(tmp_path / "nothing-here")


def test_the_retriever_settings_are_kept_with_the_store(tmp_path: Path) -> None:
    where = str(tmp_path / "s")
    docs = [
        Document(d.id, d.text, {"team": "ops" if d.id != "refund" else "finance"}) for d in DOCS
    ]
    first = ReMindRetriever.from_documents(
        docs, embeddings=HashEmbedder(), store=where, filter={"team": "ops"}, score_threshold=0.0
    )
    assert first.filter == {"team": {"$eq": "ops"}}
    again = ReMindRetriever.from_documents(embeddings=HashEmbedder(), store=where)
    assert again.filter == first.filter and again.score_threshold == 0.0
    found = again.invoke("When are refunds paid?")
    assert all(d.metadata.get("team") == "ops" for d in found)
    loaded = ReMindRetriever.load(where, embeddings=HashEmbedder())
    assert loaded.filter == first.filter
    assert ReMindRetriever.load(where, embeddings=HashEmbedder(), filter=None).filter is None


def test_a_store_of_the_generations_format_opens_converted(tmp_path: Path) -> None:
    old = tmp_path / "old"
    import shutil

    shutil.copytree(Path(__file__).parent / "data" / "format2_store", old)
    engine = ReMindRAG(store=str(old))  # the packaged embedder it was built with
    assert sqlite_store.holds_database(old) and (old / sqlite_store.BACKUP / "CURRENT").exists()
    assert len(engine.store.document_ids()) > 0 and engine.store.touched_edges() > 0
    assert engine.retrieve("Leeds warehouse refunds").chunks
    again = ReMindRAG(store=str(old))  # converted once
    assert again.store.counts() == engine.store.counts()


def test_many_writers_and_a_reader_in_processes(tmp_path: Path) -> None:
    """4 worker processes × 10 (retrieve, memorize) and one inserting and deleting."""
    engine = _engine(tmp_path / "s")
    engine.insert(DOCS)
    engine.close()
    worker = """
        import sys
        from remindrag_integrations import ReMindRAG
        from remindrag_integrations.testing import HashEmbedder
        e = ReMindRAG(embeddings=HashEmbedder(), store=sys.argv[1])
        ok = 0
        for i in range(10):
            r = e.retrieve(["Nordwind ferry cars", "Leeds refunds", "helpdesk hours"][i % 3])
            ok += e.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]]).applied
        print(ok)
        """
    writer = """
        import sys
        from remindrag_integrations import ReMindRAG
        from remindrag_integrations.core.types import Document
        from remindrag_integrations.testing import HashEmbedder
        e = ReMindRAG(embeddings=HashEmbedder(), store=sys.argv[1])
        for i in range(10):
            e.insert([Document(f"note-{i}", f"Note {i}: the Kiel harbour opens at {i} am.")])
            if i % 2:
                e.delete([f"note-{i - 1}"])
        print(0)
        """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), str(tmp_path / "s")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for code in [worker] * 4 + [writer]
    ]
    applied = 0
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        applied += int(out.strip())
    assert applied == 40
    marked = _rows(
        tmp_path / "s", "SELECT count(*) FROM traces WHERE json_extract(body, '$.memorized')"
    )
    assert marked[0][0] == 40  # every acknowledged memory write is on disk with its trace
    ids = set(_engine(tmp_path / "s").store.document_ids())
    assert {f"note-{i}" for i in range(1, 10, 2)} <= ids and "note-0" not in ids
    assert np.isfinite(_engine(tmp_path / "s").store.memory(["x"])).all()


@pytest.mark.skipif(not ann.available(), reason="extra 'ann' (usearch) not installed")
def test_built_ann_indexes_are_kept_and_adopted_by_the_next_open(tmp_path: Path) -> None:
    # (usearch is never imported here: stores/ann.py imports onnxruntime first, as it must)
    store = SQLiteGraphStore.open(tmp_path / "s", ann=True)
    engine = ReMindRAG(embeddings=HashEmbedder(), store=store)
    engine.insert(DOCS)
    engine.retrieve("Nordwind ferry")  # builds the indexes the search needs
    built = set(store._vectors._ann)
    assert built
    store.close()
    assert {r[0] for r in _rows(tmp_path / "s", "SELECT kind FROM ann")} == built
    again = SQLiteGraphStore.open(tmp_path / "s", ann=True)
    assert set(again._vectors._ann) == built  # adopted at open, before any search
    again.delete_documents(["bikes"])  # a write: the kept ones no longer match
    again.close()
    third = SQLiteGraphStore.open(tmp_path / "s", ann=True)
    assert "bikes" not in third.document_ids()
    assert (
        not third._vectors._ann
        or _rows(tmp_path / "s", "SELECT max(seq) FROM ann")[0][0]
        == (_rows(tmp_path / "s", "SELECT max(seq) FROM changes")[0][0])
    )


def test_a_damaged_database_is_a_typed_error_never_an_empty_store(tmp_path: Path) -> None:
    _engine(tmp_path / "s").insert(DOCS)
    db = tmp_path / "s" / sqlite_store.DB_FILE
    data = bytearray(db.read_bytes())
    data[:16] = b"not a database!!"  # the header
    db.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        (tmp_path / "s" / f"{sqlite_store.DB_FILE}{suffix}").unlink(missing_ok=True)
    from remindrag_integrations.errors import StoreCorruptError

    with pytest.raises(StoreCorruptError, match="damaged"):
        _engine(tmp_path / "s")
    with pytest.raises(StoreCorruptError):
        ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder())


def test_inspect_says_which_format_the_store_is_in(tmp_path: Path) -> None:
    import shutil

    from conftest import run_cli

    old = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "format2_store", old)
    (tmp_path / "a.txt").write_text(DOCS[0].text)
    run_cli("index", str(tmp_path / "a.txt"), "--store", str(tmp_path / "new"), cwd=tmp_path)
    new = run_cli("inspect", "--store", str(tmp_path / "new"), cwd=tmp_path).stdout
    assert "format: SQLite database" in new and "converted" not in new
    converted = run_cli("inspect", "--store", str(old), cwd=tmp_path).stdout
    assert "format: SQLite database" in converted and "converted from the generations" in converted


_KILLED = """
import json, os, random, sys
from remindrag_integrations import ReMindRAG
from remindrag_integrations.core.types import Document
from remindrag_integrations.testing import HashEmbedder
e = ReMindRAG(embeddings=HashEmbedder(), store=sys.argv[1])
log = open(sys.argv[2], "a")
rng = random.Random(int(sys.argv[3]))
def note(*entry):  # "try" before a write, "ack" once it returned
    log.write(json.dumps(entry) + "\\n"); log.flush(); os.fsync(log.fileno())
print("ready", flush=True)
i = int(sys.argv[3]) * 1000
while True:
    i += 1
    op = rng.random()
    if op < 0.45:
        note("insert", f"k-{i}", "try")
        e.insert([Document(f"k-{i}", f"Kill note {i}: ferry {i % 7} leaves Kiel at {i % 12}.")])
        note("insert", f"k-{i}", "ack")
    elif op < 0.85:
        r = e.retrieve("ferry leaves Kiel")
        if e.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]]).applied:
            note("memorize", r.trace.trace_id, "ack")
    else:
        ids = sorted(d for d in e.store.document_ids() if d.startswith("k-"))
        if ids:
            doc = ids[rng.randrange(len(ids))]
            note("delete", doc, "try")
            e.delete([doc])
            note("delete", doc, "ack")
"""


def test_kill_9_at_random_moments_loses_no_acknowledged_write_and_half_applies_none(
    tmp_path: Path,
) -> None:
    import random
    import signal
    import time

    engine = _engine(tmp_path / "s")
    engine.insert(DOCS)
    engine.close()
    log = tmp_path / "acks.jsonl"
    log.touch()
    rng = random.Random(44)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for n in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED, str(tmp_path / "s"), str(log), str(n + 1)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 1.0))  # somewhere in its writes
        child.send_signal(signal.SIGKILL)
        child.wait()
        again = _engine(tmp_path / "s")  # always opens
        ids = set(again.store.document_ids())
        entries = [json.loads(line) for line in log.read_text().splitlines()]
        acks = [(kind, k) for kind, k, state in entries if state == "ack"]
        present = {  # the last word on each document; None: the kill cut it (either is right)
            k: (kind == "insert") if state == "ack" else None
            for kind, k, state in entries
            if kind != "memorize"
        }
        assert all((k in ids) == there for k, there in present.items() if there is not None)
        marked = {
            r[0]
            for r in _rows(
                tmp_path / "s", "SELECT id FROM traces WHERE json_extract(body, '$.memorized')"
            )
        }
        assert all(k in marked for kind, k in acks if kind == "memorize")
        for name, sql in {
            "chunk without document": "SELECT count(*) FROM chunks WHERE doc_id NOT IN "
            "(SELECT id FROM documents)",
            "edge without an end": "SELECT count(*) FROM edges WHERE u NOT IN "
            "(SELECT id FROM nodes) OR v NOT IN (SELECT id FROM nodes)",
            "memory without edge": "SELECT count(*) FROM memory WHERE edge_id NOT IN "
            "(SELECT id FROM edges)",
        }.items():
            assert _rows(tmp_path / "s", sql)[0][0] == 0, name
        assert again.store.counts() == SQLiteGraphStore.open(tmp_path / "s").counts()
        again.close()
    assert len(log.read_text().splitlines()) > 0  # the kills came while it was writing


def test_a_store_db_that_is_a_link_empty_or_holds_a_damaged_row_is_a_typed_error(
    tmp_path: Path,
) -> None:
    from remindrag_integrations.errors import StoreCorruptError

    _engine(tmp_path / "other").insert(DOCS)
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / sqlite_store.DB_FILE).symlink_to(tmp_path / "other" / "store.db")
    (tmp_path / "dangling").mkdir()
    (tmp_path / "dangling" / sqlite_store.DB_FILE).symlink_to(tmp_path / "nowhere.db")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / sqlite_store.DB_FILE).write_bytes(b"")
    for name in ("linked", "dangling", "empty"):
        with pytest.raises(StoreCorruptError, match="not a store database"):
            ReMindRAG.load(tmp_path / name, embeddings=HashEmbedder())
    assert not (tmp_path / "nowhere.db").exists()  # nothing made through the link
    engine = _engine(tmp_path / "other")
    r = engine.retrieve("Nordwind ferry")
    engine.store.flush()  # type: ignore[attr-defined]
    con = sqlite3.connect(tmp_path / "other" / sqlite_store.DB_FILE)
    con.execute("UPDATE traces SET body = substr(body, 1, 40)")
    con.commit()
    con.close()
    with pytest.raises(StoreCorruptError, match="trace"):
        _engine(tmp_path / "other").trace(r.trace.trace_id)
