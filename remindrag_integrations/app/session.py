"""Opening and saving the store a command names (a directory or a PostgreSQL DSN), with what
the CLI remembers about it.

A store directory is an SQLite database and PostgreSQL a server: both serialise writers
themselves (a write waits for another up to the store's ``lock_wait``), so concurrent runs
never lose each other's writes, and every write is committed when its call returns. What the
CLI remembers (the embedding model) is kept in the store's settings."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..adapters.llm_specs import load_llm
from ..core.config import IndexConfig
from .display import progress_bar
from .specs import CLIError, cached

if TYPE_CHECKING:
    from ..stores import SQLiteGraphStore


def _is_dsn(args: argparse.Namespace) -> bool:
    from ..stores import is_postgres_dsn

    return is_postgres_dsn(args.store)


def _cache_dir(args: argparse.Namespace) -> Path | None:
    if args.no_cache:
        return None
    if args.cache:
        return Path(args.cache)
    base = Path.cwd() if _is_dsn(args) else Path(args.store).resolve().parent
    return base / ".remindrag-cache"


def _settings(args: argparse.Namespace, engine: Any = None) -> dict[str, Any]:
    """What the CLI remembers about a store (the embedding model it was built with): in the
    store's settings (``cli``), the namespace's on PostgreSQL."""
    from ..core.store import SettingsStore

    if engine is not None and _is_dsn(args):
        return dict(engine.store.settings()) if isinstance(engine.store, SettingsStore) else {}
    if _is_dsn(args):
        return {}
    from ..stores.sqlite_store import read_settings

    found = read_settings(args.store).get("cli") if Path(args.store).is_dir() else None
    return found if isinstance(found, dict) else {}


def on_device(args: argparse.Namespace, embeddings: str | None) -> Any:
    """The embedder of ``--device`` (``remindrag index``): the model named by ``embeddings``
    (None: the packaged one) on sentence-transformers on that device, loaded now, so that a
    device this machine lacks fails before the store is opened; without ``--device``,
    ``embeddings`` as given."""
    device = getattr(args, "device", None)
    if not device:
        return embeddings
    from ..adapters.embeddings import (
        DEFAULT_MODEL,
        PACKAGED_LANGUAGES,
        SentenceTransformerEmbedder,
    )

    embedder = SentenceTransformerEmbedder(embeddings or DEFAULT_MODEL, device=device)
    if not embeddings:  # the packaged model on that device: it reads English
        embedder.languages = PACKAGED_LANGUAGES  # type: ignore[attr-defined]
    embedder.embed(["warm up"])  # loads the model on the device (or raises EmbeddingError)
    return embedder


def open_engine(
    args: argparse.Namespace,
    create: bool = False,
    *,
    lock_wait: float | None = None,
    read_only: bool = False,
) -> Any:
    """The engine over the store ``args.store`` names, with the command's LLM (its responses
    cached), embedder and namespace. A folder store is opened live (``ReMindRAG(store=DIR)``;
    ``create``: made when missing); ``lock_wait``: how long its writes wait for another
    writer (default: the store's); ``read_only`` (``remindrag mcp --read-only``): nothing is
    written to it, not even the traces of its searches (kept in memory) or the engine's
    settings, and a folder still in the older format is refused (converting it is a write)."""
    from ..core.store import SettingsStore
    from ..engine import ReMindRAG
    from ..stores import open_store

    llm = cached(
        load_llm(getattr(args, "llm", "none")), getattr(args, "llm", "none"), _cache_dir(args)
    )
    index_cfg = IndexConfig(on_extraction_error=getattr(args, "on_extraction_error", "raise"))
    if _is_dsn(args):
        store: Any = open_store(args.store, namespace=args.namespace)  # PostgresGraphStore
        remembered = store.settings() if isinstance(store, SettingsStore) else {}
        embeddings = on_device(
            args, getattr(args, "embeddings", None) or remembered.get("embeddings")
        )
        if not create and not store.counts()["documents"]:
            raise CLIError(
                f"namespace {args.namespace!r} at {args.store} is empty: "
                "run 'remindrag index PATH --store DSN' first"
            )
        return ReMindRAG(llm=llm, embeddings=embeddings, store=store, index_config=index_cfg)
    from ..stores import SQLiteGraphStore

    root = Path(args.store)
    if not SQLiteGraphStore.exists(root) and not create:
        raise CLIError(f"no store at {root}: run 'remindrag index PATH --store {root}' first")
    embeddings = on_device(
        args, getattr(args, "embeddings", None) or _settings(args).get("embeddings")
    )
    if not sqlite_store_ready(root):  # the older format: converted once, with a progress bar
        if read_only:
            raise CLIError(
                f"the store at {root} is in the older format (generations), which is converted "
                "once on its first writable open, and a read-only server writes nothing: run "
                f"'remindrag inspect --store {root}' once, then serve it"
            )
        SQLiteGraphStore.open(
            root, args.namespace, progress=progress_bar("converting the store", "step")
        ).close()
    if lock_wait is None and not read_only:
        engine = ReMindRAG(llm=llm, embeddings=embeddings, store=root, namespace=args.namespace)
        engine.change_fields(on_extraction_error=index_cfg.on_extraction_error)
        return engine
    # the store opened here: its lock_wait, or read only; the engine's configuration is read
    # from the folder's settings, and never written back (this engine changes none of it)
    kind = _read_only_store() if read_only else SQLiteGraphStore
    opened = (
        kind.open(root, args.namespace, create=False)
        if lock_wait is None
        else kind.open(root, args.namespace, create=False, lock_wait=lock_wait)
    )
    try:
        engine = ReMindRAG.load(root, llm=llm, embeddings=embeddings, store=opened)
        if engine.index_config.on_extraction_error != index_cfg.on_extraction_error:
            engine.change_fields(on_extraction_error=index_cfg.on_extraction_error)
    except BaseException:
        opened.close()
        raise
    return engine


def _read_only_store() -> type[SQLiteGraphStore]:
    """A folder store that writes nothing: a retrieval's trace is kept in memory (readable
    by this process: ``trace://``), a settings change refused; other processes' writes are
    seen as by any reader."""
    from ..core.errors import StoreError
    from ..stores import InMemoryGraphStore, SQLiteGraphStore

    class ReadOnlyFolderStore(SQLiteGraphStore):
        def save_trace(self, trace: dict) -> None:
            InMemoryGraphStore.save_trace(self, trace)

        def update_settings(self, values: dict[str, Any]) -> None:
            if values:
                raise StoreError(f"the store at {self.root} is open read-only")

    return ReadOnlyFolderStore


def sqlite_store_ready(root: Path) -> bool:
    """True when ``root`` holds no store of the older format left to convert."""
    from ..stores import generations, sqlite_store

    return sqlite_store.holds_database(root) or not generations.holds_data(root)


def save_engine(
    engine: Any, args: argparse.Namespace, *, close: bool = True, save: bool = True
) -> None:
    """Keep what the CLI remembers (the embedding model) in the store's settings, and close
    the store unless ``close=False`` (every write is committed already: ``save`` is kept for
    the callers and changes nothing)."""
    from ..core.store import SettingsStore

    del save
    embeddings = getattr(args, "embeddings", None) or _settings(args, engine).get("embeddings")
    if embeddings and isinstance(engine.store, SettingsStore):
        key = "embeddings" if _is_dsn(args) else "cli"
        value: Any = embeddings if _is_dsn(args) else {"embeddings": embeddings}
        engine.store.update_settings({key: value})
    if close and not _is_dsn(args):
        engine.close()
