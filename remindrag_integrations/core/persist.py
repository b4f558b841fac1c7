"""Saving an engine: the store (atomically, for stores kept in a directory) and the
configuration it was built with (``engine.json``, which carries its own checksum)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .config import IndexConfig, RetrievalConfig
from .errors import StoreCorruptError, StoreError, StoreExistsError
from .files import read_regular
from .store import GraphStore

ENGINE_FILE = "engine.json"
BESIDE = (ENGINE_FILE, "retriever.json", "cli.json")
"""What the library keeps in a saved engine's folder beside the store's own files: the engine's
configuration, the retriever's and the command line's."""


@runtime_checkable
class DirectoryStore(Protocol):
    """A store persisted as files in a directory (the embedded store)."""

    def save(
        self,
        directory: str | os.PathLike[str],
        *,
        overwrite: bool = False,
        beside: Mapping[str, bytes] | None = None,
    ) -> Path:
        """Save the store, then write ``beside`` (file name: bytes) in ``directory`` under
        the same lock, each atomically; a first save is done only when they are written."""
        ...


def check_folder(root: Path, own: Callable[[str], bool]) -> None:
    """Refuse (:class:`StoreExistsError`) to save into ``root`` when it is a file or holds
    entries that neither ``own`` (the store's names) nor :data:`BESIDE` claim: a folder of
    the user's own files is never written among. Nothing is written here."""
    if root.exists() and not root.is_dir():
        raise StoreExistsError(f"cannot save to {root}: it is a file, not a folder")
    if not root.is_dir():
        return
    others = sorted(p.name for p in root.iterdir() if not (own(p.name) or _beside(p.name)))
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise StoreExistsError(
            f"cannot save to {root}: the folder holds files that are not a saved store "
            f"({shown}); save into a new or empty folder"
        )


def _beside(name: str) -> bool:
    """One of :data:`BESIDE`, or a temporary file of :func:`write_checked_json` for one."""
    return name in BESIDE or any(
        name.startswith(f".{b}.") and name.endswith(".tmp") for b in BESIDE
    )


def save(
    store: GraphStore,
    index_config: IndexConfig,
    retrieval_config: RetrievalConfig,
    directory: str | os.PathLike[str],
    embedder: dict[str, Any] | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """``embedder`` (what :func:`~..adapters.embedder_record.record` says of it) is recorded
    so that a later open can tell which embedder the store needs. A directory store
    refuses to replace another store unless ``overwrite`` (see its ``save``) and writes
    ``engine.json`` under its lock, as the last file of its save (a first save killed before
    it holds no store: the next save takes it over); no store writes into a folder that holds
    other files and nothing saved by this library (:func:`check_folder`)."""
    cfg: dict[str, Any] = {
        "index": index_config.model_dump(),
        "retrieval": retrieval_config.model_dump(),
    }
    if embedder is not None:
        cfg["embedder"] = embedder
    if isinstance(store, DirectoryStore):
        beside = {ENGINE_FILE: checked_json(cfg)}
        return Path(store.save(directory, overwrite=overwrite, beside=beside))
    root = Path(directory)  # a database store writes through: make it durable, config beside
    if not (root / ENGINE_FILE).exists():  # a folder this library has not saved to
        check_folder(root, lambda _: False)
    store.flush()
    root.mkdir(parents=True, exist_ok=True)
    write_checked_json(root / ENGINE_FILE, cfg)
    return root


def engine_settings(
    index_config: IndexConfig, retrieval_config: RetrievalConfig, embedder: dict[str, Any] | None
) -> dict[str, Any]:
    """What a saved engine records: its two configurations and its embedder's record."""
    cfg: dict[str, Any] = {
        "index": index_config.model_dump(),
        "retrieval": retrieval_config.model_dump(),
    }
    if embedder is not None:
        cfg["embedder"] = embedder
    return json.loads(json.dumps(cfg, sort_keys=True, allow_nan=False))


def config_of(cfg: dict[str, Any], where: Any) -> tuple[IndexConfig, RetrievalConfig]:
    """The configurations of :func:`engine_settings`; damage names ``where``."""
    try:
        return IndexConfig.build(**cfg["index"]), RetrievalConfig.build(**cfg["retrieval"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreCorruptError(f"no readable engine config at {where}: {exc}") from exc


def embedder_of(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """The embedder's record in :func:`engine_settings` (None: saved without one)."""
    found = cfg.get("embedder")
    return found if isinstance(found, dict) else None


def checked_json(obj: dict[str, Any]) -> bytes:
    """``obj`` as JSON with the sha256 of its body (read back by :func:`read_checked_json`)."""
    body = json.dumps(obj, sort_keys=True, allow_nan=False)
    digest = hashlib.sha256(body.encode()).hexdigest()
    return json.dumps({"sha256": digest, "body": body}).encode("utf-8")


def write_checked_json(path: Path, obj: dict[str, Any]) -> None:
    """Write ``obj`` as JSON with the sha256 of its body, atomically (a unique temporary
    name, then a rename), so concurrent writers never collide and damage is detected."""
    data = checked_json(obj)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:  # disk full, read-only: the previous file stays as it was
        tmp.unlink(missing_ok=True)
        raise StoreError(
            f"could not write {path}: {exc.strerror or exc}; free space or make the "
            "directory writable, then save again"
        ) from exc


def read_checked_json(path: Path) -> dict[str, Any]:
    """What :func:`write_checked_json` wrote; any damage raises :class:`StoreCorruptError`."""
    try:
        doc = json.loads(read_regular(path).decode("utf-8"))
        body, digest = doc["body"], doc["sha256"]
        if hashlib.sha256(body.encode()).hexdigest() != digest:
            raise ValueError("checksum mismatch")
        obj = json.loads(body)
        if not isinstance(obj, dict):
            raise TypeError("not an object")
        return obj
    except (OSError, ValueError, KeyError, TypeError, UnicodeError, AttributeError) as exc:
        raise StoreCorruptError(f"{path} is missing or damaged: {exc}") from exc
