"""A save is durable from the first one. A real ``kill -9`` lands at every step of a first save
(``save(DIR)`` and the folder store's first insert) and of an update save (tests/save_kills.py);
each folder it leaves loads (the previous save, or none: ``StoreNotFoundError`` saying the first
save did not finish) and takes the next save without ``overwrite=True``, which leaves no temporary
file. What a first save leaves half-made is taken over; a store, whole or damaged, and a folder of
other files never are. The first-save tests failed on the code before the change (kills after the
generation was renamed into place: ``StoreCorruptError`` on load, ``StoreExistsError`` on the next
save)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import save_kills

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.errors import (
    StoreCorruptError,
    StoreEmptyError,
    StoreError,
    StoreExistsError,
    StoreNotFoundError,
)
from remindrag_integrations.stores import InMemoryGraphStore, generations
from remindrag_integrations.testing import HashEmbedder

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or not hasattr(os, "fork"), reason="kills forked children"
)


def _engine() -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder(save_kills.DIM))
    eng.insert([Document(i, t) for i, t in save_kills.TEXTS])
    return eng


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
    # every step the save takes was a kill: the lock, the generation's files, its rename,
    # CURRENT's, engine.json's (under the lock); a first save also makes and removes its mark
    assert len(done["folders"]) == len(steps) >= 14
    names = [name for _, name in steps]
    assert [n.split(" -> ")[-1] for n in names if " -> " in n][-2:] == ["CURRENT", "engine.json"]
    if scenario != "update save":
        assert steps[-1] == ["os.remove", ".first-save"]  # the last step: the save is done


def test_a_half_made_first_save_says_what_to_do(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    _engine().save(root)
    (root / ".first-save").touch()  # as a first save killed before its last step leaves it
    with pytest.raises(StoreNotFoundError, match="first save there did not finish.*save there"):
        ReMindRAG.load(root, embeddings=HashEmbedder(save_kills.DIM))
    with pytest.raises(StoreNotFoundError, match="did not finish"):
        InMemoryGraphStore.load(root)
    with pytest.raises(StoreEmptyError, match="first save there did not finish"):
        ReMindRAG(embeddings=HashEmbedder(save_kills.DIM), store=root).retrieve("Who?")


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
    root = _engine().save(tmp_path / "s")
    (root / "CURRENT").unlink()  # damage: no first-save mark
    with pytest.raises(StoreCorruptError):
        ReMindRAG.load(root, embeddings=HashEmbedder(save_kills.DIM))
    with pytest.raises(StoreExistsError):
        _engine().save(root)
    assert list(root.glob("gen-*"))


def test_only_a_first_save_makes_the_mark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eng = _engine()
    root = eng.save(tmp_path / "s")
    made = []
    real = generations._write_synced

    def spy(path: Path, data: bytes) -> None:
        made.append(path.name)
        real(path, data)

    monkeypatch.setattr(generations, "_write_synced", spy)
    eng.save(root)  # an update
    _engine().save(root, overwrite=True)  # a replacement: the old store current until the switch
    assert ".first-save" not in made and not (root / ".first-save").exists()


def test_a_first_save_that_cannot_finish_holds_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = generations._write_synced

    def full(path: Path, data: bytes) -> None:
        if path.name.startswith(".engine.json."):
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(generations, "_write_synced", full)
    with pytest.raises(StoreError, match="nothing is saved there yet.*free space"):
        _engine().save(tmp_path / "s")
    monkeypatch.undo()
    with pytest.raises(StoreNotFoundError):
        ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder(save_kills.DIM))
    _engine().save(tmp_path / "s")  # once there is room, the next save goes through
    assert ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder(save_kills.DIM)).store.counts()


def test_a_first_save_mark_that_is_a_link_is_never_written_through(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("mine")
    root = tmp_path / "kb"
    root.mkdir()
    (root / ".first-save").symlink_to(tmp_path / "mine.txt")
    _engine().save(root)
    assert (tmp_path / "mine.txt").read_text() == "mine"
    assert not os.path.lexists(root / ".first-save")
    ReMindRAG.load(root, embeddings=HashEmbedder(save_kills.DIM))


def test_the_retrievers_file_is_written_atomically_and_damage_is_typed(tmp_path: Path) -> None:
    """``retriever.json`` (k, filter, score_threshold) beside the engine: a save killed while
    writing it leaves the previous file and a temporary one, which the next save removes; a
    damaged file is a ``StoreCorruptError`` saying what to do, not a ``JSONDecodeError``."""
    from remindrag_integrations import ReMindRetriever

    where = tmp_path / "r"
    r = ReMindRetriever(engine=_engine(), k=3)
    r.save(where)
    (where / ".retriever.json.dead.tmp").write_text('{"k": ', encoding="utf-8")  # killed
    r.save(where)
    assert not list(where.glob(".retriever.json.*.tmp"))
    assert ReMindRetriever.load(where, embeddings=HashEmbedder(save_kills.DIM)).k == 3
    (where / "retriever.json").write_text('{"k": 3, "filt', encoding="utf-8")  # truncated
    with pytest.raises(StoreCorruptError, match="delete it"):
        ReMindRetriever.load(where, embeddings=HashEmbedder(save_kills.DIM))
    (where / "retriever.json").unlink()
    assert ReMindRetriever.load(where, embeddings=HashEmbedder(save_kills.DIM)).k is None
