"""A write is durable from the first one. A real ``kill -9`` lands at every step of an engine's
first save (``save(DIR)``: a new database, renamed into place), of a folder store's writes
(``store=DIR``: each call one transaction) and of an update save (tests/save_kills.py); each
folder it leaves opens with every write that was committed (the previous save, the new one once
in place, or none: ``StoreNotFoundError``) and takes the next run of the same calls without
``overwrite=True``, which leaves no temporary file. What a first save leaves half-made is taken
over; a store, whole or damaged, and a folder of other files never are. The older generations
format (``InMemoryGraphStore.save``, the previous release's) keeps its first-save mark: tested at
the store level and through the conversion an engine makes of such a folder."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest
import save_kills

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.adapters import embedder_record
from remindrag_integrations.core import persist
from remindrag_integrations.errors import (
    StoreCorruptError,
    StoreEmptyError,
    StoreError,
    StoreExistsError,
    StoreNotFoundError,
)
from remindrag_integrations.stores import InMemoryGraphStore, generations, sqlite_store
from remindrag_integrations.testing import HashEmbedder

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or not hasattr(os, "fork"), reason="kills forked children"
)


def _engine() -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder(save_kills.DIM))
    eng.insert([Document(i, t) for i, t in save_kills.TEXTS])
    return eng


def _old_save(eng: ReMindRAG, root: Path) -> Path:
    """What the previous release's ``eng.save(root)`` wrote: a generation and engine.json."""
    used = embedder_record.record(eng.embedder, eng.store.dim, None)
    return persist.save(eng.store, eng.index_config, eng.retrieval_config, root, used)


def _load(root: Path) -> ReMindRAG:
    return ReMindRAG.load(root, embeddings=HashEmbedder(save_kills.DIM))


@pytest.mark.parametrize("scenario", save_kills.SCENARIOS)
def test_a_kill_at_any_step_of_a_save_leaves_a_folder_that_loads_and_saves(
    tmp_path: Path, scenario: str
) -> None:
    done = save_kills.kill_every_step(scenario, tmp_path)
    steps = done["steps"]
    wrong = {}
    for n, name in zip(done["folders"], steps, strict=True):
        switched = save_kills.switched(steps, int(n))  # an update is saved once CURRENT is
        try:
            found = save_kills.problems(scenario, tmp_path / n, switched)
        except Exception as exc:  # noqa: BLE001 - reported with the step, as the others
            found = [f"{type(exc).__name__}: {exc}"]
        if found:
            wrong[f"killed before step {n} {name}"] = found
    assert not wrong
    # every step was a kill: the folder, the database's opening, each statement that writes
    # (inside its transaction, before and after its COMMIT), the rename into place
    assert len(done["folders"]) == len(steps) >= 14
    names = [name for _, name in steps]
    assert any(name.endswith(": COMMIT") for name in names)
    if scenario == "first save":
        renames = [n for n in names if " -> " in n]
        assert renames[-1].endswith(f"-> {sqlite_store.DB_FILE}")
        assert save_kills.switched(steps, len(steps) + 1) == 1
    elif scenario == "folder store":  # each of its three calls committed, one at a time
        got = [save_kills.switched(steps, n) for n in range(1, len(steps) + 2)]
        assert sorted(set(got)) == [0, 1, 2, 3] and got == sorted(got)
    else:
        assert save_kills.switched(steps, len(steps) + 1) == 1


def test_a_half_made_first_save_says_what_to_do(tmp_path: Path) -> None:
    """The older format's mark of a first save that did not finish: its load and an engine's
    say so (nothing to convert), and saving there again goes through without overwrite."""
    root = tmp_path / "kb"
    _old_save(_engine(), root)
    (root / ".first-save").touch()  # as a first save killed before its last step leaves it
    with pytest.raises(StoreNotFoundError, match="first save there did not finish.*save there"):
        _load(root)
    with pytest.raises(StoreNotFoundError, match="did not finish"):
        InMemoryGraphStore.load(root)
    assert not sqlite_store.holds_database(root)
    _engine().save(root)  # as the error says: no overwrite=True needed
    assert sorted(_load(root).store.document_ids()) == ["d1", "d2", "d3"]


