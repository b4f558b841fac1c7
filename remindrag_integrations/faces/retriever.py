"""``ReMindRetriever``: one object that is a native LangChain *and* LlamaIndex retriever.

It composes the two faces over a :class:`~.engine.ReMindRAG` engine: conversions live in
:mod:`.langchain.convert` and :mod:`.llama_index.convert`, the post-answer memory hooks in
:mod:`.langchain.callbacks` and :mod:`.llama_index.events`; everything else is delegation.
"""

from __future__ import annotations

import asyncio
import logging
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
from langchain_core.embeddings import Embeddings
from langchain_core.indexing import DocumentIndex, UpsertResponse
from langchain_core.vectorstores import VectorStore
from llama_index.core.retrievers import BaseRetriever as LIBaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from llama_index.core.storage.docstore.types import RefDocInfo
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from ..adapters.llm import LangChainLLM
from ..core import arguments, filters
from ..core.errors import (
    ConfigError,
    EmptyCorpusWarning,
    InvalidArgumentError,
    NoTraceError,
    StoreCorruptError,
    StoreNotFoundError,
    warn_user,
)
from ..core.memory.teach import TeachReport
from ..core.observe import Observer
from ..core.types import (
    DeleteReport,
    Document,
    IndexReport,
    MemoryStats,
    MemoryWrite,
    Retrieval,
    Trace,
)
from ..engine import ReMindRAG, folder_of
from ..stores import SQLiteGraphStore, sqlite_store
from .inputs import Part, content_id, join_parts, jsonable, made_up
from .langchain.callbacks import ReMindMemoryCallback
from .langchain.convert import (
    PARENT_KEY,
    from_langchain_document,
    to_langchain_document,
    to_langchain_documents,
)
from .langchain.spans import LangChainStages
from .langchain.spans import listening as lc_listening
from .last_trace import LastTrace
from .llama_index.convert import from_llamaindex_node, to_llamaindex_node, to_llamaindex_nodes
from .llama_index.events import ReMindMemoryEventHandler
from .llama_index.spans import LlamaIndexStages, current_span
from .llama_index.spans import listening as li_listening
from .options import RetrieverOptions
from .results import NAMESPACE
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


log = logging.getLogger(__name__)

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
    return join_parts(as_engine_document(d) for d in as_engine_documents_list(items, what))


def as_engine_documents_list(items: Iterable[Any], what: str = "add_documents") -> list[Any]:
    """``items`` as a list, checked to be a list of documents (see
    :func:`as_engine_documents`), not yet converted."""
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
    return list(items)


def _stored_metadata(store: Any) -> dict[str, dict[str, Any]]:
    """Each stored document's metadata, by id, in one store call (``{}`` from a store of
    one's own without ``documents()``)."""
    documents = getattr(store, "documents", None)
    known = documents() if callable(documents) else {}
    return {
        d: entry[1]
        for d, entry in known.items()
        if isinstance(entry, tuple) and isinstance(entry[1], dict)
    }


def text_documents(
    texts: Iterable[str], metadatas: Sequence[dict] | None, ids: Sequence[str] | None, what: str
) -> list[Document]:
    """Texts (with one metadata dict and one id each, when given) as engine documents; an id
    not given is a content hash (:func:`.inputs.content_id`)."""
    if isinstance(texts, (str, bytes)):
        raise InvalidArgumentError(f"{what} takes a list of texts, not one string: {what}([text])")
    texts = list(arguments.items(texts, "texts"))
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidArgumentError(
                f"texts must hold strings, got {type(t).__name__} at {i}; for documents "
                "with ids and metadata use from_documents / add_documents"
            )
    if metadatas is not None:
        metadatas = list(arguments.items(metadatas, "metadatas (one dict per text)"))
        if len(metadatas) != len(texts):
            raise InvalidArgumentError("metadatas must have one entry per text")
    ids = arguments.id_list(ids, "ids (one id string per text)", optional=True)
    if ids is not None and len(ids) != len(texts):
        raise InvalidArgumentError("ids must have one entry per text")
    return [
        Document(
            ids[i] if ids is not None else content_id(t),
            t,
            jsonable(metadatas[i] if metadatas is not None else {}, f"text {i}"),
        )
        for i, t in enumerate(texts)
    ]


