"""A store directory of the generations format (what the previous release saved, and what
``InMemoryGraphStore.save`` still writes) read as an attacker could have written it: a load
reads only regular files inside the store's own generation folder, and so does the one-time
conversion that ``ReMindRAG.load`` / ``store=DIR`` make of such a folder (it refuses the same
input with the same typed error and converts nothing); a save that cannot write says so with a
typed error and keeps the last good generation, and so does an engine whose settings cannot be
written."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest

from remindrag_integrations import Document, ReMindRAG, StoreError
from remindrag_integrations.adapters import embedder_record
from remindrag_integrations.core import persist
from remindrag_integrations.errors import StoreCorruptError
from remindrag_integrations.stores import (
    InMemoryGraphStore,
    SQLiteGraphStore,
    generations,
    sqlite_store,
)
from remindrag_integrations.testing import HashEmbedder


def _old_save(eng: ReMindRAG, root: Path) -> Path:
    """What the previous release's ``eng.save(root)`` wrote: a generation and engine.json."""
    used = embedder_record.record(eng.embedder, eng.store.dim, None)
    return persist.save(eng.store, eng.index_config, eng.retrieval_config, root, used)


def _saved(tmp_path: Path) -> tuple[InMemoryGraphStore, Path]:
    eng = ReMindRAG(embeddings=HashEmbedder(16))
    eng.insert([Document("d1", "Alice lives in Paris. Bob visits Alice.")])
    return eng.store, _old_save(eng, tmp_path / "s")  # type: ignore[return-value]


def _not_converted(root: Path) -> bool:
    """True when a refused conversion left the folder as it was: no database, the old files."""
    return not sqlite_store.holds_database(root) and os.path.lexists(root / "CURRENT")


def _gen(root: Path) -> Path:
    return root / (root / "CURRENT").read_text().split("\n")[0]


def _rewrite_manifest(root: Path, edit: object) -> None:
    """Change the manifest with ``edit(manifest)`` and re-sign it, as an attacker can."""
    gen = _gen(root)
    manifest = json.loads((gen / "manifest.json").read_bytes())
    edit(manifest)  # type: ignore[operator]
    raw = json.dumps(manifest).encode()
    (gen / "manifest.json").write_bytes(raw)
    (root / "CURRENT").write_text(f"{gen.name}\n{hashlib.sha256(raw).hexdigest()}\n")


def _name_in_manifest(root: Path, name: str, data: bytes | None = None) -> None:
    def edit(m: dict) -> None:
        m["sha256"][name] = hashlib.sha256(data or b"").hexdigest()

    _rewrite_manifest(root, edit)


@pytest.mark.parametrize("name", ["../../../../etc/passwd", "/etc/passwd", "a/../b", "..", ""])
def test_a_manifest_entry_outside_the_generation_is_refused(tmp_path: Path, name: str) -> None:
    _, root = _saved(tmp_path)
    secret = tmp_path / "secret"
    secret.write_bytes(b"root:x:0:0")
    target = name.replace("/etc/passwd", str(secret)) if name.endswith("passwd") else name
    _name_in_manifest(root, target, secret.read_bytes())
    with pytest.raises(StoreCorruptError, match="plain file name"):
        InMemoryGraphStore.load(root)


def test_current_naming_another_folder_is_refused(tmp_path: Path) -> None:
    _, root = _saved(tmp_path)
    _, other = _saved(tmp_path / "other")
    gen = _gen(root)
    theirs = (other / "CURRENT").read_text().split("\n")[1]  # the other manifest's checksum
    rel = f"{gen.name}/../../other/s/{_gen(other).name}"
    (root / "CURRENT").write_text(f"{rel}\n{theirs}\n")
    with pytest.raises(StoreCorruptError, match="plain file name"):
        InMemoryGraphStore.load(root)
    (root / "CURRENT").write_text(f"{_gen(other)}\n{theirs}\n")  # an absolute path
    with pytest.raises(StoreCorruptError):
        InMemoryGraphStore.load(root)


