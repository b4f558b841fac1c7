"""``ReMindRAG``: the framework-free engine users build, and its default wiring.

The method is :class:`~.core.facade.Engine`, which works with built parts. This layer picks
and builds them from what a user passes: any LLM (:func:`~.adapters.llm.as_chat_llm`), an
embedding model or its name, the packaged MiniLM when none is given
(:func:`~.adapters.embeddings.as_embedder`), a store, a saved folder or a ``postgresql://``
DSN, an embedded store when none is given (:func:`~.stores.open_store`); and it saves and
loads an engine with the record of the embedder that built it
(:mod:`~.adapters.embedder_record`).

``store="PATH"`` is the store in that folder, like Chroma's ``persist_directory``: an
SQLite database (:mod:`~.stores.sqlite_store`) made when missing, whose every write call
(insert batch, delete, memorize, feedback, teach, the memory admin) is one transaction of the
rows it changes, committed before the call returns; other threads and processes on the same
folder write it too and each sees the others' writes by its next query. The engine's
configuration and the embedder that built the store are kept in its settings. A retrieval
while it holds no documents raises :class:`StoreEmptyError` (a mistyped path must not look
like an empty knowledge base). ``ReMindRAG.load(PATH)`` is the strict open: the same live
store, but no such store is a :class:`StoreNotFoundError`; ``engine.copy()`` is an engine
over an in-memory copy, whose writes stay in memory.
"""

from __future__ import annotations

import difflib
import logging
import os
import threading
from pathlib import Path
from typing import Any

from .adapters import embedder_record
from .adapters.embeddings import as_embedder, identity_of
from .adapters.llm import as_chat_llm
from .core import arguments, persist
from .core import progress as progress_arg
from .core.config import IndexConfig, RetrievalConfig, nearest
from .core.errors import (
    ConfigError,
    EmbeddingError,
    InvalidArgumentError,
    StoreConflictError,
    StoreEmptyError,
    StoreError,
    StoreNotFoundError,
)
from .core.facade import Engine, checked_options
from .core.persist import check_folder
from .core.prompts import Prompts
from .core.protocols import ChatLLM
from .core.store import GraphStore
from .stores import (
    InMemoryGraphStore,
    check_store_argument,
    generations,
    is_postgres_dsn,
    open_store,
    sqlite_store,
)
from .stores.sqlite_store import SQLiteGraphStore

log = logging.getLogger(__name__)


def folder_of(store: Any) -> Path | None:
    """The folder a ``store=`` argument names (``~`` expanded, resolved), or None for a
    store object, a DSN or None."""
    if isinstance(store, (str, os.PathLike)) and not is_postgres_dsn(store):
        arguments.path(store, "store")
        return Path(store).expanduser().resolve()
    return None


def _make_folder(root: Path) -> tuple[bool, Path | None]:
    """Make ``root`` for a store: whether a store is to be made there (none was), and the
    topmost folder this made (``root`` or one of its parents; None when ``root`` was there).
    A file or a folder of other files is refused now, before any work would be lost to a
    refused write, and before anything is made."""
    if SQLiteGraphStore.exists(root):
        return False, None
    check_folder(root, sqlite_store.own_name)
    top = None
    for folder in (root, *root.parents):
        if folder.exists():
            break
        top = folder
    sqlite_store.make_folder(root)
    return True, top


def _unmake_folder(root: Path, top: Path | None) -> None:
    """Remove the store an engine's construction made in ``root`` (its database files), and
    the folders it made for it (``top``: up to that one, each when left empty), when the
    construction is refused after it: a refused ``store=`` path leaves nothing behind. Files
    of any other name are kept, and the folders holding them."""
    try:
        for p in root.iterdir() if root.is_dir() else ():
            if p.is_file() and not p.is_symlink() and sqlite_store.made_name(p.name):
                p.unlink()
        if top is None:
            return
        for folder in (root, *root.parents):  # the folders this made, when left empty
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
            if folder == top:
                break
    except OSError as exc:  # left as it is, said in the log: the refusal is the error
        log.warning("could not remove the store made at %s for a refused call: %s", root, exc)


