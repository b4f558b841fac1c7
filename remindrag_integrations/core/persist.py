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
from .protocols import GraphStore
from .types import StoreCorruptError

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
) -> Path:
    if isinstance(store, DirectoryStore):
        root = Path(store.save(directory))
    else:  # a database store writes through: make it durable, keep the config beside
        store.flush()
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
    cfg = {"index": index_config.model_dump(), "retrieval": retrieval_config.model_dump()}
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
    tmp.write_text(json.dumps({"sha256": digest, "body": body}), encoding="utf-8")
    os.replace(tmp, path)


def read_checked_json(path: Path) -> dict[str, Any]:
    """What :func:`write_checked_json` wrote; any damage raises :class:`StoreCorruptError`."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        body, digest = doc["body"], doc["sha256"]
        if hashlib.sha256(body.encode()).hexdigest() != digest:
            raise ValueError("checksum mismatch")
        obj = json.loads(body)
        if not isinstance(obj, dict):
            raise TypeError("not an object")
        return obj
    except (OSError, ValueError, KeyError, TypeError, UnicodeError, AttributeError) as exc:
        raise StoreCorruptError(f"{path} is missing or damaged: {exc}") from exc