def _named(documents: Any, ids: Sequence[str] | None) -> Any:
    """``documents`` with ``ids`` (one per LangChain ``Document``) set as their ids."""
    if ids is None:
        return documents
    names = arguments.id_list(ids, "ids (one id string per document)") or []
    if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Iterable):
        return documents  # refused by as_engine_documents with the reason
    docs = list(documents)
    if len(names) != len(docs):
        raise InvalidArgumentError(
            f"ids must have one entry per document ({len(names)} ids, {len(docs)} documents)"
        )
    if not all(isinstance(d, LCDocument) for d in docs):
        raise InvalidArgumentError(
            "ids= names LangChain Documents; give other documents their ids themselves "
            "(LlamaIndex Document(id_=...), (id, text) tuples)"
        )
    return [d.model_copy(update={"id": n}) for d, n in zip(docs, names)]


def _stored_names(items: Sequence[Any]) -> list[str]:
    """The document id each input is stored under (what :meth:`ReMindRetriever.upsert`
    reports), in order, each once."""
    out = []
    for item in items:
        found = as_engine_document(item)
        name = getattr(found, "doc_id", None) or getattr(found, "id", None)
        if name is None and isinstance(found, str):
            name = content_id(found)
        if name is None and isinstance(found, tuple) and found:
            name = str(found[0])
        if name is not None:
            out.append(str(name))
    return list(dict.fromkeys(out))


def _li_query(query: Any) -> str | QueryBundle:
    """LlamaIndex's ``retrieve`` argument, checked before its instrumentation reads it (which
    raises pydantic's error for a wrong type)."""
    if isinstance(query, QueryBundle):
        return query
    return arguments.query(query)


# ---------------------------------------------------------------------------------------------
# the retriever


class StagedLLM(LangChainLLM):
    """The engine's LangChain model, its calls children of the stage that makes them
    (:class:`.langchain.spans.LangChainStages`)."""

    def __init__(self, model: Any, stages: LangChainStages) -> None:
        super().__init__(model, None)
        self.stages = stages

    def with_callbacks(self, callbacks: Any) -> LangChainLLM:
        return LangChainLLM(self.model, callbacks)

    def _config(self) -> dict[str, Any]:
        return {"callbacks": self.stages.callbacks()}


