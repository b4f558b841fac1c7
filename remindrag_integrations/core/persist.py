"""Saving an engine: the store (atomically, for stores kept in a directory) and the
configuration it was built with (``engine.json``)."""

from __future__ import annotations

import json
import os
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
    tmp = root / f".{ENGINE_FILE}.tmp{os.getpid()}"
    tmp.write_text(json.dumps(cfg), encoding="utf-8")
    os.replace(tmp, root / ENGINE_FILE)
    return root


def load_config(directory: str | os.PathLike[str]) -> tuple[IndexConfig, RetrievalConfig]:
    root = Path(directory)
    try:
        cfg: dict[str, Any] = json.loads((root / ENGINE_FILE).read_text(encoding="utf-8"))
        return IndexConfig.build(**cfg["index"]), RetrievalConfig.build(**cfg["retrieval"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreCorruptError(f"no readable engine config at {root}: {exc}") from exc


def load_embedder(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The embedder recorded by :func:`save` (``name`` and ``dimension``), None when the
    engine was saved before this was recorded."""
    root = Path(directory)
    try:
        cfg = json.loads((root / ENGINE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreCorruptError(f"no readable engine config at {root}: {exc}") from exc
    found = cfg.get("embedder") if isinstance(cfg, dict) else None
    return found if isinstance(found, dict) else None
