"""The fast part of the fault suite: concurrent savers, two writers on one directory, failed
updates, damaged files, hostile LLM replies, hung LLM calls, readers during updates. The long part
is ``benchmarks/faults.py``. An engine's folder is an SQLite database; the generations format
(``InMemoryGraphStore.save``, the previous release's) is tested at the store level and through
its one-time conversion."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from remindrag_integrations import Document, ReMindError, ReMindRAG
from remindrag_integrations.adapters import embedder_record
from remindrag_integrations.core import persist
from remindrag_integrations.core.config import IndexConfig, RetrievalConfig
from remindrag_integrations.core.prompts import extract_json, parse_extraction
from remindrag_integrations.errors import (
    EmbeddingError,
    LLMOutputError,
    StoreConflictError,
    StoreCorruptError,
    StoreLockedError,
)
from remindrag_integrations.stores import InMemoryGraphStore, open_store, sqlite_store
from remindrag_integrations.testing import HashEmbedder, ScriptedLLM

TEXTS = [
    ("d1", "Scott Derrickson is an American director. He directed Sinister in Los Angeles."),
    ("d2", "Ed Wood was an American filmmaker. Conrad Brooks acted in films by Ed Wood."),
    ("d3", "Sinister is a horror film. Ethan Hawke starred in Sinister."),
]


def _engine(store: object = None, **kw: object) -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder(64), store=store, **kw)  # type: ignore[arg-type]
    if not eng.store.document_ids():
        eng.insert([Document(i, t) for i, t in TEXTS])
    return eng


def _old_save(eng: ReMindRAG, root: Path) -> Path:
    """What the previous release's ``eng.save(root)`` wrote: a generation and engine.json."""
    used = embedder_record.record(eng.embedder, eng.store.dim, None)
    return persist.save(eng.store, eng.index_config, eng.retrieval_config, root, used)


def _memorize_one(eng: ReMindRAG, query: str) -> None:
    r = eng.retrieve(query, navigator={"min_similarity": -1.0})
    assert eng.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks]).applied


# --- saving -------------------------------------------------------------------------------