class ReMindRetriever(DocumentIndex, LIBaseRetriever):
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

    It is also a LangChain ``DocumentIndex`` (:meth:`upsert`, :meth:`get`, :meth:`delete` and
    their async twins), so ``langchain_core.indexing.index(docs, record_manager, retriever,
    cleanup=...)`` keeps it in sync with a folder; :meth:`add_texts` / :meth:`get_by_ids` are
    the vector-store names, and :meth:`as_vectorstore` a ``VectorStore`` for the
    parent-document retrievers.
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
        return cls._build(docs, "from_documents", llm, embeddings, progress, dict(options))

    @classmethod
    def _build(
        cls,
        docs: list[Any],
        what: str,
        llm: Any,
        embeddings: Any,
        progress: bool | Callable[[int, int], None],
        config: dict[str, Any],
    ) -> ReMindRetriever:
        """:meth:`from_documents` with its documents converted. No documents over a folder
        that holds no store is a :class:`StoreNotFoundError` (nothing made there); a store
        that holds none after the build (no documents given, or only empty ones) an
        :class:`EmptyCorpusWarning`. A call refused after it made a store folder removes
        it."""
        # the frameworks' names for k folded into one (two different values: ConfigError)
        mine = construction_args({k: config.pop(k) for k in _RETRIEVER_ARGS if k in config}, set())
        if "k" in mine:
            config["k"] = mine.pop("k")
        folder = folder_of(config.get("store"))
        if not docs and folder is not None and not SQLiteGraphStore.exists(folder):
            raise StoreNotFoundError(
                f"{what} got no documents, and there is no store at {folder} to open (nothing "
                "was made there): a loader whose glob matched no file, or a mistyped store "
                "path? Give documents to index, or the folder of a saved store; to start an "
                "empty store there on purpose: ReMindRetriever(engine=ReMindRAG(store=path))"
            )
        engine = ReMindRAG.from_fields(llm=llm, embeddings=embeddings, **config)
        try:
            saved = _saved_fields(engine)  # a folder store's: restored unless given here
            retriever = cls(engine=engine, **{**saved, **mine})
            if engine.directory is not None and mine:  # kept for the next open
                retriever._write_fields(engine.directory)
            if docs:
                retriever.engine.insert(docs, progress=progress)
        except BaseException:
            engine._discard_made_folder()  # only a folder this call made, still empty
            raise
        if not engine.store.document_ids():  # nothing given, or only empty documents
            where = f"the store at {folder}" if folder is not None else "a new store"
            got = f"only empty documents ({len(docs)})" if docs else "no documents"
            warn_user(
                f"{what} got {got} and {where} holds none: this retriever answers [] to "
                "every question until documents are added. Check what the loader read (a "
                "glob that matched no file? a list filtered to nothing? files it could not "
                "read?); where an empty start is meant, add_documents() later and ignore "
                "this warning",
                EmptyCorpusWarning,
            )
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
        docs = text_documents(texts, metadatas, ids, "from_texts")
        return cls._build(docs, "from_texts", llm, embeddings, progress, dict(options))

    def add_documents(
        self,
        documents: Iterable[Any],
        *,
        progress: bool | Callable[[int, int], None] = False,
        on_batch: Callable[[IndexReport], None] | None = None,
        ids: Sequence[str] | None = None,
    ) -> IndexReport:
        """Insert more documents; unchanged ones are skipped, changed ones (the same id, e.g.
        a re-loaded file's ``source``) replaced whole, whatever their number of pieces, empty
        ones skipped and identical ones indexed once (the report counts both). The pieces a
        call gives of a document are all of it, except inside :meth:`batches`, for
        LlamaIndex nodes of the stored parent version, and for children that name their
        parent by ``metadata["doc_id"]`` (the multi-vector convention): their pieces join it.
        Documents with neither id nor source are named by their content, and one that
        overlaps another such stored document is refused (:class:`DocumentIdentityError`:
        docs/retriever.md, "Document ids"). ``ids`` (one per document) names them as
        ``Document(id=...)`` does. ``progress=True`` draws a progress bar (tqdm, on
        stderr); a function ``(done, total)`` is called instead. ``on_batch(report)`` runs
        after each committed batch (see :meth:`ReMindRAG.insert`)."""
        docs = as_engine_documents(_named(documents, ids))
        return self.engine.insert(docs, progress=progress, on_batch=on_batch)

    async def aadd_documents(
        self,
        documents: Iterable[Any],
        *,
        progress: bool | Callable[[int, int], None] = False,
        on_batch: Callable[[IndexReport], None] | None = None,
        ids: Sequence[str] | None = None,
    ) -> IndexReport:
        docs = as_engine_documents(_named(documents, ids))
        return await self.engine.ainsert(docs, progress=progress, on_batch=on_batch)

    @contextmanager
    def batches(self) -> Iterator[ReMindRetriever]:
        """A block in which :meth:`add_documents` calls are one update: a document whose
        pieces come over several calls (``for batch in ...: add_documents(batch)``) is one
        version, its first call replacing the stored one, the next ones adding to it (see
        :meth:`ReMindRAG.batches`)."""
        with self.engine.batches():
            yield self

    # DeleteReport holds every key of LangChain's DeleteResponse (as required keys)
    def delete(self, ids: Iterable[str] | None = None, **kwargs: Any) -> DeleteReport:  # type: ignore[override]
        """Remove documents by the ids they were added with (a loader document's
        ``metadata["source"]`` path, spelled any way, a LlamaIndex document's ``id_`` /
        a node's ``ref_doc_id``, ``from_texts(ids=)``, the ids :meth:`upsert` reported; a
        document's id is also in each result's ``metadata["remindrag"]["doc_id"]``), every
        piece of them: their chunks, the entities only they mentioned, and those nodes' edges
        with their learned memory, except what passes to a similar passage of the same file
        that stays (the pieces ``index()`` stores one by one: docs/retriever.md). A result's
        own id (a chunk id) raises :class:`InvalidArgumentError` naming its document.
        Returns the counts removed and ``not_found``, the ids this store does not hold
        (skipped with a logged warning, as LlamaIndex's ``delete_ref_doc`` and LangChain's
        vector stores skip them; check ``not_found`` to catch a typo); the report is also
        LangChain's ``DeleteResponse``. No ids (LangChain's "delete everything" call) is an
        :class:`InvalidArgumentError`: name the documents."""
        if kwargs:
            raise InvalidArgumentError(
                f"delete takes the document ids only, not {sorted(kwargs)}: delete([id, ...])"
            )
        if ids is None:
            raise InvalidArgumentError(
                "delete needs the ids of the documents to remove (nothing was deleted); "
                "list them with document_ids()"
            )
        return self.engine.delete(ids)

    async def adelete(  # type: ignore[override]
        self, ids: Iterable[str] | None = None, **kwargs: Any
    ) -> DeleteReport:
        return await asyncio.to_thread(self.delete, ids, **kwargs)

    # --- LangChain's DocumentIndex and vector-store names --------------------------------
    def upsert(self, items: Sequence[Any], /, **kwargs: Any) -> UpsertResponse:
        """LangChain's ``DocumentIndex.upsert``: add or replace documents by id (a document
        without one is named by its source, its parent or its content, as in
        :meth:`add_documents`). Returns the stored ids of the documents given, in order,
        as ``succeeded`` (``failed`` is empty: an insert raises or writes every batch it
        reached; see :meth:`ReMindRAG.insert`)."""
        if kwargs:
            raise InvalidArgumentError(
                f"upsert takes the documents only, not {sorted(kwargs)}: upsert([Document(...)])"
            )
        docs = list(arguments.items(items, "items")) if items is not None else None
        if docs is None:
            raise InvalidArgumentError("upsert takes a list of documents, got None")
        ids = _stored_names(docs)
        self.add_documents(docs)
        return UpsertResponse(succeeded=ids, failed=[])

    async def aupsert(self, items: Sequence[Any], /, **kwargs: Any) -> UpsertResponse:
        return await asyncio.to_thread(self.upsert, items, **kwargs)

    def get(self, ids: Sequence[str], /, **kwargs: Any) -> list[LCDocument]:
        """LangChain's ``DocumentIndex.get``: the stored documents with these ids as
        ``Document`` s (``id`` = the document id, its text and metadata as stored); unknown
        ids are left out, as the interface says."""
        if kwargs:
            raise InvalidArgumentError(f"get takes the ids only, not {sorted(kwargs)}")
        return [
            LCDocument(id=d.id, page_content=d.text, metadata=dict(d.metadata))
            for d in self.engine.get_documents(ids)
        ]

    async def aget(self, ids: Sequence[str], /, **kwargs: Any) -> list[LCDocument]:
        return await asyncio.to_thread(self.get, ids, **kwargs)

    def get_by_ids(self, ids: Sequence[str], /) -> list[LCDocument]:
        """The vector-store name of :meth:`get`."""
        return self.get(ids)

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[LCDocument]:
        return await self.aget(ids)

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Sequence[dict] | None = None,
        *,
        ids: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """LangChain's ``VectorStore.add_texts``: index texts (ids default to a content hash,
        :func:`.inputs.content_id`) and return their ids."""
        if kwargs:
            raise InvalidArgumentError(
                f"add_texts takes texts, metadatas and ids, not {sorted(kwargs)}"
            )
        docs = text_documents(texts, metadatas, ids, "add_texts")
        self.engine.insert(docs)
        return [d.id for d in docs]

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: Sequence[dict] | None = None,
        *,
        ids: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        return await asyncio.to_thread(self.add_texts, texts, metadatas, ids=ids, **kwargs)

    def as_vectorstore(self, id_key: str = PARENT_KEY) -> ReMindVectorStore:
        """This retriever as a LangChain ``VectorStore``, for what takes one: LangChain's
        ``ParentDocumentRetriever(vectorstore=..., docstore=..., child_splitter=...)`` and
        ``MultiVectorRetriever(vectorstore=..., docstore=..., id_key=...)``. Its children
        name their parent by ``metadata[id_key]`` and are stored as that parent's pieces; its
        searches are this retriever's (with its memory). See
        :class:`.langchain.vectorstore.ReMindVectorStore`."""
        return ReMindVectorStore(self, id_key=id_key)

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

    def _child_llm(self, run_manager: Any, stages: LangChainStages | None = None) -> Any:
        """The engine's LangChain model, bound to the retriever run's child callbacks so its
        calls are children of the retriever run (of the stage that makes them, with
        ``stages``); ``None`` (use the engine's) otherwise."""
        llm = self.engine.llm
        if isinstance(llm, LangChainLLM) and stages is not None:
            return StagedLLM(llm.model, stages)
        if isinstance(llm, LangChainLLM) and run_manager is not None:
            return llm.with_callbacks(run_manager.get_child())
        return None

    def _run(
        self, query: str, llm: Any, kwargs: dict[str, Any], observer: Observer | None = None
    ) -> Retrieval:
        overrides, cut = self._overrides(kwargs)
        seq, r = self._last.begin(), None
        try:
            r = self.engine.retrieve(query, llm=llm, observer=observer, **overrides)
        finally:
            self._last.end(seq, r.trace_id if r is not None else None)
        return self._cut(r, cut)

    async def _arun(
        self, query: str, llm: Any, kwargs: dict[str, Any], observer: Observer | None = None
    ) -> Retrieval:
        overrides, cut = self._overrides(kwargs)
        seq, r = self._last.begin(), None
        try:
            r = await self.engine.aretrieve(query, llm=llm, observer=observer, **overrides)
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

    # Each stage a span: a LangChain child run / a LlamaIndex span per stage when a handler
    # listens (faces/langchain/spans.py, faces/llama_index/spans.py); none made otherwise.
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        stages = LangChainStages(run_manager) if lc_listening(run_manager) else None
        llm = self._child_llm(run_manager, stages)
        return self._documents(self._run(query, llm, kwargs, stages))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        stages = LangChainStages(run_manager) if lc_listening(run_manager) else None
        llm = self._child_llm(run_manager, stages)
        return self._documents(await self._arun(query, llm, kwargs, stages))

    def retrieve(self, str_or_query_bundle: str | QueryBundle) -> list[NodeWithScore]:
        """LlamaIndex's ``retrieve``: a question (a string or a ``QueryBundle``) in,
        ``NodeWithScore`` s out; anything else is an :class:`InvalidQueryError`."""
        return LIBaseRetriever.retrieve(self, _li_query(str_or_query_bundle))

    async def aretrieve(self, str_or_query_bundle: str | QueryBundle) -> list[NodeWithScore]:
        return await LIBaseRetriever.aretrieve(self, _li_query(str_or_query_bundle))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        stages = LlamaIndexStages(current_span()) if li_listening() else None
        return self._nodes(self._run(query_bundle.query_str, None, {}, stages))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        stages = LlamaIndexStages(current_span()) if li_listening() else None
        return self._nodes(await self._arun(query_bundle.query_str, None, {}, stages))

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

    # --- LlamaIndex index names ------------------------------------------------------------
    # LlamaIndex's BaseIndex names for what add_documents / delete do, with its meanings
    # (llama_index.core.indices.base.BaseIndex), and the list of stored documents.
    def document_ids(self) -> list[str]:
        """The ids of the stored documents, sorted (see :meth:`ReMindRAG.document_ids`):
        what :meth:`delete` / :meth:`delete_ref_doc` take."""
        return self.engine.document_ids()

    def insert_nodes(
        self,
        nodes: Sequence[BaseNode],
        *,
        progress: bool | Callable[[int, int], None] = False,
        on_batch: Callable[[IndexReport], None] | None = None,
    ) -> IndexReport:
        """LlamaIndex's ``insert_nodes``: add nodes (a splitter's or an ``IngestionPipeline``'s
        output) as pieces of their documents (``ref_doc_id``). Nodes of the stored version of
        a document join it (a node given again is kept once); nodes of an edited
        document (its hash changed) replace the stored version whole. Unlike LlamaIndex's
        (``None``), returns the :class:`IndexReport`. Anything but nodes is an
        :class:`InvalidArgumentError` (:meth:`add_documents` takes every kind)."""
        return self.engine.insert(
            self._nodes_in(nodes, "insert_nodes"), progress=progress, on_batch=on_batch
        )

    async def ainsert_nodes(
        self,
        nodes: Sequence[BaseNode],
        *,
        progress: bool | Callable[[int, int], None] = False,
        on_batch: Callable[[IndexReport], None] | None = None,
    ) -> IndexReport:
        docs = self._nodes_in(nodes, "ainsert_nodes")
        return await self.engine.ainsert(docs, progress=progress, on_batch=on_batch)

    @staticmethod
    def _nodes_in(nodes: Any, what: str) -> list[Any]:
        """LlamaIndex nodes as engine documents; anything else a typed error."""
        items = as_engine_documents_list(nodes, what)
        for i, node in enumerate(items):
            if not isinstance(node, BaseNode):
                raise InvalidArgumentError(
                    f"{what} takes LlamaIndex nodes (TextNode, Document), got "
                    f"{type(node).__name__} at {i}: use add_documents for other documents"
                )
        return as_engine_documents(items, what)

    def delete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = False, **delete_kwargs: Any
    ) -> DeleteReport:
        """LlamaIndex's ``delete_ref_doc``: remove the document ``ref_doc_id`` (a node's
        ``ref_doc_id``, a document's ``id_``, a loader file's path) with every node (chunk)
        of it, as :meth:`delete` does. A document stored from the nodes of a parent
        LlamaIndex named at random (``SimpleDirectoryReader`` without ``filename_as_id``) is
        kept under its file's path and found by that parent's id too. An id this store does
        not hold deletes nothing and logs a warning, as LlamaIndex does (``not_found`` in
        the returned report says so). The store is its own docstore, so
        ``delete_from_docstore`` changes nothing: the document is gone from both either way.
        Other keyword arguments are an :class:`InvalidArgumentError`."""
        return self.engine.delete(self._ref_doc(ref_doc_id, delete_from_docstore, delete_kwargs))

    async def adelete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = False, **delete_kwargs: Any
    ) -> DeleteReport:
        ids = await asyncio.to_thread(
            self._ref_doc, ref_doc_id, delete_from_docstore, delete_kwargs
        )
        return await asyncio.to_thread(self.engine.delete, ids)

    def _ref_doc(
        self, ref_doc_id: Any, delete_from_docstore: Any, extra: dict[str, Any]
    ) -> list[str]:
        """The stored documents ``delete_ref_doc(ref_doc_id)`` names (the id itself when
        none: reported not found); bad arguments a typed error."""
        if not isinstance(ref_doc_id, str) or not ref_doc_id:
            raise InvalidArgumentError(
                f"delete_ref_doc takes one document id (a string), got {ref_doc_id!r}; "
                "for several, delete([...])"
            )
        if not isinstance(delete_from_docstore, bool):
            raise InvalidArgumentError(
                f"delete_from_docstore must be True or False, got {delete_from_docstore!r}"
            )
        if extra:
            raise InvalidArgumentError(
                f"delete_ref_doc takes no {', '.join(sorted(extra))}: only ref_doc_id and "
                "delete_from_docstore"
            )
        store = self.engine.store
        if not made_up(ref_doc_id) or store.document_hash(ref_doc_id) is not None:
            return [ref_doc_id]
        # a parent LlamaIndex named at random: its nodes were stored under its file's path,
        # each keeping the parent's id (metadata["ref_doc_id"])
        found = [
            d for d, meta in _stored_metadata(store).items() if meta.get("ref_doc_id") == ref_doc_id
        ]
        if not found:
            log.warning(
                "delete_ref_doc: %s is an id LlamaIndex made up at random, and no stored "
                "document was added under it: a loader's document is kept under its file's "
                "path (metadata['file_path']; retriever.document_ids() lists them)",
                ref_doc_id,
            )
        return found or [ref_doc_id]

    def refresh_ref_docs(
        self,
        documents: Sequence[Any],
        *,
        progress: bool | Callable[[int, int], None] = False,
    ) -> list[bool]:
        """LlamaIndex's ``refresh_ref_docs``: index the documents that are new or whose
        text changed, skip the others (no embedding, no LLM call), and say which were
        indexed: ``[True, False, ...]``, one flag per document given. A document is known
        by its id (a LlamaIndex ``Document``'s ``id_``, a loader file's path; see
        :meth:`add_documents`) and compared by the hash of its text, as the engine's insert
        compares it: a change of metadata alone is no change here (LlamaIndex's hash counts
        metadata too). The pages of one file are one document: all True or all False."""
        docs, flags = self._refreshing(documents, "refresh_ref_docs")
        self.engine.insert(docs, progress=progress)
        return flags

    async def arefresh_ref_docs(
        self,
        documents: Sequence[Any],
        *,
        progress: bool | Callable[[int, int], None] = False,
    ) -> list[bool]:
        docs, flags = await asyncio.to_thread(self._refreshing, documents, "arefresh_ref_docs")
        await self.engine.ainsert(docs, progress=progress)
        return flags

    def _refreshing(self, documents: Any, what: str) -> tuple[list[Any], list[bool]]:
        """The engine documents of ``documents`` to index (the new and changed ones, by the
        insert's own plan; the others are not read again) and, for each one given, whether
        it is one of them."""
        items = as_engine_documents_list(documents, what)
        parts = [as_engine_document(d) for d in items]
        for i, part in enumerate(parts):
            if not isinstance(part, (Part, Document)):
                raise InvalidArgumentError(
                    f"{what} takes documents (LlamaIndex or LangChain documents, nodes, "
                    f"engine Documents), got {type(part).__name__} at {i}: a document needs "
                    "an id to be refreshed by"
                )
        docs = join_parts(parts)
        fresh = set(self.engine.changed_ids(docs))
        named = [p.doc_id if isinstance(p, Part) else p.id for p in parts]
        return [d for d in docs if d.id in fresh], [n in fresh for n in named]

    @property
    def ref_doc_info(self) -> dict[str, RefDocInfo]:
        """LlamaIndex's ``ref_doc_info``: each stored document's id -> its
        ``RefDocInfo``: ``node_ids``, the ids of its chunks in order (the ids a retrieval's
        nodes carry), and ``metadata``, the document's (without the library's own key)."""
        store = self.engine.store
        known = _stored_metadata(store)
        out = {}
        for doc_id in self.engine.document_ids():
            meta = known.get(doc_id, {})
            out[doc_id] = RefDocInfo(
                node_ids=[c.id for c in store.document_chunks(doc_id)],
                metadata={k: v for k, v in meta.items() if k != NAMESPACE},
            )
        return out


