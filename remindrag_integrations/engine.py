"""``ReMindRAG``: the framework-free engine users build, and its default wiring.

The method is :class:`~.core.engine.Engine`, which works with built parts. This layer picks
and builds them from what a user passes: any LLM (:func:`~.adapters.llm.as_chat_llm`), an
embedding model or its name, the packaged MiniLM when none is given
(:func:`~.adapters.embeddings.as_embedder`), a store, a saved folder or a ``postgresql://``
DSN, an embedded store when none is given (:func:`~.stores.open_store`); and it saves and
loads an engine with the record of the embedder that built it
(:mod:`~.adapters.embedder_record`).
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
from .core.engine import Engine
from .core.errors import EmbeddingError, StoreNotFoundError
from .core.prompts import Prompts
from .core.protocols import ChatLLM, GraphStore
from .stores import InMemoryGraphStore, open_store

log = logging.getLogger(__name__)


class ReMindRAG(Engine):
    """ReMindRAG over a graph store.

    ``llm`` is any LangChain chat model, LlamaIndex LLM, ``str -> str`` callable or
    :class:`~.core.protocols.ChatLLM`; ``None`` selects zero-token mode. ``embeddings`` is a
    sentence-transformers name or path, a LangChain / LlamaIndex embedding object or an
    :class:`~.core.protocols.Embedder`; ``None`` loads the packaged all-MiniLM-L6-v2.
    ``store`` is a :class:`~.core.protocols.GraphStore`, a saved folder or a
    ``postgresql://`` DSN; ``None`` makes an embedded store.
    """

    def __init__(
        self,
        llm: Any = None,
        embeddings: Any = None,
        store: GraphStore | str | None = None,
        index_config: IndexConfig | None = None,
        retrieval_config: RetrievalConfig | None = None,
        max_cached_traces: int = 1000,
        prompts: Prompts | None = None,
    ) -> None:
        super().__init__(
            as_chat_llm(llm),
            as_embedder(embeddings),
            open_store(store),
            index_config,
            retrieval_config,
            max_cached_traces,
            prompts,
        )
        self._probe: tuple[Any, list[float] | None] = (None, None)  # embedder, fingerprint

    def _chat_llm(self, llm: Any) -> ChatLLM | None:
        return as_chat_llm(llm)

    def _embedder_name(self) -> str:
        return identity_of(self.embedder) or type(self.embedder).__name__

    def to_networkx(self) -> Any:
        """The whole graph as a ``networkx.MultiGraph``: nodes with ``kind``, ``name`` and
        ``document``; edges keyed by id with ``kind``, ``text`` and ``memory`` (norm)."""
        from .graph_export import to_networkx  # networkx loads only when asked for

        return to_networkx(self.store)

    # --- persistence ---------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Persist the store (atomically: a new generation, then one rename), the
        configuration and which embedder built it (:mod:`.adapters.embedder_record`).
        Saving again where this engine's store was loaded from or saved to updates it; a
        folder holding another store raises :class:`StoreExistsError` unless ``overwrite``
        (which replaces it, learned memory included), and a folder of other files is never
        written into."""
        arguments.path(directory, "directory")
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
        is no such directory, :class:`StoreCorruptError` on damage. ``progress=True`` draws
        a bar of the store's load steps (a 1 M-edge store takes seconds: reading, the graph,
        the ANN and BM25 indexes, the graph matrix), a function ``(done, total)`` is called
        as each ends; ignored with a ``store`` given (it is loaded already)."""
        arguments.path(directory, "directory")
        progress_arg.check(progress)
        if store is None and not Path(directory).is_dir():
            raise StoreNotFoundError(f"no saved engine at {directory}: no such directory")
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
