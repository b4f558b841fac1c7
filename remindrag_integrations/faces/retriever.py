"""``ReMindRetriever``: one object that is a native LangChain *and* LlamaIndex retriever.

It composes the two faces over a :class:`~.engine.ReMindRAG` engine: conversions live in
:mod:`.langchain.convert` and :mod:`.llama_index.convert`, the post-answer memory hooks in
:mod:`.langchain.callbacks` and :mod:`.llama_index.events`; everything else is delegation.
"""

from __future__ import annotations

import os
import reprlib
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Unpack

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever as LCBaseRetriever
from llama_index.core.retrievers import BaseRetriever as LIBaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from ..adapters.llm import LangChainLLM
from ..core import arguments, filters
from ..core.errors import (
    ConfigError,
    InvalidArgumentError,
    NoTraceError,
    StoreCorruptError,
)
from ..core.memory.teach import TeachReport
from ..core.types import (
    DeleteReport,
    Document,
    IndexReport,
    MemoryStats,
    MemoryWrite,
    Retrieval,
    Trace,
)
from ..engine import ReMindRAG
from ..stores import SQLiteGraphStore, sqlite_store
from .inputs import content_id, join_parts, jsonable
from .langchain.callbacks import ReMindMemoryCallback
from .langchain.convert import (
    from_langchain_document,
    to_langchain_document,
    to_langchain_documents,
)
from .last_trace import LastTrace
from .llama_index.convert import from_llamaindex_node, to_llamaindex_node, to_llamaindex_nodes
from .llama_index.events import ReMindMemoryEventHandler
from .options import RetrieverOptions
from .search_args import call_overrides, construction_args, score_threshold


def _quiet_notebook_progress() -> None:
    """In a notebook without ipywidgets, ``tqdm.auto`` (imported later by the embedding
    libraries) warns "IProgress not found" on import and falls back to text bars; import it
    once here with that one warning silenced (text bars, no noise)."""
    if "IPython" in sys.modules and "tqdm.auto" not in sys.modules:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="IProgress not found")
            try:
                import tqdm.auto  # noqa: F401
            except ImportError:  # pragma: no cover - tqdm is optional here
                pass


_quiet_notebook_progress()
_RETRIEVER_ARGS = (
    "k",
    "filter",
    "score_threshold",
    "search_kwargs",
    "search_type",
    "similarity_top_k",
    "filters",
)


def _saved_fields(engine: ReMindRAG) -> dict[str, Any]:
    """The retriever's fields kept in a folder store's settings (``{}``: none); damaged ones
    are a :class:`StoreCorruptError` saying what to do."""
    store = engine.store
    if engine.directory is None or not isinstance(store, SQLiteGraphStore):
        return {}
    fields = store.settings().get("retriever", {})
    if not isinstance(fields, dict) or set(fields) - set(_RETRIEVER_ARGS):
        raise StoreCorruptError(
            f"the retriever settings kept at {engine.directory} are damaged ({fields!r}); "
            "save the retriever again to replace them"
        )
    return {k: v for k, v in fields.items() if v is not None}


def as_engine_document(item: Any) -> Any:
    """A LangChain ``Document`` or LlamaIndex node as the engine's :class:`Document`; anything
    else (engine ``Document``, str, ``(id, text[, metadata])``) is passed through."""
    found = from_langchain_document(item) or from_llamaindex_node(item)
    return found if found is not None else item


def as_engine_documents(items: Iterable[Any], what: str = "add_documents") -> list[Any]:
    """A list of documents as engine documents, the pieces of one document joined into one
    (:func:`.inputs.join_parts`); one document or string instead of a list, or ``None``, is an
    :class:`InvalidArgumentError`."""
    if isinstance(items, (str, bytes, Document, LCDocument, BaseNode)):
        raise InvalidArgumentError(
            f"{what} takes a list of documents, not one {type(items).__name__}: wrap it in a list"
        )
    if isinstance(items, Mapping):  # iterated, its keys would be indexed as texts
        raise InvalidArgumentError(
            f"{what} takes a list of documents, not a {type(items).__name__} (a dict is no "
            "document): pass [Document(page_content=text, metadata=...)] (LangChain), "
            "[Document(text=text, metadata=...)] (LlamaIndex) or a list of strings"
        )
    if items is None or not isinstance(items, Iterable):
        raise InvalidArgumentError(
            f"{what} takes a list of documents (LangChain Documents, LlamaIndex documents or "
            f"nodes, strings), got {type(items).__name__}; pass [] for none"
        )
    return join_parts(as_engine_document(d) for d in items)