def test_concurrent_saves_of_one_engine_always_leave_a_loadable_store(tmp_path: Path) -> None:
    """Two threads save one in-memory engine to one folder, again and again: every save
    succeeds (the engine's own other save is not another writer) and the folder loads."""
    eng, root = _engine(), tmp_path / "s"
    for _ in range(15):
        errors: list[BaseException] = []

        def save(errors: list[BaseException] = errors) -> None:
            try:
                eng.save(root)
            except BaseException as exc:  # noqa: BLE001 - collected and asserted on
                errors.append(exc)

        threads = [threading.Thread(target=save) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert ReMindRAG.load(root, embeddings=HashEmbedder(64)).store.counts() == (
            eng.store.counts()
        )
    assert sqlite_store.holds_database(root) and not list(root.glob(".*.tmp"))


def test_a_save_over_another_writers_save_is_refused_not_lost(tmp_path: Path) -> None:
    """An in-memory engine saved to a folder, then a live engine there memorizes: the first
    one's next save there is a StoreConflictError (it would replace that write), the folder
    keeps the live write, and the user who opens it live and writes again keeps both."""
    copy = _engine()
    root = copy.save(tmp_path / "s")
    live = ReMindRAG.load(root, embeddings=HashEmbedder(64))  # live: its writes land there
    _memorize_one(live, "Who acted in films by Ed Wood?")
    theirs = live.store.export_memory()
    _memorize_one(copy, "Who directed Sinister?")
    with pytest.raises(StoreConflictError):
        copy.save(root)
    assert ReMindRAG.load(root, embeddings=HashEmbedder(64)).store.export_memory() == theirs
    again = ReMindRAG.load(root, embeddings=HashEmbedder(64))
    _memorize_one(again, "Who directed Sinister?")
    both = ReMindRAG.load(root, embeddings=HashEmbedder(64)).store.export_memory()
    assert set(theirs) < set(both) and set(copy.store.export_memory()) <= set(both)


def test_two_engines_on_one_store_folder_keep_both_writes(tmp_path: Path) -> None:
    """store=PATH writes each call in one transaction: two engines on one folder both write,
    neither write is lost, and each engine sees the other's at its next read."""
    root = _engine().save(tmp_path / "s")
    a = ReMindRAG(embeddings=HashEmbedder(64), store=str(root))
    b = ReMindRAG(embeddings=HashEmbedder(64), store=str(root))
    _memorize_one(a, "Who directed Sinister?")
    mine = a.store.export_memory()
    assert mine and b.store.export_memory() == mine  # b sees a's write
    _memorize_one(b, "Who acted in films by Ed Wood?")  # over a's write: no error
    both = ReMindRAG.load(root, embeddings=HashEmbedder(64)).store.export_memory()
    assert set(mine) < set(both)
    assert a.store.export_memory() == b.store.export_memory() == both


def test_a_second_writer_gets_a_typed_error_or_waits(tmp_path: Path) -> None:
    root = tmp_path / "s"
    first = InMemoryGraphStore.open(root)
    with pytest.raises(StoreLockedError):
        InMemoryGraphStore.open(root)
    with pytest.raises(StoreLockedError):  # its conversion takes the folder's lock too
        open_store(str(root), lock_wait=0.05)
    threading.Timer(0.2, first.close).start()
    second = InMemoryGraphStore.open(root, wait=10)  # waits until the first one closes
    second.close()


def test_stale_temp_folders_are_cleaned_and_the_current_generation_kept(tmp_path: Path) -> None:
    store = _engine().store
    root = store.save(tmp_path / "s")  # type: ignore[attr-defined]
    (root / ".gen-deadbeef.tmp").mkdir()  # left by a writer killed mid-save
    before = (root / "CURRENT").read_text().split()[0]
    store.save(root)  # type: ignore[attr-defined]
    assert not (root / ".gen-deadbeef.tmp").exists()
    assert (root / before).exists()  # the previous generation stays for its readers


def test_loads_during_saves_always_see_a_complete_generation(tmp_path: Path) -> None:
    store = _engine().store
    root = store.save(tmp_path / "s")  # type: ignore[attr-defined]
    want, stop = store.counts(), threading.Event()

    def save() -> None:
        while not stop.is_set():
            store.save(root)  # type: ignore[attr-defined]

    saver = threading.Thread(target=save)
    saver.start()
    try:
        for _ in range(60):
            assert InMemoryGraphStore.load(root).counts() == want
    finally:
        stop.set()
        saver.join()


def test_the_cli_takes_turns_on_a_locked_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another process holds the store's database for writing: a CLI write waits for it, and
    one that would wait longer than its lock_wait exits 2 saying so, having written nothing."""
    from remindrag_integrations.app.cli import main
    from remindrag_integrations.stores import SQLiteGraphStore

    for name, (_, text) in zip(("a", "b", "c"), TEXTS, strict=True):
        (tmp_path / f"{name}.txt").write_text(text)
    store = tmp_path / "store"
    assert main(["index", str(tmp_path / "a.txt"), "--store", str(store)]) == 0
    other = sqlite3.connect(
        store / sqlite_store.DB_FILE, isolation_level=None, check_same_thread=False
    )
    other.execute("BEGIN IMMEDIATE")  # another writer, in the middle of its write
    real = SQLiteGraphStore.open.__func__  # type: ignore[attr-defined]

    def impatient(cls: type, directory: object, *args: object, **kw: object) -> object:
        return real(cls, directory, *args, **{**kw, "lock_wait": 0.2})

    with monkeypatch.context() as m:
        m.setattr(SQLiteGraphStore, "open", classmethod(impatient))
        assert main(["index", str(tmp_path / "b.txt"), "--store", str(store)]) == 2
    assert "another writer" in capsys.readouterr().err
    threading.Timer(0.5, other.execute, ("COMMIT",)).start()  # the other writer finishes
    assert main(["index", str(tmp_path / "c.txt"), "--store", str(store)]) == 0  # waits
    other.close()
    written = open_store(str(store))
    assert sorted(Path(d).name for d in written.document_ids()) == ["a.txt", "c.txt"]
    written.close()  # type: ignore[attr-defined]


def test_a_directory_with_damaged_data_is_never_taken_for_empty(tmp_path: Path) -> None:
    """A folder of the older format without its CURRENT, a store.db damaged: opening either
    is a StoreCorruptError, never an empty store, and nothing there is overwritten."""
    old = _old_save(_engine(), tmp_path / "old")
    (old / "CURRENT").unlink()
    with pytest.raises(StoreCorruptError):
        ReMindRAG(embeddings=HashEmbedder(64), store=str(old))
    with pytest.raises(StoreCorruptError):
        open_store(str(old))
    assert list(old.glob("gen-*")) and not sqlite_store.holds_database(old)
    eng = _engine(str(tmp_path / "s"))
    eng.close()
    db = tmp_path / "s" / sqlite_store.DB_FILE
    data = db.read_bytes()
    cut = data[:4096] + bytes(len(data) - 4096)  # every page after the first zeroed
    for damaged in (b"\x00" * 100 + data[100:], cut, data[: len(data) // 2]):
        db.write_bytes(damaged)
        with pytest.raises(StoreCorruptError):
            ReMindRAG(embeddings=HashEmbedder(64), store=str(tmp_path / "s"))
        with pytest.raises(StoreCorruptError):
            ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder(64))
        with pytest.raises(StoreCorruptError):
            open_store(str(tmp_path / "s"))
        assert db.read_bytes() == damaged  # nothing was overwritten


def _flip(path: Path, i: int) -> bytes:
    data = path.read_bytes()
    path.write_bytes(data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1 :])
    return data


def _read_old(root: Path, name: str) -> object:
    """What the conversion of a folder of the older format reads of ``name``: the store
    (CURRENT, manifest.json) or the engine's configuration (engine.json)."""
    if name == "engine.json":
        cfg = persist.read_checked_json(root / name)
        return persist.config_of(cfg, root), persist.embedder_of(cfg)
    return InMemoryGraphStore.load(root)


@pytest.mark.parametrize("name", ["CURRENT", "manifest.json", "engine.json"])
def test_every_byte_of_the_small_files_is_covered(tmp_path: Path, name: str) -> None:
    """A folder of the older format with any one bit of its small files flipped is refused
    with StoreCorruptError by the reader its conversion uses, and by the conversion
    (``ReMindRAG.load``), which converts nothing; or it opens the very same store and
    configuration."""
    eng = _engine()
    root = _old_save(eng, tmp_path / "s")
    gen = root / (root / "CURRENT").read_text().split()[0]
    path = root / name if name != "manifest.json" else gen / name
    want = (eng.store.counts(), eng.store.namespace, eng.index_config, eng.retrieval_config)
    refused = 0
    for i in range(path.stat().st_size):
        data = _flip(path, i)
        try:
            _read_old(root, name)
        except StoreCorruptError:
            refused += 1
            if refused == 1:  # the conversion reads it the same way
                with pytest.raises(StoreCorruptError):
                    ReMindRAG.load(root, embeddings=HashEmbedder(64))
                assert not sqlite_store.holds_database(root), f"byte {i} of {name}: converted"
        else:  # taken: the conversion of this folder opens the same store and config
            work = tmp_path / "work"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(root, work)
            got = ReMindRAG.load(work, embeddings=HashEmbedder(64))
            loaded = (got.store.counts(), got.store.namespace, got.index_config)
            assert (*loaded, got.retrieval_config) == want, f"byte {i} of {name}: wrong data"
            got.close()
        path.write_bytes(data)
    assert refused > path.stat().st_size // 2  # the checks ran: most flips are refused


def test_a_damaged_checksum_key_is_a_store_error(tmp_path: Path) -> None:
    root = _engine().store.save(tmp_path / "s")  # type: ignore[attr-defined]
    gen = root / (root / "CURRENT").read_text().split()[0]
    manifest = gen / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"sha256"', '"sha257"'))
    with pytest.raises(StoreCorruptError):
        InMemoryGraphStore.load(root)
    with pytest.raises(StoreCorruptError):
        ReMindRAG.load(root, embeddings=HashEmbedder(64))


# --- updates ------------------------------------------------------------------------------


class _FailingEmbedder(HashEmbedder):
    fail = False

    def embed(self, texts):  # type: ignore[no-untyped-def]
        if self.fail:
            raise RuntimeError("embedding service down")
        return super().embed(texts)


def test_a_failed_update_keeps_the_old_version_and_its_memory() -> None:
    emb = _FailingEmbedder(64)
    eng = ReMindRAG(embeddings=emb)
    eng.insert([Document(i, t) for i, t in TEXTS])
    _memorize_one(eng, "Who directed Sinister?")
    before = (eng.store.counts(), eng.store.export_memory(), eng.store.document_hash("d1"))
    emb.fail = True
    with pytest.raises(EmbeddingError, match="embedding service down"):  # typed, cause named
        eng.insert([Document("d1", "Scott Derrickson directed Doctor Strange in 2016.")])
    assert (eng.store.counts(), eng.store.export_memory(), eng.store.document_hash("d1")) == before


def test_an_update_keeps_entities_the_new_version_still_mentions() -> None:
    eng = _engine()
    eng.insert(
        [Document("d1", "Scott Derrickson directed Doctor Strange. He lives in Los Angeles.")]
    )
    names = {n.name for n in eng.store.get_nodes(_entities(eng))}
    assert {"Scott Derrickson", "Doctor Strange"} <= names
    r = eng.retrieve("Who directed Doctor Strange?", navigator={"min_similarity": -1.0})
    assert any("Doctor Strange" in c.chunk.text for c in r.chunks)


def _entities(eng: ReMindRAG) -> list[str]:
    q = np.ones(eng.store.dim or 1, dtype=np.float32)
    return [n for n, _ in eng.store.search(q, 10_000, ("entity",))]


# --- memorize exactly once ----------------------------------------------------------------


def test_a_trace_is_memorized_once_under_threads_and_asyncio() -> None:
    eng = _engine()
    r = eng.retrieve("Who directed Sinister?", navigator={"min_similarity": -1.0})
    sup = [c.chunk.id for c in r.chunks]
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(eng.memorize(r.trace_id, supporting=sup)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(w.applied for w in results) == 1
    r2 = eng.retrieve("Who acted in films by Ed Wood?", navigator={"min_similarity": -1.0})

    async def many() -> list:
        answer = "Conrad Brooks."  # grounded in d2: the write applies, once
        return await asyncio.gather(*(eng.amemorize(r2.trace_id, answer) for _ in range(10)))

    assert sum(w.applied for w in asyncio.run(many())) == 1


# --- hostile LLM replies and hung calls -----------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    ["[" * 1000, '{"a":' * 1000, '{"title": NaN, "entities": [Infinity]}', "x" * 1_000_000],
)
def test_hostile_replies_are_output_errors(reply: str) -> None:
    with pytest.raises(LLMOutputError):
        extract_json(reply)


def test_lone_surrogates_and_nul_in_entity_names_are_cleaned() -> None:
    x = parse_extraction(
        '{"title": "T", "entities": ["Al\\ud800ice", "B\\u0000ob"],'
        ' "triples": [["Al\\ud800ice", "knows", "B\\u0000ob"]]}'
    )
    for name in [x.title, *x.entities, *(s for t in x.triples for s in t)]:
        name.encode("utf-8")  # encodable, so storable and hashable everywhere
        assert "\x00" not in name


@pytest.mark.parametrize("on_error", ["raise", "fallback"])
def test_an_llm_replying_deep_nesting_never_raises_an_untyped_error(on_error: str) -> None:
    llm = ScriptedLLM(lambda prompt: "[" * 1000)
    eng = ReMindRAG(
        llm=llm,
        embeddings=HashEmbedder(64),
        index_config=IndexConfig(on_extraction_error=on_error),  # type: ignore[arg-type]
    )
    try:
        eng.insert([Document(i, t) for i, t in TEXTS])
    except ReMindError:
        return  # ExtractionError: nothing written
    r = eng.retrieve("Who directed Sinister?")
    assert eng.answer("Who directed Sinister?").text
    eng.memorize(r.trace_id)


def test_hung_llm_calls_do_not_starve_a_healthy_engine() -> None:
    release = threading.Event()

    def hang(prompt: str) -> str:
        release.wait(30)
        return "{}"

    cfg = RetrievalConfig(llm_timeout=0.2, llm_navigation="always")  # every walk asks
    hung = ReMindRAG(llm=ScriptedLLM(hang), embeddings=HashEmbedder(64), retrieval_config=cfg)
    healthy = _engine(retrieval_config=cfg)
    healthy.llm = ScriptedLLM(lambda p: '{"need_retrieval": true, "subquestions": []}')
    try:
        for _ in range(10):  # more hung calls than the old global pool had threads
            hung.retrieve("Who directed Sinister?")
        for _ in range(3):
            r = healthy.retrieve("Who directed Sinister?")
            calls = sum(v["calls"] for v in r.trace.costs.to_dict().values())
            assert calls >= 1  # its LLM answered: the hung calls held no shared thread
    finally:
        release.set()


def test_max_concurrency_is_what_the_config_says() -> None:
    n = 12  # above the old pool's 8: all twelve calls must be in flight at once
    barrier = threading.Barrier(n, timeout=20)

    def meet(prompt: str) -> str:
        barrier.wait()
        return '{"title": "t", "entities": ["Alice"], "triples": []}'

    eng = ReMindRAG(
        llm=ScriptedLLM(meet),
        embeddings=HashEmbedder(64),
        index_config=IndexConfig(max_concurrency=n, chunk_tokens=40),
    )
    report = eng.insert([Document(f"d{i}", f"Alice visited place number {i}.") for i in range(n)])
    assert report.chunks == n and report.fallback_chunks == 0


# --- readers during a writer --------------------------------------------------------------


def test_readers_during_updates_never_fail_and_writes_see_only_typed_errors() -> None:
    eng = _engine()
    stop, crashes = threading.Event(), []

    def read() -> None:
        while not stop.is_set():
            try:  # a retrieve reads one snapshot: it never fails (issue 26)
                r = eng.retrieve("Who directed Sinister?", navigator={"min_similarity": -1.0})
            except Exception as exc:  # noqa: BLE001 - what this test looks for
                crashes.append(exc)
                continue
            try:  # its memory write may find the trace's nodes deleted: a typed error
                eng.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
            except ReMindError:
                pass
            except Exception as exc:  # noqa: BLE001 - what this test looks for
                crashes.append(exc)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for t in readers:
        t.start()
    for i in range(15):
        eng.insert([Document("d1", f"Scott Derrickson directed film number {i} in Texas.")])
        eng.delete(["d3"])
        eng.insert([Document("d3", TEXTS[2][1])])
    stop.set()
    for t in readers:
        t.join()
    assert crashes == []


# --- arguments ----------------------------------------------------------------------------


def test_bad_arguments_are_typed_errors_and_change_nothing(tmp_path: Path) -> None:
    from remindrag_integrations import InvalidDocumentError, InvalidQueryError
    from remindrag_integrations.errors import InvalidArgumentError

    eng = _engine()
    r = eng.retrieve("Who directed Sinister?")
    cid = r.chunks[0].chunk.id
    before = (eng.store.counts(), eng.store.export_memory())
    bad_calls = [
        (InvalidArgumentError, lambda: eng.delete("d1")),  # type: ignore[arg-type]
        (InvalidArgumentError, lambda: eng.memorize(r.trace_id, supporting=cid)),
        (InvalidArgumentError, lambda: eng.feedback(r.trace_id, True, chunk_ids=cid)),
        (InvalidArgumentError, lambda: eng.feedback(r.trace_id, "no")),  # type: ignore[arg-type]
        (InvalidArgumentError, lambda: eng.inspect_memory(k=-1)),
        (InvalidArgumentError, lambda: eng.insert("just one text")),
        (InvalidQueryError, lambda: eng.retrieve("Alice\x00")),
        (InvalidQueryError, lambda: eng.retrieve("Al\ud800ice")),
    ]
    # a datetime is kept as its ISO string now (issue 33 item 8); bytes have no JSON form
    for meta in ({"raw": b"\x00\x01"}, {"x": float("nan")}, {1: "a"}):
        bad_calls.append((InvalidDocumentError, lambda m=meta: eng.insert([Document("n", "t", m)])))
    bad_calls.append((InvalidDocumentError, lambda: eng.insert([Document("n\x00", "text")])))
    for exc, call in bad_calls:
        with pytest.raises(exc):
            call()
    assert (eng.store.counts(), eng.store.export_memory()) == before
    eng.save(tmp_path / "s")  # still saveable


@pytest.mark.parametrize(
    "content",
    [
        "[" * 2000,
        '{"format": "remindrag-memory/1", "vectors": [1, 2]}',
        '{"format": "remindrag-memory/1", "vectors": {"r-1": "x"}}',
        '["format"]',
        "not json",
    ],
)
def test_malformed_memory_files_are_typed_errors(tmp_path: Path, content: str) -> None:
    from remindrag_integrations.errors import InvalidArgumentError

    eng = _engine()
    (tmp_path / "m.json").write_text(content)
    with pytest.raises(InvalidArgumentError):
        eng.import_memory(tmp_path / "m.json")


def test_a_memory_vector_outside_the_unit_ball_is_refused(tmp_path: Path) -> None:
    from remindrag_integrations.errors import EmbeddingError

    eng = _engine()
    _memorize_one(eng, "Who directed Sinister?")
    eng.export_memory(tmp_path / "m.json")
    import json

    doc = json.loads((tmp_path / "m.json").read_text())
    eid = next(iter(doc["vectors"]))
    doc["vectors"][eid] = [1e30] * len(doc["vectors"][eid])
    (tmp_path / "m.json").write_text(json.dumps(doc))
    before = eng.store.export_memory()
    with pytest.raises(EmbeddingError):
        eng.import_memory(tmp_path / "m.json")
    assert eng.store.export_memory() == before