def test_a_generation_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    _, root = _saved(tmp_path)
    _, other = _saved(tmp_path / "other")
    text = (root / "CURRENT").read_text().split("\n")
    (root / "gen-elsewhere").symlink_to(_gen(other))
    digest = hashlib.sha256((_gen(other) / "manifest.json").read_bytes()).hexdigest()
    (root / "CURRENT").write_text(f"gen-elsewhere\n{digest}\n")
    assert text[0] != "gen-elsewhere"
    with pytest.raises(StoreCorruptError, match="not a folder"):
        InMemoryGraphStore.load(root)


def test_a_fifo_named_by_the_manifest_fails_at_once(tmp_path: Path) -> None:
    _, root = _saved(tmp_path)
    os.mkfifo(_gen(root) / "pipe.json")
    _name_in_manifest(root, "pipe.json")
    with pytest.raises(StoreCorruptError, match="FIFO"):  # before: load hung forever
        InMemoryGraphStore.load(root)


def test_a_fifo_or_link_in_place_of_current_or_manifest_is_refused(tmp_path: Path) -> None:
    _, root = _saved(tmp_path)
    manifest = _gen(root) / "manifest.json"
    saved = manifest.read_bytes()
    manifest.unlink()
    os.mkfifo(manifest)
    with pytest.raises(StoreCorruptError, match="FIFO"):
        InMemoryGraphStore.load(root)
    manifest.unlink()
    (tmp_path / "m.json").write_bytes(saved)
    manifest.symlink_to(tmp_path / "m.json")  # same bytes, but through a link
    with pytest.raises(StoreCorruptError, match="symbolic link"):
        InMemoryGraphStore.load(root)
    current = (root / "CURRENT").read_bytes()
    (root / "CURRENT").unlink()
    os.mkfifo(root / "CURRENT")
    with pytest.raises(StoreCorruptError, match="FIFO"):
        InMemoryGraphStore.load(root)
    (root / "CURRENT").unlink()
    (root / "CURRENT").write_bytes(current)


def test_a_data_file_linked_elsewhere_is_refused(tmp_path: Path) -> None:
    _, root = _saved(tmp_path)
    data = _gen(root) / "documents.json"
    (tmp_path / "copy.json").write_bytes(data.read_bytes())  # same bytes: checksum passes
    data.unlink()
    data.symlink_to(tmp_path / "copy.json")
    with pytest.raises(StoreCorruptError, match="symbolic link"):
        InMemoryGraphStore.load(root)


def test_hostile_generation_files_are_refused_by_the_conversion_too(tmp_path: Path) -> None:
    """``ReMindRAG.load`` of a folder of the older format converts it through the same reader:
    a file linked elsewhere is refused with the same typed error, and nothing is converted."""
    _, root = _saved(tmp_path)
    data = _gen(root) / "documents.json"
    (tmp_path / "copy.json").write_bytes(data.read_bytes())
    data.unlink()
    data.symlink_to(tmp_path / "copy.json")
    with pytest.raises(StoreCorruptError, match="symbolic link"):
        ReMindRAG.load(root, embeddings=HashEmbedder(16))
    with pytest.raises(StoreCorruptError, match="symbolic link"):
        ReMindRAG(embeddings=HashEmbedder(16), store=str(root))
    assert _not_converted(root)


def test_an_engine_json_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    _, root = _saved(tmp_path)
    (root / "engine.json").unlink()
    os.mkfifo(root / "engine.json")
    with pytest.raises(StoreCorruptError, match="FIFO"):  # at once: a read would hang
        ReMindRAG.load(root, embeddings=HashEmbedder(16))
    assert _not_converted(root)


