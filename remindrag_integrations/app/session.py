"""Opening and saving the store a command names (a directory or a PostgreSQL DSN), with what
the CLI remembers about it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..core.config import IndexConfig
from .specs import CLIError, cached, load_llm

CLI_FILE = "cli.json"


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
    if engine is not None and _is_dsn(args):
        return dict(engine.store.settings())
    path = Path(args.store) / CLI_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def open_engine(args: argparse.Namespace, create: bool = False) -> Any:
    from ..core.engine import ReMindRAG
    from ..stores import InMemoryGraphStore, open_store

    llm = cached(
        load_llm(getattr(args, "llm", "none")), getattr(args, "llm", "none"), _cache_dir(args)
    )
    index_cfg = IndexConfig(on_extraction_error=getattr(args, "on_extraction_error", "raise"))
    if _is_dsn(args):
        store: Any = open_store(args.store, namespace=args.namespace)  # PostgresGraphStore
        embeddings = getattr(args, "embeddings", None) or store.settings().get("embeddings")
        if not create and not store.counts()["documents"]:
            raise CLIError(
                f"namespace {args.namespace!r} at {args.store} is empty: "
                "run 'remindrag index PATH --store DSN' first"
            )
        return ReMindRAG(llm=llm, embeddings=embeddings, store=store, index_config=index_cfg)
    root = Path(args.store)
    embeddings = getattr(args, "embeddings", None) or _settings(args).get("embeddings")
    if (root / "engine.json").exists():
        engine = ReMindRAG.load(root, llm=llm, embeddings=embeddings)
        if engine.store.namespace != args.namespace:
            raise CLIError(
                f"the store at {root} holds namespace {engine.store.namespace!r}, "
                f"not {args.namespace!r}: use one directory per namespace"
            )
        engine.index_config = engine.index_config.with_overrides(
            on_extraction_error=index_cfg.on_extraction_error
        )
        return engine
    if not create:
        raise CLIError(f"no store at {root}: run 'remindrag index PATH --store {root}' first")
    return ReMindRAG(
        llm=llm,
        embeddings=embeddings,
        index_config=index_cfg,
        store=InMemoryGraphStore(namespace=args.namespace),
    )


def save_engine(engine: Any, args: argparse.Namespace) -> None:
    """Persist what a command changed (PostgreSQL writes through; a directory is saved)."""
    embeddings = getattr(args, "embeddings", None) or _settings(args, engine).get("embeddings")
    if _is_dsn(args):
        if embeddings:
            engine.store.update_settings({"embeddings": embeddings})
        return
    engine.save(args.store)
    if embeddings:
        (Path(args.store) / CLI_FILE).write_text(
            json.dumps({"embeddings": embeddings}), encoding="utf-8"
        )