def _li_query(query: Any) -> str | QueryBundle:
    """LlamaIndex's ``retrieve`` argument, checked before its instrumentation reads it (which
    raises pydantic's error for a wrong type)."""
    if isinstance(query, QueryBundle):
        return query
    return arguments.query(query)


# ---------------------------------------------------------------------------------------------
# the retriever


class ReMindRetriever(LCBaseRetriever, LIBaseRetriever):
    """A ReMindRAG knowledge-graph retriever for LangChain and LlamaIndex at once.

    LangChain: ``invoke`` / ``ainvoke`` / ``batch`` return ``Document`` s (``id`` = chunk id);
    ``invoke(query, k=3, filter={"dept": "x"})`` or any other :class:`RetrievalConfig` field
    overrides one call. LlamaIndex: ``retrieve`` / ``aretrieve`` return ``NodeWithScore`` s.
    The user's metadata comes back untouched; the library's own keys are under
    ``metadata["remindrag"]``, with ``score`` the passage's relevance in [0, 1] (``NodeWithScore.score``
    too; docs/retriever.md#scores). Construction also takes
    ``search_kwargs={"k", "filter", "score_threshold"}``,
    ``search_type="similarity_score_threshold"``,
    ``similarity_top_k`` and ``filters=MetadataFilters(...)``; any other argument is a
    :class:`ConfigError` (see :mod:`.search_args`). Each call leaves a trace;
    :meth:`memorize` / :meth:`feedback` write it into edge memory (or let
    :class:`ReMindMemoryCallback` / :class:`ReMindMemoryEventHandler` do it after the answer).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: ReMindRAG
    """The engine: graph store, navigator LLM (``None`` = zero-token mode), embedder."""
    k: int | None = Field(default=None, ge=1)
    """Chunks per query; ``None`` uses the engine's ``retrieval_config.k``."""
    filter: dict[str, Any] | None = None
    """A metadata filter every call of this retriever applies (AND-ed with a per-call one);
    LangChain syntax, see :mod:`.core.filters`."""
    score_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    """Drop passages whose relevance (``metadata["remindrag"]["score"]``, in [0, 1]) is below
    it, and abstain (no passage, no memory) when the best is: LangChain's
    ``search_type="similarity_score_threshold"``. ``None``: keep the ``k`` passages."""

    # LlamaIndex's BaseRetriever sets these in its __init__; declared so pydantic accepts them
    callback_manager: Any = Field(default=None, exclude=True, repr=False)
    object_map: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)
    _verbose: bool = PrivateAttr(default=False)
    _last: LastTrace = PrivateAttr(default_factory=LastTrace)

    def __init__(self, **data: Any) -> None:
        args = construction_args(data, set(type(self).model_fields))
        if "engine" not in args:
            raise ConfigError(
                "ReMindRetriever needs engine=ReMindRAG(...); or build one with "
                "ReMindRetriever.from_documents(docs), from_texts(texts) or load(path)"
            )
        try:
            super().__init__(**args)
        except ValidationError as exc:  # a typed error like every other argument mistake
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {reprlib.repr(e.get('input'))})"
                for e in exc.errors()
            )
            raise ConfigError(f"ReMindRetriever: {problems}") from None

    def model_post_init(self, context: Any, /) -> None:
        LIBaseRetriever.__init__(
            self, callback_manager=self.callback_manager, object_map=self.object_map
        )

    def __repr__(self) -> str:
        parts = [repr(self.engine)]
        if self.k is not None:
            parts.append(f"k={self.k}")
        if self.filter:
            parts.append(f"filter={self.filter!r}")
        if self.score_threshold is not None:
            parts.append(f"score_threshold={self.score_threshold}")
        return f"ReMindRetriever({', '.join(parts)})"

    def __str__(self) -> str:
        return repr(self)

    def get_prompts(self, config: Any = None) -> dict[str, Any]:  # type: ignore[override]
        """The one name both bases define. LlamaIndex calls it on its prompt sub-modules
        and expects a dict; LangChain finds a chain's prompts from its graph instead. This
        retriever has no framework prompt templates, so the answer is ``{}``."""
        return LIBaseRetriever.get_prompts(self)

    # --- construction --------------------------------------------------------------------
    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Any] = (),
        *,
        llm: Any = None,
        embeddings: Any = None,
        progress: bool | Callable[[int, int], None] = False,
        **options: Unpack[RetrieverOptions],
    ) -> ReMindRetriever:
        """Index LangChain ``Document`` s, LlamaIndex ``Document`` / ``TextNode`` s (or the
        engine's own inputs) into a new graph. ``llm`` navigates and extracts (``None``:
        zero-token mode); ``embeddings`` defaults to the packaged all-MiniLM-L6-v2. Other
        keyword arguments are :class:`IndexConfig` / :class:`RetrievalConfig` fields (``k``
        included), ``store=`` a :class:`~.protocols.GraphStore`, a ``postgresql://`` DSN or
        a folder (made when missing, every write saved there: see :class:`ReMindRAG`), and
        ``namespace=`` the tenant whose graph and memory this retriever sees. ``llm`` may
        also be a ``--llm`` spec of the command line (``"local:smollm2"``,
        ``"openai:gpt-4o-mini"``). Loader documents without an id are named by their
        ``source`` as a resolved path, and the pieces of one document (a splitter's output,
        a PDF's pages, a LlamaIndex document's nodes) are one document (see
        :func:`.inputs.join_parts`); empty ones are skipped and identical ones indexed once
        (counted in the :class:`IndexReport`). ``progress=True`` draws a
        progress bar (tqdm, on stderr) while it indexes; a function ``(done, total)`` is
        called instead. The keyword arguments are typed (:class:`.options.RetrieverOptions`),
        so an editor completes them."""
        docs = as_engine_documents(documents, "from_documents")
        config: dict[str, Any] = dict(options)
        # the frameworks' names for k folded into one (two different values: ConfigError)
        mine = construction_args({k: config.pop(k) for k in _RETRIEVER_ARGS if k in config}, set())
        if "k" in mine:
            config["k"] = mine.pop("k")
        engine = ReMindRAG.from_fields(llm=llm, embeddings=embeddings, **config)
        saved = _saved_fields(engine)  # a folder store's: restored unless given here
        retriever = cls(engine=engine, **{**saved, **mine})
        if engine.directory is not None and mine:  # kept for the next open
            retriever._write_fields(engine.directory)
        if docs:
            retriever.engine.insert(docs, progress=progress)
        return retriever

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        metadatas: Sequence[dict] | None = None,
        *,
        ids: Sequence[str] | None = None,
        llm: Any = None,
        embeddings: Any = None,
        progress: bool | Callable[[int, int], None] = False,
        **options: Unpack[RetrieverOptions],
    ) -> ReMindRetriever:
        """Like :meth:`from_documents`, from plain texts (ids default to a content hash)."""
        if isinstance(texts, (str, bytes)):
            raise InvalidArgumentError(
                "from_texts takes a list of texts, not one string: from_texts([text])"
            )
        texts = list(arguments.items(texts, "texts"))
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InvalidArgumentError(
                    f"texts must hold strings, got {type(t).__name__} at {i}; for documents "
                    "with ids and metadata use from_documents"
                )
        if metadatas is not None:
            metadatas = list(arguments.items(metadatas, "metadatas (one dict per text)"))
            if len(metadatas) != len(texts):
                raise InvalidArgumentError("metadatas must have one entry per text")
        ids = arguments.id_list(ids, "ids (one id string per text)", optional=True)
        if ids is not None and len(ids) != len(texts):
            raise InvalidArgumentError("ids must have one entry per text")
        docs = [
            Document(
                ids[i] if ids is not None else content_id(t),
                t,
                jsonable(metadatas[i] if metadatas is not None else {}, f"text {i}"),
            )
            for i, t in enumerate(texts)
        ]
        return cls.from_documents(
            docs, llm=llm, embeddings=embeddings, progress=progress, **options
        )

    def add_documents(
        self,
        documents: Iterable[Any],
        *,
        progress: bool | Callable[[int, int], None] = False,
        on_batch: Callable[[IndexReport], None] | None = None,
    ) -> IndexReport:
        """Insert more documents; unchanged ones are skipped, changed ones (the same id, e.g.
        a re-loaded file's ``source``) replaced whole, whatever their number of pieces, empty
        ones skipped and identical ones indexed once (the report counts both). The pieces a
        call gives of a document are all of it, except inside :meth:`batches` and for
        LlamaIndex nodes of the stored parent version (their pieces join it). ``progress=True`` draws a progress bar (tqdm, on
        stderr); a function ``(done, total)`` is called instead. ``on_batch(report)`` runs
        after each committed batch (see :meth:`ReMindRAG.insert`)."""
        docs = as_engine_documents(documents)
        return self.engine.insert(docs, progress=progress, on_batch=on_batch)

    async def aadd_documents(
        self,
        documents: Iterable[Any],
        *,
        progress: bool | Callable[[int, int], None] = False,
        on_batch: Callable[[IndexReport], None] | None = None,
    ) -> IndexReport:
        docs = as_engine_documents(documents)
        return await self.engine.ainsert(docs, progress=progress, on_batch=on_batch)

    @contextmanager
    def batches(self) -> Iterator[ReMindRetriever]:
        """A block in which :meth:`add_documents` calls are one update: a document whose
        pieces come over several calls (``for batch in ...: add_documents(batch)``) is one
        version, its first call replacing the stored one, the next ones adding to it (see
        :meth:`ReMindRAG.batches`)."""
        with self.engine.batches():
            yield self

    def delete(self, doc_ids: Iterable[str]) -> DeleteReport:
        """Remove documents by the ids they were added with (a loader document's
        ``metadata["source"]`` path, spelled any way, a LlamaIndex document's ``id_`` /
        a node's ``ref_doc_id``, ``from_texts(ids=)``; a document's id is also in each
        result's ``metadata["remindrag"]["doc_id"]``), every piece of them: their chunks, the
        entities only they mentioned, and those nodes' edges with their learned memory. A
        result's own id (a chunk id) raises :class:`InvalidArgumentError` naming its document.
        Returns the counts removed and ``not_found``, the ids this store does not hold
        (skipped with a logged warning, as LlamaIndex's ``delete_ref_doc`` and LangChain's
        vector stores skip them; check ``not_found`` to catch a typo)."""
        return self.engine.delete(doc_ids)

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Persist the graph, its memory and the configuration (see :meth:`load`), atomically.
        Saving where this retriever was loaded from or saved to updates that store. A folder
        holding another store raises :class:`StoreExistsError` unless ``overwrite=True``
        (which replaces it, learned memory included); a folder of other files is refused."""
        root = self.engine.save(path, overwrite=overwrite)
        self._write_fields(root)
        return root

    def _write_fields(self, root: Path) -> None:
        """The retriever's fields (k, filter, score_threshold) in the settings of the store
        saved in ``root`` (one transaction): what :meth:`load` and ``from_documents`` over
        that folder restore."""
        fields = {"k": self.k, "filter": self.filter, "score_threshold": self.score_threshold}
        store = self.engine.store
        if isinstance(store, SQLiteGraphStore) and store.root == root.resolve():
            store.update_settings({"retriever": fields})
        elif sqlite_store.holds_database(root):  # a copy saved there
            sqlite_store.write_settings(root, {"retriever": fields})
        else:  # PostgreSQL's configuration folder: beside engine.json, as before
            from ..core.persist import write_checked_json

            write_checked_json(root / "retriever.json", fields)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        llm: Any = None,
        embeddings: Any = None,
        progress: Any = None,
        **kwargs: Any,
    ) -> ReMindRetriever:
        """Load what :meth:`save` wrote. Pass the same kind of ``embeddings`` it was built
        with; ``llm`` is injected again (it is never persisted). ``progress`` as in
        :meth:`ReMindRAG.load`."""
        engine = ReMindRAG.load(path, llm=llm, embeddings=embeddings, progress=progress)
        return cls(engine=engine, **{**_saved_fields(engine), **kwargs})

    # --- retrieval -----------------------------------------------------------------------
    def _overrides(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
        """The call's config overrides and its relevance cutoff (per call, else the
        retriever's ``score_threshold``), which also makes the engine abstain below it."""
        kwargs = dict(kwargs)
        cut = score_threshold(kwargs.pop("score_threshold", None))
        cut = self.score_threshold if cut is None else cut
        kwargs = call_overrides(kwargs)
        if self.k is not None:
            kwargs.setdefault("k", self.k)
        if self.filter:
            kwargs["filter"] = filters.both(self.filter, kwargs.get("filter"))
        if cut is not None:
            floor = kwargs.get("min_score", self.engine.retrieval_config.min_score)
            kwargs["min_score"] = max(cut, floor or 0.0)
        return kwargs, cut

    @staticmethod
    def _cut(r: Retrieval, cut: float | None) -> Retrieval:
        """``r`` without the passages whose relevance is below ``cut``."""
        if cut is None:
            return r
        return replace(r, chunks=[rc for rc in r.chunks if rc.score >= cut])

    def _child_llm(self, run_manager: Any) -> Any:
        """The engine's LangChain model, bound to the retriever run's child callbacks so its
        calls are children of the retriever run; ``None`` (use the engine's) otherwise."""
        llm = self.engine.llm
        if isinstance(llm, LangChainLLM) and run_manager is not None:
            return llm.with_callbacks(run_manager.get_child())
        return None

    def _run(self, query: str, llm: Any, kwargs: dict[str, Any]) -> Retrieval:
        overrides, cut = self._overrides(kwargs)
        seq, r = self._last.begin(), None
        try:
            r = self.engine.retrieve(query, llm=llm, **overrides)
        finally:
            self._last.end(seq, r.trace_id if r is not None else None)
        return self._cut(r, cut)

    async def _arun(self, query: str, llm: Any, kwargs: dict[str, Any]) -> Retrieval:
        overrides, cut = self._overrides(kwargs)
        seq, r = self._last.begin(), None
        try:
            r = await self.engine.aretrieve(query, llm=llm, **overrides)
        finally:
            self._last.end(seq, r.trace_id if r is not None else None)
        return self._cut(r, cut)

    def search(self, query: str, **overrides: Any) -> Retrieval:
        """The engine's full result: chunks, triples and the trace (less the passages below
        ``score_threshold``)."""
        return self._run(query, None, overrides)

    async def asearch(self, query: str, **overrides: Any) -> Retrieval:
        return await self._arun(query, None, overrides)

    def _documents(self, r: Retrieval) -> list[LCDocument]:
        return to_langchain_documents(self.engine.store, r)

    def _nodes(self, r: Retrieval) -> list[NodeWithScore]:
        return to_llamaindex_nodes(self.engine.store, r)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        return self._documents(self._run(query, self._child_llm(run_manager), kwargs))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        return self._documents(await self._arun(query, self._child_llm(run_manager), kwargs))

    def retrieve(self, str_or_query_bundle: str | QueryBundle) -> list[NodeWithScore]:
        """LlamaIndex's ``retrieve``: a question (a string or a ``QueryBundle``) in,
        ``NodeWithScore`` s out; anything else is an :class:`InvalidQueryError`."""
        return LIBaseRetriever.retrieve(self, _li_query(str_or_query_bundle))

    async def aretrieve(self, str_or_query_bundle: str | QueryBundle) -> list[NodeWithScore]:
        return await LIBaseRetriever.aretrieve(self, _li_query(str_or_query_bundle))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self.search(query_bundle.query_str))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(await self.asearch(query_bundle.query_str))

    # --- memory --------------------------------------------------------------------------
    @property
    def last_trace_id(self) -> str | None:
        """The trace of this retriever's most recent retrieval. After retrievals that ran at
        once: inside each asyncio task / thread its own one, elsewhere ``None`` (pass the
        trace id: ``docs[0].metadata["remindrag"]["trace_id"]``); see :mod:`.last_trace`."""
        return self._last.current()

    def trace(self, trace_id: str | None = None) -> Trace:
        return self.engine.trace(self._trace_id(trace_id))

    def _trace_id(self, trace_id: str | None) -> str:
        """``trace_id``, else (``None``) the last retrieval's; any other non-string, or an
        empty string, is an :class:`InvalidArgumentError`."""
        if trace_id is not None:
            return arguments.trace_id(trace_id)
        tid = self.last_trace_id
        if tid is None:
            raise NoTraceError(
                "no trace id given, and 'the last retrieval' is unknown here: nothing was "
                "retrieved yet, or several retrievals ran at once; pass the trace id from the "
                "results' metadata['remindrag']['trace_id']"
            )
        return tid

    def memorize(
        self,
        trace_id: str | None = None,
        answer: str | None = None,
        supporting: Sequence[str] | None = None,
        *,
        cited: Sequence[str] | None = None,
    ) -> MemoryWrite:
        """Write one retrieval's experience into edge memory (default: the last one).
        ``supporting`` chunk / edge ids are what helped (they come back for the question
        afterwards); otherwise the chunks ``answer`` cites (``[c-…]``) and ``cited`` are the
        support, with no LLM call; with no citation the judge (LLM filter, or the zero-token
        policy) reads ``answer``. See :meth:`ReMindRAG.memorize`."""
        return self.engine.memorize(self._trace_id(trace_id), answer, supporting, cited=cited)

    async def amemorize(
        self,
        trace_id: str | None = None,
        answer: str | None = None,
        supporting: Sequence[str] | None = None,
        *,
        cited: Sequence[str] | None = None,
    ) -> MemoryWrite:
        return await self.engine.amemorize(
            self._trace_id(trace_id), answer, supporting, cited=cited
        )

    def feedback(
        self, trace_id: str | None, helpful: bool, chunk_ids: Sequence[str] | None = None
    ) -> MemoryWrite:
        """A user's thumbs up / down on a retrieval feeds the same edge memory."""
        return self.engine.feedback(self._trace_id(trace_id), helpful, chunk_ids)

    def teach(self, pairs: Iterable[Any], **kwargs: Any) -> TeachReport:
        """Teach memory known question / passage pairs (no LLM call): see
        :meth:`ReMindRAG.teach`."""
        return self.engine.teach(pairs, **kwargs)

    async def ateach(self, pairs: Iterable[Any], **kwargs: Any) -> TeachReport:
        return await self.engine.ateach(pairs, **kwargs)

    def memory_stats(self) -> MemoryStats:
        """Touched edges, memory writes applied, writes skipped."""
        return self.engine.memory_stats()

    def to_networkx(self) -> Any:
        """The whole graph as a ``networkx.MultiGraph`` (see :meth:`ReMindRAG.to_networkx`)."""
        return self.engine.to_networkx()

    def memory_callback(self) -> ReMindMemoryCallback:
        """A LangChain callback handler that memorizes after each answered question."""
        return ReMindMemoryCallback(self)

    def memory_event_handler(self) -> ReMindMemoryEventHandler:
        """The LlamaIndex event handler (attached to the root dispatcher) that memorizes after
        each query engine answer: one per retriever, so asking for it on every request hands
        back the one attached (``detach()`` removes it)."""
        return ReMindMemoryEventHandler.of(self)


__all__ = [
    "ReMindMemoryCallback",
    "ReMindMemoryEventHandler",
    "ReMindRetriever",
    "as_engine_document",
    "to_langchain_document",
    "to_llamaindex_node",
]
