"""Issue 35, "a big corpus streams in": ``insert_stream`` reads its documents lazily, one batch at
a time, commits each batch before reading the next, reports progress with a rate and an ETA,
and continues where it stopped when run again; a JSONL file is read a line at a time and a
bad line or a missing file is a typed error that loses nothing committed. The kills are in
tests/test_stream_kills.py."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from remindrag_integrations import (
    Document,
    JsonlDocuments,
    ReMindRAG,
    StreamProgress,
)
from remindrag_integrations.errors import (
    InvalidArgumentError,
    InvalidDocumentError,
    JsonlLineError,
    SourceNotFoundError,
)
from remindrag_integrations.stores import SQLiteGraphStore
from remindrag_integrations.stores.sqlite_store import db_path
from remindrag_integrations.testing import HashEmbedder

CITIES = ["Leeds", "York", "Bath", "Derby", "Ely", "Wells", "Ripon", "Truro", "Exeter", "Hull"]


def rows(n: int) -> list[dict]:
    return [
        {
            "id": f"p{i}",
            "title": f"{CITIES[i % 10]} {i}",
            "text": f"{CITIES[i % 10]} {i} lies near {CITIES[(i + 3) % 10]}; "
            f"its market opens on day {i}.",
        }
        for i in range(n)
    ]


def stored(where: Path) -> dict[str, Any]:
    """What a new process opening the store finds: its documents (id: hash) and counts."""
    store = SQLiteGraphStore.load(where)
    try:
        ids = store.document_ids()
        return {"ids": {d: store.document_hash(d) for d in ids}, "counts": store.counts()}
    finally:
        store.close()


def write_jsonl(path: Path, items: list, bad: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(r) for r in items]
    for n, text in (bad or {}).items():
        lines[n - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_jsonl_file_is_read_a_line_at_a_time_and_counted_without_parsing(
    tmp_path: Path,
) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", rows(3))
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n   \n" + json.dumps({"title": "Hull", "text": "No id here."}) + "\n")
    docs = JsonlDocuments(path)
    assert len(docs) == 4  # blank lines are no documents
    got = list(docs)
    assert [d.id for d in got] == ["p0", "p1", "p2", f"{path.resolve()}:6"]
    assert got[0].text == rows(1)[0]["text"] and got[0].metadata["title"] == "Leeds 0"
    assert got[3].text == "Hull\nNo id here." and got[3].metadata["title"] == "Hull"
    assert got[0].metadata["source"] == str(path.resolve())
    assert [d.id for d in docs] == [d.id for d in got]  # iterated again: read again
    it = iter(JsonlDocuments(path))
    assert next(it).id == "p0"  # a generator: nothing read past what was asked for


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"id": "x", "text": "unclosed', "not JSON"),
        ('["a list"]', "a JSON list, not an object"),
        ('{"id": "x"}', "no 'text'"),
        ('{"id": "x", "text": 3}', "'text' is a int"),
        ('{"id": ["x"], "text": "t"}', "'id' is a list"),
    ],
)
def test_a_bad_line_names_its_file_and_line_and_what_to_fix(
    tmp_path: Path, line: str, says: str
) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", rows(5), bad={4: line})
    with pytest.raises(JsonlLineError) as err:
        list(JsonlDocuments(path))
    assert err.value.line == 4 and err.value.path == str(path)
    assert f"c.jsonl:4: {says}" in str(err.value) and "fix or remove that line" in str(err.value)
    assert isinstance(err.value, InvalidDocumentError)  # the top level's error catches it


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", rows(2))
    with open(path, "ab") as f:
        f.write(b'{"text": "caf\xe9"}\n')
    with pytest.raises(JsonlLineError, match=r"c.jsonl:3: not UTF-8"):
        list(JsonlDocuments(path))


def test_a_missing_file_is_a_typed_error_at_once(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match="no such file: .*nope.jsonl"):
        JsonlDocuments(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError):  # what it also is
        JsonlDocuments(tmp_path / "nope.jsonl")
    with pytest.raises(InvalidArgumentError, match="is a folder"):
        JsonlDocuments(tmp_path)
    eng = ReMindRAG(embeddings=HashEmbedder())
    with pytest.raises(InvalidArgumentError, match="JsonlDocuments"):
        eng.insert_stream(str(tmp_path / "c.jsonl"))  # type: ignore[arg-type]


def test_each_batch_is_committed_before_the_next_is_read(tmp_path: Path) -> None:
    where = tmp_path / "kb"
    eng = ReMindRAG(embeddings=HashEmbedder(), store=where)
    pulled: list[int] = []
    seen: list[tuple[int, list[str]]] = []

    def documents() -> Iterator[Document]:
        for i, r in enumerate(rows(25)):
            pulled.append(i)
            yield Document(r["id"], r["text"])

    def committed(report: object) -> None:  # what a new process would find now
        seen.append((len(pulled), list(stored(where)["ids"])))

    report = eng.insert_stream(documents(), batch_documents=10, on_batch=committed)
    assert report.documents == 25 and report.chunks == 25
    # memory holds one batch: the 11th document is read only after the first ten are committed
    assert [n for n, _ in seen] == [10, 20, 25]
    assert [len(ids) for _, ids in seen] == [10, 20, 25]


def test_progress_says_done_of_total_the_rate_and_an_eta(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", rows(30))
    eng = ReMindRAG(embeddings=HashEmbedder())
    got: list[StreamProgress] = []
    eng.insert_stream(JsonlDocuments(path), batch_documents=8, progress=got.append)
    assert [p.documents for p in got] == [8, 16, 24, 30]
    assert {p.total for p in got} == {30}  # len() of the file: its lines
    assert [p.batches for p in got] == [1, 2, 3, 4]
    assert got[-1].written == 30 and got[-1].chunks == 30 and got[-1].eta == 0
    assert all(p.eta is not None and p.eta >= 0 and p.chunks_per_second > 0 for p in got)
    line = str(got[1])
    assert line.startswith("16/30 documents (53.3 %): 16 written, 0 unchanged; 16 chunks in ")
    assert "chunks/s; ETA " in line
    # a generator has no length: no total, no ETA, unless given
    gen = (Document(r["id"], r["text"]) for r in rows(5))
    unknown: list[StreamProgress] = []
    ReMindRAG(embeddings=HashEmbedder()).insert_stream(gen, progress=unknown.append)
    assert unknown[-1].total is None and unknown[-1].eta is None
    assert str(unknown[-1]).startswith("5 documents: 5 written")
    told: list[StreamProgress] = []
    gen = (Document(r["id"], r["text"]) for r in rows(5))
    ReMindRAG(embeddings=HashEmbedder()).insert_stream(
        gen, total=10, batch_documents=5, progress=told.append
    )
    assert told[-1].total == 10 and told[-1].eta is not None and told[-1].eta > 0


def test_progress_true_prints_the_lines_on_stderr(capsys: pytest.CaptureFixture) -> None:
    docs = [Document(r["id"], r["text"]) for r in rows(4)]
    ReMindRAG(embeddings=HashEmbedder()).insert_stream(docs, batch_documents=2, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[1].startswith("4/4 documents (100.0 %)")


def test_run_again_it_skips_what_is_committed_and_goes_on(tmp_path: Path) -> None:
    """An interrupted stream (here a bad line) keeps every document before it; fixed and run
    again, it writes only the rest, and the store equals one run never interrupted."""
    where = tmp_path / "kb"
    items = rows(25)
    path = write_jsonl(tmp_path / "c.jsonl", items, bad={18: '{"id": "p17"}'})
    with pytest.raises(JsonlLineError, match="c.jsonl:18"):
        ReMindRAG(embeddings=HashEmbedder(), store=where).insert_stream(
            JsonlDocuments(path), batch_documents=10
        )
    # the batch of the bad line is committed up to it: nothing read is lost
    assert sorted(stored(where)["ids"]) == sorted(r["id"] for r in items[:17])
    write_jsonl(path, items)  # fixed
    got: list[StreamProgress] = []
    again = ReMindRAG(embeddings=HashEmbedder(), store=where)
    report = again.insert_stream(JsonlDocuments(path), batch_documents=10, progress=got.append)
    assert (report.documents, report.skipped_documents) == (8, 17)
    assert [(p.written, p.unchanged) for p in got] == [(0, 10), (3, 17), (8, 17)]
    whole = ReMindRAG(embeddings=HashEmbedder(), store=tmp_path / "whole")
    whole.insert_stream(JsonlDocuments(path), batch_documents=10)
    assert stored(where) == stored(tmp_path / "whole")


def test_wrong_arguments_are_refused_before_anything_is_read() -> None:
    eng = ReMindRAG(embeddings=HashEmbedder())
    docs = [Document("a", "Leeds lies in Yorkshire.")]
    for bad in (0, -1, 2.5, True, "10"):
        with pytest.raises(InvalidArgumentError, match="batch_documents"):
            eng.insert_stream(docs, batch_documents=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="total"):
        eng.insert_stream(docs, total=-1)
    with pytest.raises(InvalidArgumentError, match="progress"):
        eng.insert_stream(docs, progress="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="on_batch"):
        eng.insert_stream(docs, on_batch=3)
    assert not eng.store.document_ids()


# --- the command line ------------------------------------------------------------------------


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, check=False)


def dump(store: Path) -> list[str]:
    """Every row of the store's database, as SQL."""
    con = sqlite3.connect(db_path(store))
    try:
        return list(con.iterdump())
    finally:
        con.close()


