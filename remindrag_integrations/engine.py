"""``ReMindRAG``: the framework-free engine users build, and its default wiring.

The method is :class:`~.core.engine.Engine`, which works with built parts. This layer picks
and builds them from what a user passes: any LLM (:func:`~.adapters.llm.as_chat_llm`), an
embedding model or its name, the packaged MiniLM when none is given
(:func:`~.adapters.embeddings.as_embedder`), a store, a saved folder or a ``postgresql://``
DSN, an embedded store when none is given (:func:`~.stores.open_store`); and it saves and
loads an engine with the record of the embedder that built it
(:mod:`~.adapters.embedder_record`).

``store="PATH"`` is the store in that folder, like Chroma's ``persist_directory``: the
folder is made when missing, a saved engine there is opened with its configuration and
embedder record, and every write (insert, delete, memorize, feedback, teach, the memory
admin) is saved there before the call returns, once per call and only when something
changed. A retrieval while it holds no documents raises :class:`StoreEmptyError` (a mistyped
path must not look like an empty knowledge base). ``ReMindRAG.load(PATH)`` is the strict
open: no such saved engine is a :class:`StoreNotFoundError`; what it loads is a copy kept
in memory until :meth:`ReMindRAG.save`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from .adapters import embedder_record
from .adapters.embeddings import as_embedder, identity_of
from .adapters.llm import as_chat_llm
from .core import arguments, persist
from .core import progress as progress_arg
from .core.config import IndexConfig, RetrievalConfig
from .core.engine import Engine, checked_options
from .core.errors import (
    ConfigError,
    EmbeddingError,
    InvalidArgumentError,
    StoreEmptyError,
    StoreError,
    StoreNotFoundError,
)
from .core.memory.teach import TeachReport
from .core.persist import ENGINE_FILE, check_folder
from .core.prompts import Prompts
from .core.protocols import ChatLLM
from .core.store import GraphStore
from .core.types import DeleteReport, IndexReport, MemoryWrite
from .stores import (
    InMemoryGraphStore,
    check_store_argument,
    generations,
    is_postgres_dsn,
    open_store,
)

log = logging.getLogger(__name__)


def folder_of(store: Any) -> Path | None:
    """The folder a ``store=`` argument names (``~`` expanded, resolved), or None for a
    store object, a DSN or None."""
    if isinstance(store, (str, os.PathLike)) and not is_postgres_dsn(store):
        arguments.path(store, "store")
        return Path(store).expanduser().resolve()
    return None


def saved_engine(root: Path) -> bool:
    """True when ``root`` holds a saved engine's ``engine.json`` (not one that a first save
    which did not finish left: :func:`~.stores.generations.unfinished`)."""
    return (root / ENGINE_FILE).exists() and not generations.unfinished(root)


def _make_folder(root: Path) -> bool:
    """Make ``root`` for a store (True when it was missing); a file or a folder of other files
    is refused now, before any work would be lost to a refused save."""
    if generations.holds_data(root):
        return False
    check_folder(root, generations.own_name)
    created = not root.exists()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot make the store folder {root}: {exc.strerror or exc}; give a folder you "
            "can write to"
        ) from exc
    return created


def split_config(fields: dict[str, Any]) -> tuple[IndexConfig, RetrievalConfig]:
    """Route flat keyword arguments (``k=3, chunk_tokens=500``) to :class:`IndexConfig` /
    :class:`RetrievalConfig` fields; an unknown name is a :class:`ConfigError`."""
    index_keys = {k for k in fields if IndexConfig.accepts(k)}
    unknown = {k for k in fields if k not in index_keys and not RetrievalConfig.accepts(k)}
    if unknown:
        raise ConfigError(f"unknown configuration field(s): {', '.join(sorted(unknown))}")
    return (
        IndexConfig.build(**{k: v for k, v in fields.items() if k in index_keys}),
        RetrievalConfig.build(**{k: v for k, v in fields.items() if k not in index_keys}),
    )


class _Committed:
    """``on_batch`` for an insert that saves: notes that a batch was written, then calls the
    user's ``on_batch``."""

    def __init__(self, then: Any) -> None:
        self.then, self.any = then, False

    def __call__(self, report: IndexReport) -> None:
        self.any = True
        if self.then is not None:
            self.then(report)