def split_config(fields: dict[str, Any]) -> tuple[IndexConfig, RetrievalConfig]:
    """Route flat keyword arguments (``k=3, chunk_tokens=500``) to :class:`IndexConfig` /
    :class:`RetrievalConfig` fields; an unknown name is a :class:`ConfigError`."""
    index_keys = {k for k in fields if IndexConfig.accepts(k)}
    unknown = {k for k in fields if k not in index_keys and not RetrievalConfig.accepts(k)}
    if unknown:
        raise ConfigError(
            "unknown configuration field(s): "
            + "; ".join(
                f"{k} ({nearest(k, IndexConfig, RetrievalConfig)})" for k in sorted(unknown)
            )
        )
    return (
        IndexConfig.build(**{k: v for k, v in fields.items() if k in index_keys}),
        RetrievalConfig.build(**{k: v for k, v in fields.items() if k not in index_keys}),
    )


class ReMindRAG(Engine):
    """ReMindRAG over a graph store.

    ``llm`` is any LangChain chat model, LlamaIndex LLM, ``str -> str`` callable or
    :class:`~.core.protocols.ChatLLM`; ``None`` selects zero-token mode. ``embeddings`` is a
    sentence-transformers name or path, a LangChain / LlamaIndex embedding object or an
    :class:`~.core.protocols.Embedder`; ``None`` loads the packaged all-MiniLM-L6-v2.
    ``store`` is a :class:`~.core.protocols.GraphStore`, a ``postgresql://`` DSN, or a
    folder path: the store kept in that folder (an SQLite database), made when missing, each
    write one transaction (see the module; :attr:`directory`); ``None`` makes an embedded
    store in memory.
    ``namespace`` selects the tenant of a DSN or folder store. ``index_config`` /
    ``retrieval_config`` are config objects or dicts of their fields (``None``: the defaults,
    or a saved engine's). An argument of a wrong type is a :class:`ConfigError` naming what
    is accepted, raised before a folder is made or a store opened. ``progress``, with a
    folder: ``True`` draws a bar of the open's steps (a large store takes seconds), a function
    ``(done, total)`` is called as each ends.
    """

    directory: Path | None
    """The folder whose store this engine writes (``store="PATH"``), else None."""
    _recorded: dict[str, Any] | None = None
    _index_config: IndexConfig
    _retrieval_config: RetrievalConfig

    @property  # type: ignore[override]
    def index_config(self) -> IndexConfig:
        return self._index_config

    @index_config.setter
    def index_config(self, value: IndexConfig) -> None:
        self._index_config = value
        self._record_settings()

    @property  # type: ignore[override]
    def retrieval_config(self) -> RetrievalConfig:
        """The retrieval configuration; setting it on a folder store's engine records it
        there (the next open has it)."""
        return self._retrieval_config

    @retrieval_config.setter
    def retrieval_config(self, value: RetrievalConfig) -> None:
        self._retrieval_config = value
        self._record_settings()

    def __init__(
        self,
        llm: Any = None,
        embeddings: Any = None,
        store: GraphStore | str | os.PathLike[str] | None = None,
        index_config: IndexConfig | None = None,
        retrieval_config: RetrievalConfig | None = None,
        max_cached_traces: int = 1000,
        prompts: Prompts | None = None,
        *,
        namespace: str = "default",
        progress: Any = None,
    ) -> None:
        # every argument checked before a folder is made or a store opened
        index_config, retrieval_config = checked_options(
            index_config, retrieval_config, max_cached_traces, prompts
        )
        if not isinstance(namespace, str) or not namespace or not arguments.storable(namespace):
            raise ConfigError(
                f"namespace must be a non-empty string (the tenant of a DSN or folder store), "
                f"got {namespace!r}"
            )
        check_store_argument(store)
        root, probe, fresh, made, saved = folder_of(store), None, False, None, None
        if root is not None:
            fresh, made = _make_folder(root)
            try:
                store = SQLiteGraphStore.open(root, namespace, progress=progress)
            except BaseException:
                if fresh:
                    _unmake_folder(root, made)
                raise
        try:
            if isinstance(store, SQLiteGraphStore) and root is not None:
                saved = store.settings().get("engine")
                if saved is not None:  # a saved engine: its embedder and config
                    recorded = persist.embedder_of(saved)
                    embeddings, probe = embedder_record.embedder_for_record(recorded, embeddings)
                    saved_index, saved_retrieval = persist.config_of(saved, root)
                    index_config = index_config or saved_index
                    retrieval_config = retrieval_config or saved_retrieval
                embeddings = as_embedder(embeddings)
            chat = as_chat_llm(llm)
        except BaseException:  # refused: the store closed, a folder this made removed
            if root is not None and isinstance(store, SQLiteGraphStore):
                store.close()
                if fresh:
                    _unmake_folder(root, made)
            raise
        super().__init__(
            chat,
            as_embedder(embeddings),
            open_store(store, namespace),
            index_config,
            retrieval_config,
            max_cached_traces,
            prompts,
        )
        self.directory = root
        # the store this engine's construction made, and the topmost folder it made for it
        self._made: tuple[bool, Path | None] = (fresh, made)
        self._created = made is not None  # said when a retrieval finds the folder empty
        self._held_documents = False  # a database's namespace was seen holding documents
        self._probe: tuple[Any, list[float] | None] = (None, None)  # embedder, fingerprint
        if probe is not None:
            self._probe = (self.embedder, probe)
        self._recorded = saved
        self._saved_to: dict[Path, int] = {}  # folders this engine saved to: their last write
        self._save_lock = threading.Lock()  # one save of this engine at a time
        self._record_settings()

    @classmethod
    def from_fields(
        cls,
        *,
        llm: Any = None,
        embeddings: Any = None,
        store: GraphStore | str | os.PathLike[str] | None = None,
        namespace: str = "default",
        **fields: Any,
    ) -> ReMindRAG:
        """An engine from flat configuration fields (``k=3``, ``chunk_tokens=500``, any
        :class:`IndexConfig` / :class:`RetrievalConfig` field), the wiring
        ``ReMindRetriever.from_documents`` uses: the fields are checked before a store is
        opened; over a folder that holds a saved engine they change its saved configuration
        (the others keep their saved values), else they change the defaults."""
        split_config(fields)  # checked before the store is opened
        engine = cls(llm=llm, embeddings=embeddings, store=store, namespace=namespace)
        if fields:  # the saved engine's config (else the defaults), the fields given changed
            try:
                engine.change_fields(**fields)
            except BaseException:
                engine._discard_made_folder()
                raise
        return engine

    def change_fields(self, **fields: Any) -> None:
        """Change the named configuration fields (flat, as :meth:`from_fields` takes them)
        and keep the others: how a saved engine opened by :meth:`from_fields` or the command
        line takes the settings given with it."""
        split_config(fields)  # an unknown name: ConfigError before anything changes
        idx = {k: v for k, v in fields.items() if IndexConfig.accepts(k)}
        index_config = self.index_config.with_overrides(**idx)
        retrieval_config = self.retrieval_config.with_overrides(
            **{k: v for k, v in fields.items() if k not in idx}
        )
        self._index_config, self._retrieval_config = index_config, retrieval_config
        self._record_settings()  # once, both changed

    def _engine_settings(self) -> dict[str, Any]:
        used = embedder_record.record(self.embedder, self.store.dim, self._fingerprint())
        return persist.engine_settings(self.index_config, self.retrieval_config, used)

    def _record_settings(self) -> None:
        """Keep the configuration and the embedder's record in a folder store's settings
        when they differ from what it holds (one small transaction)."""
        if getattr(self, "directory", None) is None or "_saved_to" not in self.__dict__:
            return  # not a folder store, or still being built (recorded at its end)
        if not isinstance(self.store, SQLiteGraphStore):
            return
        now = self._engine_settings()
        if now != self._recorded:
            try:
                self.store.update_settings({"engine": now})
            except StoreError as exc:  # a read-only folder still serves its readers
                log.warning("could not record the engine's settings at %s: %s", self.directory, exc)
                return
            self._recorded = now

    def copy(self) -> ReMindRAG:
        """An engine over an in-memory copy of this one's store (same configuration,
        embedder and LLM): its writes stay in memory; :meth:`save` keeps them."""
        store = self.store.copy() if isinstance(self.store, SQLiteGraphStore) else None
        if store is None:
            raise InvalidArgumentError("copy() copies a store kept in a folder (store=PATH)")
        engine = type(self)(
            llm=self.llm,
            embeddings=self.embedder,
            store=store,
            index_config=self.index_config,
            retrieval_config=self.retrieval_config,
            prompts=self.prompts,
        )
        return engine

    def close(self) -> None:
        """Close a folder store's database (pending traces written); idempotent."""
        close = getattr(self.store, "close", None)
        if callable(close):
            close()

    def _discard_made_folder(self) -> None:
        """After a refused build over a folder this engine made (``ReMindRetriever``'s
        ``from_documents`` failing after the engine was built): close the store and remove
        the folder, while it still holds no document (a build that committed some keeps
        them)."""
        fresh, top = self._made
        if not fresh or self.directory is None:
            return
        try:
            if self.store.document_ids():
                return
        except StoreError:
            return
        self.close()
        _unmake_folder(self.directory, top)
        self._made = (False, None)

    def _chat_llm(self, llm: Any) -> ChatLLM | None:
        return as_chat_llm(llm)

    def _embedder_name(self) -> str:
        return identity_of(self.embedder) or type(self.embedder).__name__

    def to_networkx(self) -> Any:
        """The whole graph as a ``networkx.MultiGraph``: nodes with ``kind``, ``name`` and
        ``document``; edges keyed by id with ``kind``, ``text`` and ``memory`` (norm)."""
        from .graph_export import to_networkx  # networkx loads only when asked for

        return to_networkx(self.store)

    # --- a store kept in a folder ------------------------------------------------------------
    def _call(self, make: Any, query: str, llm: Any, overrides: dict) -> tuple:
        if isinstance(self.store, SQLiteGraphStore):  # retrieve, answer and their async twins
            if not self.store.document_count():  # another process may have emptied it
                how = "it did not exist and was made empty" if self._created else "it is empty"
                raise StoreEmptyError(
                    f"the store at {self.store.root} holds no documents ({how}): a mistyped "
                    "path? Give the folder of a saved store (ReMindRAG.load(path) refuses a "
                    "folder that holds none), or add documents first"
                )
        elif not self._held_documents:  # a database's namespace (PostgreSQL)
            holds = getattr(self.store, "holds_documents", None)
            if callable(holds):
                if not holds():
                    raise self._empty_namespace()
                self._held_documents = True  # checked until it first holds one
        return super()._call(make, query, llm, overrides)

    def _empty_namespace(self) -> StoreEmptyError:
        ns = getattr(self.store, "namespace", "?")
        listed = getattr(self.store, "namespaces_with_documents", None)
        others = list(listed()) if callable(listed) else []
        close = difflib.get_close_matches(ns, others, n=3, cutoff=0.5)
        held = (
            f"; the namespaces holding documents are {others[:10]}"
            + (f" (close to {ns!r}: {close})" if close else "")
            if others
            else "; no namespace of this database holds any"
        )
        return StoreEmptyError(
            f"the namespace {ns!r} holds no documents: a mistyped namespace?{held}. Give the "
            "namespace the documents were indexed into (namespace=...), or add documents first"
        )

    # --- persistence ---------------------------------------------------------------------
    def save(
        self, directory: str | os.PathLike[str] | None = None, *, overwrite: bool = False
    ) -> Path:
        """Persist the store, the configuration and which embedder built it
        (:mod:`.adapters.embedder_record`). A folder store (``store="PATH"``) is written by
        every write already: ``save()`` (or saving to its own folder) records the current
        configuration; another ``directory`` (``~`` expanded) gets a copy of the database
        (SQLite's online backup, renamed into place: a save killed on the way leaves no
        store there). An in-memory engine's store is written there as a new database. A
        folder holding another store raises :class:`StoreExistsError` unless ``overwrite``
        (which replaces it, learned memory included), and a folder of other files is never
        written into. Saving again where this engine saved its in-memory store replaces
        that save."""
        if directory is None:
            if self.directory is None:
                raise InvalidArgumentError(
                    "save() needs a directory path: this engine's store is not kept in a folder (store=PATH)"
                )
            directory = self.directory
        directory = Path(arguments.path(directory, "directory")).expanduser()
        with self._save_lock:  # its check, write and record as one, among this engine's saves
            return self._save(directory, overwrite)

    def _save(self, directory: Path, overwrite: bool) -> Path:
        settings = {"engine": self._engine_settings()}
        target = directory.resolve()
        again = target in self._saved_to
        if again and not overwrite and sqlite_store.change_seq(target) != self._saved_to[target]:
            raise StoreConflictError(
                f"the store at {target} was written by another writer since this engine saved "
                "there: open it (ReMindRAG(store=path)) to add to it, save elsewhere, or pass "
                "overwrite=True to replace it"
            )
        if isinstance(self.store, SQLiteGraphStore):
            root = self.store.save(
                directory,
                overwrite=overwrite or again,
                beside={persist.ENGINE_FILE: persist.checked_json(settings["engine"])},
            )
            if root == self.directory:
                self._recorded = settings["engine"]
        elif isinstance(self.store, InMemoryGraphStore):
            root = sqlite_store.write_store(
                self.store, directory, settings, overwrite=overwrite or again
            )
        else:  # a database store (PostgreSQL) writes through: the configuration beside it
            root = persist.save(
                self.store,
                self.index_config,
                self.retrieval_config,
                directory,
                settings["engine"].get("embedder"),
                overwrite=overwrite,
            )
        if root != self.directory and sqlite_store.holds_database(root):
            self._saved_to[root] = sqlite_store.change_seq(root)
        log.info("saved the store to %s", root)
        return root

    def _fingerprint(self) -> list[float] | None:
        """The embedder's probe vector for the saved record: one call per embedder (kept),
        none for an embedder its name rebuilds; a provider failing now leaves it out of this
        save rather than failing the save (the next save tries again)."""
        if self._probe[0] is self.embedder:
            return self._probe[1]
        if embedder_record.by_name(self.embedder):
            return None
        try:
            probe = embedder_record.fingerprint(self.embedder)
        except EmbeddingError:
            return None
        self._probe = (self.embedder, probe)
        return probe

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike[str],
        *,
        llm: Any = None,
        embeddings: Any = None,
        store: GraphStore | str | None = None,
        progress: Any = None,
    ) -> ReMindRAG:
        """Open the store saved in ``directory``, live (as ``store=directory`` does: writes
        land in it, other processes' writes are seen), with the embedder it recorded unless
        ``embeddings`` is given (checked against the record). Raises
        :class:`StoreNotFoundError` when there is no such directory or it holds no store,
        :class:`StoreCorruptError` on damage. A folder of the older generations format is
        converted once (its files kept in ``format2-backup/``); ``progress=True`` draws a
        bar of that conversion's load steps. With ``store`` given, only the configuration is
        read from ``directory``. For an in-memory copy, ``ReMindRAG.load(path).copy()``."""
        directory = Path(arguments.path(directory, "directory")).expanduser()
        progress_arg.check(progress)
        if not directory.is_dir():
            raise StoreNotFoundError(f"no saved engine at {directory}: no such directory")
        if generations.unfinished(directory) and not sqlite_store.holds_database(directory):
            raise generations.not_finished(directory, "saved engine")
        if not SQLiteGraphStore.exists(directory):
            raise StoreNotFoundError(
                f"no saved engine at {directory}: the folder holds none; give the folder of a "
                "saved engine, or save one there first"
            )
        if store is None:
            return cls(llm=llm, embeddings=embeddings, store=directory, progress=progress)
        saved = sqlite_store.read_settings(directory).get("engine")
        if saved is None:
            raise StoreNotFoundError(f"no saved engine configuration at {directory}")
        index_cfg, retrieval_cfg = persist.config_of(saved, directory)
        embedder, probe = embedder_record.embedder_for_record(
            persist.embedder_of(saved), embeddings
        )
        engine = cls(
            llm=llm,
            embeddings=embedder,
            store=store,
            index_config=index_cfg,
            retrieval_config=retrieval_cfg,
        )
        if probe is not None:
            engine._probe = (engine.embedder, probe)
        return engine
