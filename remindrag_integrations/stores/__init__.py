"""Graph stores: the embedded default, (extra ``postgres``) PostgreSQL + pgvector, and the
base class a new store derives from (:class:`BaseGraphStore`, see ``docs/stores.md``).

``PostgresGraphStore`` is imported lazily, so psycopg is only needed when it is used.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..core.errors import ConfigError
from . import sqlite_store as sqlite_store
from .base import BaseGraphStore, Change
from .memory_store import InMemoryGraphStore
from .sqlite_store import SQLiteGraphStore

if TYPE_CHECKING:
    from ..core.store import GraphStore
    from .postgres import PostgresGraphStore

__all__ = [
    "BaseGraphStore",
    "Change",
    "InMemoryGraphStore",
    "PostgresGraphStore",
    "SQLiteGraphStore",
    "check_store_argument",
    "is_postgres_dsn",
    "open_store",
]

_PG_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_dsn(spec: object) -> bool:
    """True for a ``postgresql://`` / ``postgres://`` connection URL."""
    return isinstance(spec, str) and spec.lower().startswith(_PG_SCHEMES)


_STORE_METHODS = ("add_graph", "counts", "document_hash", "document_ids")  # some of its own


def check_store_argument(spec: object) -> None:
    """Refuse a ``store=`` argument that is none of those :func:`open_store` takes (a
    :class:`ConfigError` naming them), before anything is opened or made."""
    if spec is None or isinstance(spec, (str, os.PathLike)):
        return
    missing = [m for m in _STORE_METHODS if not callable(getattr(spec, m, None))]
    if missing:
        raise ConfigError(
            f"store must be a graph store (InMemoryGraphStore, PostgresGraphStore or one of "
            f"your own: docs/stores.md), a postgresql:// DSN, a folder path (str or "
            f"pathlib.Path) or None, got {type(spec).__name__} (it has no "
            f"{', '.join(missing)})"
        )


def open_store(
    spec: Any = None,
    namespace: str = "default",
    *,
    lock: bool = False,
    wait: float | None = 0.0,
    **kwargs: Any,
) -> GraphStore:
    """The store a ``store=`` argument names.

    - ``None``: a fresh :class:`InMemoryGraphStore`;
    - a ``postgresql://...`` DSN: a :class:`PostgresGraphStore` (extra ``postgres``);
    - any other string or path (``~`` expanded): the live store kept there, an SQLite
      database (:class:`SQLiteGraphStore`: made when missing, converted once from the older
      generations format); ``lock`` and ``wait`` are accepted for the older callers and
      ignored (writers serialise in the database);
    - a store object: returned as it is.

    ``namespace`` selects the tenant; ``kwargs`` go to the store's constructor
    (``PostgresGraphStore``, or ``InMemoryGraphStore``: e.g. ``vectors=``, ``ann=``).
    """
    if spec is None:
        return InMemoryGraphStore(namespace=namespace, **kwargs)
    if is_postgres_dsn(spec):
        try:
            from .postgres import PostgresGraphStore
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "the PostgreSQL store needs the 'postgres' extra: "
                "pip install 'remindrag-integrations[postgres]'"
            ) from exc
        return PostgresGraphStore(spec, namespace=namespace, **kwargs)
    if isinstance(spec, (str, os.PathLike)):
        return SQLiteGraphStore.open(os.path.expanduser(spec), namespace, **kwargs)
    check_store_argument(spec)
    return spec  # already a store


def __getattr__(name: str) -> Any:
    if name == "PostgresGraphStore":
        from .postgres import PostgresGraphStore

        return PostgresGraphStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