def test_what_a_killed_first_save_leaves_is_taken_over(tmp_path: Path) -> None:
    """An engine's first save builds its database under a temporary name: killed before the
    rename, it leaves that file and no store. The folder loads as none, opens as an empty
    store, and the next save there takes it over, removing the dead save's file."""
    root = tmp_path / "kb"
    root.mkdir()
    dead = root / f".{sqlite_store.DB_FILE}.999999.1.tmp"  # a save killed mid-write left it
    dead.write_bytes(b"SQLite format 3\x00" + bytes(4080))
    with pytest.raises(StoreNotFoundError, match="holds none"):
        _load(root)
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / dead.name).write_bytes(dead.read_bytes())
    with pytest.raises(StoreEmptyError):
        ReMindRAG(embeddings=HashEmbedder(save_kills.DIM), store=probe).retrieve("Who?")
    _engine().save(root)  # no overwrite=True
    assert sorted(_load(root).store.document_ids()) == ["d1", "d2", "d3"]
    assert not os.path.lexists(dead)


def test_an_empty_folder_loads_as_no_engine(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    with pytest.raises(StoreNotFoundError, match="holds none"):  # was StoreCorruptError
        ReMindRAG.load(tmp_path / "kb", embeddings=HashEmbedder(save_kills.DIM))


def test_a_half_made_first_save_among_other_files_is_still_refused(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / ".first-save").touch()
    (root / "notes.txt").write_text("mine")
    with pytest.raises(StoreExistsError, match="not a saved store"):
        _engine().save(root)
    assert sorted(p.name for p in root.iterdir()) == [".first-save", "notes.txt"]


def test_a_store_without_engine_json_is_not_taken_for_half_made(tmp_path: Path) -> None:
    # a store saved by InMemoryGraphStore.save has no engine.json: it is a store, kept
    root = _engine().store.save(tmp_path / "s")  # type: ignore[attr-defined]
    with pytest.raises(StoreExistsError, match="another saved store"):
        _engine().save(root)
    assert sorted(InMemoryGraphStore.load(root).document_ids()) == ["d1", "d2", "d3"]


def test_a_damaged_store_is_not_taken_for_half_made(tmp_path: Path) -> None:
    """A folder of the older format without its CURRENT (no first-save mark), a store.db
    damaged: neither loads as none nor is taken over by a save; nothing is overwritten."""
    root = _old_save(_engine(), tmp_path / "s")
    (root / "CURRENT").unlink()  # damage: no first-save mark
    with pytest.raises(StoreCorruptError):
        _load(root)
    with pytest.raises(StoreExistsError):
        _engine().save(root)
    assert list(root.glob("gen-*")) and not sqlite_store.holds_database(root)
    db_root = _engine().save(tmp_path / "db")
    db = db_root / sqlite_store.DB_FILE
    damaged = b"\x00" * 100 + db.read_bytes()[100:]  # its header gone
    db.write_bytes(damaged)
    with pytest.raises(StoreCorruptError):
        _load(db_root)
    with pytest.raises(StoreExistsError):
        _engine().save(db_root)
    assert db.read_bytes() == damaged


def test_only_a_first_save_makes_the_mark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The older format: the first-save mark is made by a first save only, never by an update
    or a replacement (whose old store stays current until the switch)."""
    marked: list[Path] = []
    real = generations._mark_unfinished

    def spy(root: Path) -> None:
        marked.append(root)
        real(root)

    monkeypatch.setattr(generations, "_mark_unfinished", spy)
    store = _engine().store
    root = store.save(tmp_path / "s")  # type: ignore[attr-defined]
    assert marked == [root] and not (root / ".first-save").exists()
    store.add_graph(  # a change for the update to write
        documents=[("d9", "h", {})],
        chunks=[],
        nodes=[],
        embeddings=store.node_embeddings([]),
        edges=[],
        entity_aliases={},
    )
    store.save(root)  # type: ignore[attr-defined]  # an update
    _engine().store.save(root, overwrite=True)  # type: ignore[attr-defined]  # a replacement
    assert marked == [root] and not (root / ".first-save").exists()


def test_a_first_save_that_cannot_finish_holds_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine's first save on a full disk is a typed error that leaves no store there and
    no temporary file, and the next save goes through; so does the older format's, whose
    engine.json is its last file."""
    real_connect = sqlite3.connect

    def full(database: object, *args: object, **kwargs: object) -> sqlite3.Connection:
        con = real_connect(database, *args, **kwargs)  # type: ignore[arg-type]
        if str(database).endswith(".tmp"):  # the new database: no room for a page
            con.execute("PRAGMA max_page_count = 1")
        return con

    with monkeypatch.context() as m:
        m.setattr(sqlite3, "connect", full)
        with pytest.raises(StoreError, match="full.*free space"):
            _engine().save(tmp_path / "s")
    with pytest.raises(StoreNotFoundError):
        _load(tmp_path / "s")
    # no store, no temporary database (the folder's empty lock file may stay: it holds nothing)
    assert not [p.name for p in (tmp_path / "s").iterdir() if p.name != ".lock"]
    _engine().save(tmp_path / "s")  # once there is room, the next save goes through
    assert _load(tmp_path / "s").store.counts()["documents"] == 3

    real = generations._write_synced

    def no_room(path: Path, data: bytes) -> None:
        if path.name.startswith(".engine.json."):
            raise OSError(28, "No space left on device")
        real(path, data)

    with monkeypatch.context() as m:
        m.setattr(generations, "_write_synced", no_room)
        with pytest.raises(StoreError, match="nothing is saved there yet.*free space"):
            _old_save(_engine(), tmp_path / "old")
    with pytest.raises(StoreNotFoundError):
        InMemoryGraphStore.load(tmp_path / "old")
    with pytest.raises(StoreNotFoundError):
        _load(tmp_path / "old")
    _old_save(_engine(), tmp_path / "old")
    assert _load(tmp_path / "old").store.counts()["documents"] == 3


def test_a_first_save_mark_that_is_a_link_is_never_written_through(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("mine")
    root = tmp_path / "kb"
    root.mkdir()
    (root / ".first-save").symlink_to(tmp_path / "mine.txt")
    _engine().store.save(root)  # type: ignore[attr-defined]  # the older format's first save
    assert (tmp_path / "mine.txt").read_text() == "mine"
    assert not os.path.lexists(root / ".first-save")
    assert sorted(InMemoryGraphStore.load(root).document_ids()) == ["d1", "d2", "d3"]
    assert sorted(_load(root).store.document_ids()) == ["d1", "d2", "d3"]


def test_the_retrievers_settings_are_kept_in_the_store_and_damage_is_typed(
    tmp_path: Path,
) -> None:
    """The retriever's k, filter and score_threshold are kept in the store's settings, written
    in one transaction with nothing beside the database; damaged settings are a
    ``StoreCorruptError`` saying what to do, not a ``JSONDecodeError``, and saving the
    retriever again replaces them."""
    from remindrag_integrations import ReMindRetriever

    where = tmp_path / "r"
    r = ReMindRetriever(engine=_engine(), k=3)
    r.save(where)
    assert not list(where.glob("*.json")) and not list(where.glob(".*.tmp"))
    assert sqlite_store.read_settings(where)["retriever"]["k"] == 3
    assert ReMindRetriever.load(where, embeddings=HashEmbedder(save_kills.DIM)).k == 3

    def damage(value: str) -> None:
        con = sqlite3.connect(where / sqlite_store.DB_FILE)
        try:
            con.execute("UPDATE settings SET value = ? WHERE key = 'retriever'", (value,))
            con.commit()
        finally:
            con.close()

    damage('{"k": 3, "filt": null}')  # not the retriever's fields
    with pytest.raises(StoreCorruptError, match="save the retriever again"):
        ReMindRetriever.load(where, embeddings=HashEmbedder(save_kills.DIM))
    r.save(where)  # saved again: replaced
    assert ReMindRetriever.load(where, embeddings=HashEmbedder(save_kills.DIM)).k == 3
    damage('{"k": 3, "filt')  # not JSON
    with pytest.raises(StoreCorruptError):
        ReMindRetriever.load(where, embeddings=HashEmbedder(save_kills.DIM))
