"""Saving an engine: the store (atomically, for stores kept in a directory) and the
configuration it was built with (``engine.json``, which carries its own checksum)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .config import IndexConfig, RetrievalConfig
from .files import read_regular
from .protocols import GraphStore
from .types import StoreCorruptError, StoreError

ENGINE_FILE = "engine.json"


@runtime_checkable
class DirectoryStore(Protocol):
    """A store persisted as files in a directory (the embedded store)."""

    def save(self, directory: str | os.PathLike[str]) -> Path: ...


def save(
    store: GraphStore,
    index_config: IndexConfig,
    retrieval_config: RetrievalConfig,
    directory: str | os.PathLike[str],
    embedder: dict[str, Any] | None = None,
) -> Path:
    """``embedder`` (its ``name`` and ``dimension``) is recorded so that :func:`load_embedder`
    can tell which embedder the store needs."""
    if isinstance(store, DirectoryStore):
        root = Path(store.save(directory))
    else:  # a database store writes through: make it durable, keep the config beside
        store.flush()
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, Any] = {
        "index": index_config.model_dump(),
        "retrieval": retrieval_config.model_dump(),
    }
    if embedder is not None:
        cfg["embedder"] = embedder
    write_checked_json(root / ENGINE_FILE, cfg)
    return root


def load_config(directory: str | os.PathLike[str]) -> tuple[IndexConfig, RetrievalConfig]:
    root = Path(directory)
    cfg = read_checked_json(root / ENGINE_FILE)
    try:
        return IndexConfig.build(**cfg["index"]), RetrievalConfig.build(**cfg["retrieval"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreCorruptError(f"no readable engine config at {root}: {exc}") from exc


def write_checked_json(path: Path, obj: dict[str, Any]) -> None:
    """Write ``obj`` as JSON with the sha256 of its body, atomically (a unique temporary
    name, then a rename), so concurrent writers never collide and damage is detected."""
    body = json.dumps(obj, sort_keys=True, allow_nan=False)
    digest = hashlib.sha256(body.encode()).hexdigest()
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(json.dumps({"sha256": digest, "body": body}), encoding="utf-8")
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


def load_embedder(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The embedder recorded by :func:`save` (``name`` and ``dimension``), None when the
    engine was saved without one."""
    found = read_checked_json(Path(directory) / ENGINE_FILE).get("embedder")
    return found if isinstance(found, dict) else None