def test_the_command_line_streams_a_jsonl_file_and_says_where_it_stands(tmp_path: Path) -> None:
    items = rows(12)
    path = write_jsonl(tmp_path / "c.jsonl", items, bad={9: '{"id": "p8", "text": 8}'})
    store = tmp_path / "kb"
    first = cli("index", str(path), "--store", str(store), "--batch-size", "5", cwd=tmp_path)
    # every line is checked before anything is written: nothing was indexed, nothing lost
    assert first.returncode == 2 and "Traceback" not in first.stderr
    assert "c.jsonl:9: 'text' is a int" in first.stderr and "fix or remove" in first.stderr
    assert not SQLiteGraphStore.exists(store)
    write_jsonl(path, items[:7])  # the first seven, then all twelve: the second run goes on
    cli("index", str(path), "--store", str(store), "--batch-size", "5", cwd=tmp_path)
    write_jsonl(path, items)
    out = cli("index", str(path), "--store", str(store), "--batch-size", "5", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "to index: 5 documents (7 unchanged), 5 chunks, in batches of 5 documents" in lines
    progress = [ln for ln in lines if ln.startswith("committed ")]
    assert [p.split(":")[0] for p in progress] == [
        "committed 5/12 documents (41.7 %)",
        "committed 10/12 documents (83.3 %)",
        "committed 12/12 documents (100.0 %)",
    ]
    assert progress[0].split(": ")[1].startswith("0 written, 5 unchanged")
    assert "chunks/s; ETA " in progress[1]
    assert "indexed 5 documents, 5 chunks" in out.stdout
    assert sorted(stored(store)["ids"]) == sorted(r["id"] for r in items)
    rows_before = dump(store)
    same = cli("index", str(path), "--store", str(store), cwd=tmp_path)
    assert "to index: 0 documents (12 unchanged)" in same.stdout
    assert dump(store) == rows_before  # nothing new: not a row of the store written
    missing = cli("index", str(tmp_path / "nope.jsonl"), "--store", str(store), cwd=tmp_path)
    assert missing.returncode == 2 and "no such file or folder: " in missing.stderr
    assert "Traceback" not in missing.stderr
