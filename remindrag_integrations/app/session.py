"""Opening and saving the store a command names (a directory or a PostgreSQL DSN), with what
the CLI remembers about it.

Commands that write (``index``, ``ask``, ``memory``) open a store directory for writing: they
hold its lock from load to save, so two concurrent runs take turns (the second waits up to
``LOCK_WAIT`` seconds, then fails with :class:`StoreLockedError`) and neither loses the other's
memory writes. PostgreSQL needs no lock: it serialises writers itself."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..adapters.llm_specs import load_llm
from ..core.config import IndexConfig
from .display import progress_bar
from .specs import CLIError, cached

CLI_FILE = "cli.json"
LOCK_WAIT = 600.0  # seconds a writing command waits for another one on the same directory
WRITING_COMMANDS = ("index", "ask", "memory")


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
    """What the CLI remembers about a store (the embedding model it was built with): in
    ``cli.json`` of a store directory, or in the namespace's settings on PostgreSQL."""
    from ..core.persist import read_checked_json
    from ..core.store import SettingsStore

    if engine is not None and _is_dsn(args):
        return dict(engine.store.settings()) if isinstance(engine.store, SettingsStore) else {}
    path = Path(args.store) / CLI_FILE
    return read_checked_json(path) if path.exists() else {}


def on_device(args: argparse.Namespace, embeddings: str | None) -> Any:
    """The embedder of ``--device`` (``remindrag index``): the model named by ``embeddings``
    (None: the packaged one) on sentence-transformers on that device, loaded now, so that a
    device this machine lacks fails before the store is opened; without ``--device``,
    ``embeddings`` as given."""
    device = getattr(args, "device", None)
    if not device:
        return embeddings
    from ..adapters.embeddings import DEFAULT_MODEL, SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(embeddings or DEFAULT_MODEL, device=device)
    embedder.embed(["warm up"])  # loads the model on the device (or raises EmbeddingError)
    return embedder


def open_engine(args: argparse.Namespace, create: bool = False) -> Any:
    from ..core.store import SettingsStore
    from ..engine import ReMindRAG
    from ..stores import InMemoryGraphStore, open_store

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
    root = Path(args.store)
    embeddings = on_device(
        args, getattr(args, "embeddings", None) or _settings(args).get("embeddings")
    )
    writing = getattr(args, "command", None) in WRITING_COMMANDS
    if not InMemoryGraphStore.exists(root) and not create:
        raise CLIError(f"no store at {root}: run 'remindrag index PATH --store {root}' first")
    store = InMemoryGraphStore.open(
        root,
        args.namespace,
        lock=writing,
        wait=LOCK_WAIT,
        progress=progress_bar("loading the store", "step"),
    )
    saved = InMemoryGraphStore.exists(root)  # under the lock: what was loaded
    if store.namespace != args.namespace:
        store.close()
        raise CLIError(
            f"the store at {root} holds namespace {store.namespace!r}, "
            f"not {args.namespace!r}: use one directory per namespace"
        )
    if not saved:
        return ReMindRAG(llm=llm, embeddings=embeddings, index_config=index_cfg, store=store)
    engine = ReMindRAG.load(root, llm=llm, embeddings=embeddings, store=store)
    engine.change_fields(on_extraction_error=index_cfg.on_extraction_error)
    return engine


def save_engine(
    engine: Any, args: argparse.Namespace, *, close: bool = True, save: bool = True
) -> None:
    """Persist what a command changed (PostgreSQL writes through; a directory is saved, then
    its lock released unless ``close=False``: ``remindrag index`` saves after each batch);
    ``save=False``: only what the CLI remembers is written (the store was saved already)."""
    from ..core.store import SettingsStore

    embeddings = getattr(args, "embeddings", None) or _settings(args, engine).get("embeddings")
    if _is_dsn(args):
        if embeddings and isinstance(engine.store, SettingsStore):
            engine.store.update_settings({"embeddings": embeddings})
        return
    from ..core.persist import write_checked_json

    if save:
        engine.save(args.store)
    if embeddings:
        write_checked_json(Path(args.store) / CLI_FILE, {"embeddings": embeddings})
    if close:
        engine.store.close()  # the directory lock: the next command may go