def test_a_lock_file_that_is_a_link_is_a_typed_error(tmp_path: Path) -> None:
    store, root = _saved(tmp_path)
    (root / ".lock").unlink(missing_ok=True)
    (root / ".lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreCorruptError, match="remove it"):
        store.save(root)
    with pytest.raises(StoreCorruptError, match="remove it"):  # the conversion takes it too
        ReMindRAG.load(root, embeddings=HashEmbedder(16))
    assert not (tmp_path / "elsewhere").exists()
    assert _not_converted(root)


def test_saving_to_a_regular_file_is_a_typed_error(tmp_path: Path) -> None:
    store, _ = _saved(tmp_path)
    (tmp_path / "f").write_text("mine")
    with pytest.raises(StoreError, match="is a file"):
        store.save(tmp_path / "f")
    assert (tmp_path / "f").read_text() == "mine"


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS, errno.EDQUOT])
def test_a_save_that_cannot_write_keeps_the_last_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: int
) -> None:
    store, root = _saved(tmp_path)
    before = InMemoryGraphStore.load(root).counts()
    gen = _gen(root).name
    store.add_graph(  # a change the failed save would have written
        documents=[("d2", "h", {})],
        chunks=[],
        nodes=[],
        embeddings=store.node_embeddings([]),
        edges=[],
        entity_aliases={},
    )
    real = generations._write_synced
    calls = [0]

    def failing(path: Path, data: bytes) -> None:
        calls[0] += 1
        if calls[0] == 3:  # the third file of the new generation: the disk is full
            raise OSError(err, os.strerror(err), str(path))
        real(path, data)

    monkeypatch.setattr(generations, "_write_synced", failing)
    with pytest.raises(StoreError, match="is intact"):
        store.save(root)
    monkeypatch.undo()
    assert _gen(root).name == gen and InMemoryGraphStore.load(root).counts() == before
    assert sorted(p.name for p in root.iterdir() if p.name.startswith((".gen", "gen"))) == [gen]
    store.save(root)  # once there is room again, the save goes through
    assert InMemoryGraphStore.load(root).counts()["documents"] == 2


def test_a_save_that_cannot_switch_current_keeps_the_last_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, root = _saved(tmp_path)
    gen = _gen(root).name
    real = os.replace

    def failing(src: object, dst: object) -> None:
        if str(dst).endswith("CURRENT"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(generations.os, "replace", failing)
    with pytest.raises(StoreError, match="is intact"):
        store.save(root)
    monkeypatch.undo()
    assert _gen(root).name == gen
    assert [p.name for p in root.iterdir() if "gen-" in p.name] == [gen]
    InMemoryGraphStore.load(root)


def test_engine_json_that_cannot_be_written_is_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generations format writes engine.json beside the store, under its lock, after the
    switch: a full disk there is a typed error, and the previous engine.json is kept."""
    eng = ReMindRAG(embeddings=HashEmbedder(16))
    eng.insert([Document("d1", "Alice lives in Paris.")])
    root = _old_save(eng, tmp_path / "s")
    before = (root / "engine.json").read_bytes()
    real = generations._write_synced

    def full(path: Path, data: bytes) -> None:
        if path.name.startswith(".engine.json."):  # written under the lock, after CURRENT
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(generations, "_write_synced", full)
    with pytest.raises(StoreError, match="the store is saved.*free space"):
        _old_save(eng, root)
    monkeypatch.undo()
    assert (root / "engine.json").read_bytes() == before
    assert not list(root.glob(".*.tmp"))
    ReMindRAG.load(root, embeddings=HashEmbedder(16))


def test_engine_settings_that_cannot_be_written_are_a_typed_error(tmp_path: Path) -> None:
    """A folder store keeps the engine's configuration in its database: saving it where the
    database cannot be written (a read-only store) is a typed error that keeps the previous
    configuration, and the same call writes it once the store is writable again."""
    eng = ReMindRAG(embeddings=HashEmbedder(16), store=str(tmp_path / "s"))
    eng.insert([Document("d1", "Alice lives in Paris.")])
    store = eng.store
    assert isinstance(store, SQLiteGraphStore)
    k = eng.retrieval_config.k
    store._db.execute("PRAGMA query_only = 1")  # the database refuses every write
    eng.change_fields(k=k + 4)  # kept in memory; recording it fails (logged)
    with pytest.raises(StoreError, match="writable"):
        eng.save()
    assert sqlite_store.read_settings(tmp_path / "s")["engine"]["retrieval"]["k"] == k
    store._db.execute("PRAGMA query_only = 0")
    eng.save()  # the same call again: written
    assert sqlite_store.read_settings(tmp_path / "s")["engine"]["retrieval"]["k"] == k + 4
    eng.close()
    assert ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder(16)).retrieval_config.k == k + 4