class ReMindRAG(Engine):
    """ReMindRAG over a graph store.

    ``llm`` is any LangChain chat model, LlamaIndex LLM, ``str -> str`` callable or
    :class:`~.core.protocols.ChatLLM`; ``None`` selects zero-token mode. ``embeddings`` is a
    sentence-transformers name or path, a LangChain / LlamaIndex embedding object or an
    :class:`~.core.protocols.Embedder`; ``None`` loads the packaged all-MiniLM-L6-v2.
    ``store`` is a :class:`~.core.protocols.GraphStore`, a ``postgresql://`` DSN, or a
    folder path: the store kept in that folder, made when missing and saved after every
    write (see the module; :attr:`directory`); ``None`` makes an embedded store in memory.
    ``namespace`` selects the tenant of a DSN or folder store. ``index_config`` /
    ``retrieval_config`` are config objects or dicts of their fields (``None``: the defaults,
    or a saved engine's). An argument of a wrong type is a :class:`ConfigError` naming what
    is accepted, raised before a folder is made or a store opened.
    """

    directory: Path | None
    """The folder every write is saved to (``store="PATH"``), else None."""

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
        root, probe, created = folder_of(store), None, False
        if root is not None:
            created = _make_folder(root)
            if saved_engine(root):  # a saved engine: its embedder and config
                recorded = persist.load_embedder(root)
                embeddings, probe = embedder_record.embedder_for_record(recorded, embeddings)
                saved_index, saved_retrieval = persist.load_config(root)
                index_config = index_config or saved_index
                retrieval_config = retrieval_config or saved_retrieval
            store = root
        super().__init__(
            as_chat_llm(llm),
            as_embedder(embeddings),
            open_store(store, namespace),
            index_config,
            retrieval_config,
            max_cached_traces,
            prompts,
        )
        self.directory = root
        self._created = created  # the folder did not exist: said when a retrieval finds it empty
        self._maybe_empty = root is not None  # checked before a retrieval until documents come
        self._probe: tuple[Any, list[float] | None] = (None, None)  # embedder, fingerprint
        if probe is not None:
            self._probe = (self.embedder, probe)

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
        index_cfg, retrieval_cfg = split_config(fields)  # checked before the store is opened
        root = folder_of(store)
        saved = root is not None and saved_engine(root)
        engine = cls(
            llm=llm,
            embeddings=embeddings,
            store=store,
            index_config=None if saved else index_cfg,
            retrieval_config=None if saved else retrieval_cfg,
            namespace=namespace,
        )
        if saved:  # the saved engine's config, with the fields given here changed
            engine.change_fields(**fields)
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
        self.index_config, self.retrieval_config = index_config, retrieval_config

    def _chat_llm(self, llm: Any) -> ChatLLM | None:
        return as_chat_llm(llm)

    def _embedder_name(self) -> str:
        return identity_of(self.embedder) or type(self.embedder).__name__

    def to_networkx(self) -> Any:
        """The whole graph as a ``networkx.MultiGraph``: nodes with ``kind``, ``name`` and
        ``document``; edges keyed by id with ``kind``, ``text`` and ``memory`` (norm)."""
        from .graph_export import to_networkx  # networkx loads only when asked for

        return to_networkx(self.store)

    # --- a store kept in a folder: every write saved ------------------------------------------
    def _call(self, make: Any, query: str, llm: Any, overrides: dict) -> tuple:
        if self._maybe_empty:  # retrieve, answer and their async twins
            if not self.store.document_ids():
                how = "it did not exist and was made empty" if self._created else "it is empty"
                if self.directory is not None and generations.unfinished(self.directory):
                    how = "the first save there did not finish, so nothing was saved"
                raise StoreEmptyError(
                    f"the store at {self.directory} holds no documents ({how}): a mistyped "
                    "path? Give the folder of a saved store (ReMindRAG.load(path) refuses a "
                    "folder that holds none), or add documents first"
                )
            self._maybe_empty = False
        return super()._call(make, query, llm, overrides)

    def _save_if(self, changed: bool) -> None:
        """Save to :attr:`directory` after a write that changed something."""
        if changed and self.directory is not None:
            self.save(self.directory)

    def _insert(
        self, documents: Any, progress: Any, on_batch: Any, size: int | None
    ) -> IndexReport:
        # insert, and each batch of insert_stream: saved once, when it wrote something
        if self.directory is None:
            return super()._insert(documents, progress, on_batch, size)
        done = _Committed(on_batch)
        try:
            return super()._insert(documents, progress, done, size)
        finally:  # an interrupted insert keeps (and saves) the batches it finished
            self._save_if(done.any)

    async def ainsert(
        self, documents: Any, *, progress: Any = None, on_batch: Any = None
    ) -> IndexReport:
        import asyncio

        if self.directory is None:
            return await super().ainsert(documents, progress=progress, on_batch=on_batch)
        done = _Committed(on_batch)
        try:
            return await super().ainsert(documents, progress=progress, on_batch=done)
        finally:
            await asyncio.to_thread(self._save_if, done.any)

    def delete(self, doc_ids: Any) -> DeleteReport:
        report = super().delete(doc_ids)
        self._maybe_empty = self.directory is not None
        self._save_if(report["documents"] > 0)
        return report

    def memorize(self, *args: Any, **kwargs: Any) -> MemoryWrite:
        write = super().memorize(*args, **kwargs)
        self._save_if(write.applied)
        return write

    async def amemorize(self, *args: Any, **kwargs: Any) -> MemoryWrite:
        import asyncio

        write = await super().amemorize(*args, **kwargs)
        await asyncio.to_thread(self._save_if, write.applied)
        return write

    def feedback(self, *args: Any, **kwargs: Any) -> MemoryWrite:
        write = super().feedback(*args, **kwargs)
        self._save_if(write.applied)
        return write

    def teach(self, *args: Any, **kwargs: Any) -> TeachReport:
        report = super().teach(*args, **kwargs)
        self._save_if(report.taught > 0)
        return report

    async def ateach(self, *args: Any, **kwargs: Any) -> TeachReport:
        import asyncio

        report = await super().ateach(*args, **kwargs)
        await asyncio.to_thread(self._save_if, report.taught > 0)
        return report

    def reset_memory(self) -> int:
        n = super().reset_memory()
        self._save_if(n > 0)
        return n

    def decay_memory(self, factor: float) -> int:
        n = super().decay_memory(factor)
        self._save_if(n > 0)
        return n

    def import_memory(self, path: Any, *, skip_unknown: bool = False) -> int:
        n = super().import_memory(path, skip_unknown=skip_unknown)
        self._save_if(n > 0)
        return n

    # --- persistence ---------------------------------------------------------------------
    def save(
        self, directory: str | os.PathLike[str] | None = None, *, overwrite: bool = False
    ) -> Path:
        """Persist the store (atomically: a new generation, then one rename), the
        configuration and which embedder built it (:mod:`.adapters.embedder_record`).
        ``directory`` defaults to :attr:`directory` (``store="PATH"``; ``~`` is expanded).
        Saving again where this engine's store was loaded from or saved to updates it; a
        folder holding another store raises :class:`StoreExistsError` unless ``overwrite``
        (which replaces it, learned memory included), and a folder of other files is never
        written into. A first save killed on the way (``kill -9``, power cut, disk full)
        leaves a folder that holds no engine, which the next save takes over."""
        if directory is None:
            if self.directory is None:
                raise InvalidArgumentError(
                    "save() needs a directory path: this engine's store is not kept in a folder (store=PATH)"
                )
            directory = self.directory
        directory = Path(arguments.path(directory, "directory")).expanduser()
        used = embedder_record.record(self.embedder, self.store.dim, self._fingerprint())
        root = persist.save(
            self.store,
            self.index_config,
            self.retrieval_config,
            directory,
            used,
            overwrite=overwrite,
        )
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
        """Load what :meth:`save` wrote, with the embedder it recorded unless ``embeddings``
        is given (checked against the record). Raises :class:`StoreNotFoundError` when there
        is no such directory, when it holds no saved engine or only what a first save that
        did not finish left (save there again), :class:`StoreCorruptError` on damage.
        ``progress=True`` draws a bar of the store's load steps (a 1 M-edge store takes
        seconds: reading, the graph, the ANN and BM25 indexes, the graph matrix), a function
        ``(done, total)`` is called as each ends; ignored with a ``store`` given (it is loaded
        already)."""
        directory = Path(arguments.path(directory, "directory")).expanduser()
        progress_arg.check(progress)
        if store is None and not Path(directory).is_dir():
            raise StoreNotFoundError(f"no saved engine at {directory}: no such directory")
        if generations.unfinished(directory):
            raise generations.not_finished(directory, "saved engine")
        if store is None and not generations.holds_data(directory) and not saved_engine(directory):
            raise StoreNotFoundError(
                f"no saved engine at {directory}: the folder holds none; give the folder of a "
                "saved engine, or save one there first"
            )
        index_cfg, retrieval_cfg = persist.load_config(directory)
        recorded = persist.load_embedder(directory)
        embedder, probe = embedder_record.embedder_for_record(recorded, embeddings)
        engine = cls(
            llm=llm,
            embeddings=embedder,
            store=(
                store
                if store is not None
                else InMemoryGraphStore.load(directory, progress=progress)
            ),
            index_config=index_cfg,
            retrieval_config=retrieval_cfg,
        )
        if probe is not None:
            engine._probe = (engine.embedder, probe)
        return engine