# ---------------------------------------------------------------------------------------------
# the retriever as a LangChain vector store


def _tagged(docs: Sequence[LCDocument], id_key: str) -> list[LCDocument]:
    """Children naming their parent by ``id_key`` as the retriever reads them (``doc_id``)."""
    if id_key == "doc_id":
        return list(docs)
    out = []
    for d in docs:
        if isinstance(d, LCDocument) and id_key in d.metadata and "doc_id" not in d.metadata:
            d = d.model_copy(update={"metadata": {**d.metadata, "doc_id": d.metadata[id_key]}})
        out.append(d)
    return out


class ReMindVectorStore(VectorStore):
    """The retriever as a LangChain ``VectorStore`` (its :meth:`ReMindRetriever.as_vectorstore`):
    what ``ParentDocumentRetriever`` and ``MultiVectorRetriever`` take (``vectorstore=``).
    Their children carry their parent's id in ``metadata[id_key]``; stored as that parent's
    pieces (added to it in one call or many), they come back from a search with that key,
    and the retriever looks the parents up in its docstore. Searches are the ReMindRAG
    retriever's, so each leaves a trace (``retriever.last_trace_id``) that
    ``retriever.memorize`` / ``feedback`` write into memory on the children's edges."""

    def __init__(self, retriever: ReMindRetriever, id_key: str = "doc_id") -> None:
        if not isinstance(id_key, str) or not id_key:
            raise InvalidArgumentError("id_key must be a non-empty metadata key, e.g. 'doc_id'")
        self.retriever = retriever
        self.id_key = id_key

    def __repr__(self) -> str:
        return f"ReMindVectorStore({self.retriever!r}, id_key={self.id_key!r})"

    @property
    def embeddings(self) -> Embeddings | None:
        return None  # the graph embeds with the engine's embedder, not a LangChain one

    def add_documents(self, documents: list[LCDocument], **kwargs: Any) -> list[str]:
        ids = kwargs.pop("ids", None)
        if kwargs:
            raise InvalidArgumentError(
                f"add_documents takes documents and ids, not {sorted(kwargs)}"
            )
        docs = _named(_tagged(list(documents), self.id_key), ids)
        return list(self.retriever.upsert(docs)["succeeded"])

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        texts = list(texts)
        if metadatas is not None and self.id_key != "doc_id":
            metadatas = [
                {**m, "doc_id": m[self.id_key]} if self.id_key in m else m for m in metadatas
            ]
        return self.retriever.add_texts(texts, metadatas, ids=ids, **kwargs)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        self.retriever.delete(ids, **kwargs)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[LCDocument]:
        return self.retriever.get(ids)

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[LCDocument]:
        """The retriever's top ``k`` for ``query`` (``filter=`` as in its ``invoke``)."""
        return self.retriever.invoke(query, k=k, **kwargs)

    def similarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[LCDocument, float]]:
        """With each passage's relevance in [0, 1] (higher is better)."""
        docs = self.similarity_search(query, k=k, **kwargs)
        return [(d, float(d.metadata["remindrag"]["score"])) for d in docs]

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[LCDocument, float]]:
        return self.similarity_search_with_score(query, k=k, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict] | None = None,
        **kwargs: Any,
    ) -> ReMindVectorStore:
        """A new graph of ``texts`` as a vector store (``embedding`` a LangChain embeddings
        object, else the packaged embedder; other keyword arguments as in
        :meth:`ReMindRetriever.from_texts`)."""
        id_key = kwargs.pop("id_key", "doc_id")
        retriever = ReMindRetriever.from_texts(texts, metadatas, embeddings=embedding, **kwargs)
        return cls(retriever, id_key=id_key)


__all__ = [
    "ReMindMemoryCallback",
    "ReMindMemoryEventHandler",
    "ReMindRetriever",
    "ReMindVectorStore",
    "as_engine_document",
    "to_langchain_document",
    "to_llamaindex_node",
]
