"""The peers: retrievers LangChain and LlamaIndex already ship, on the harness's chunks and
embedder (extra ``peers``; issue 36).

- ``li_fusion``: LlamaIndex ``QueryFusionRetriever`` over ``BM25Retriever``
  (llama-index-retrievers-bm25) and a ``VectorStoreIndex`` retriever, ``mode="reciprocal_rerank"``,
  ``num_queries=1`` (the question alone: no LLM writes extra queries);
- ``lc_ensemble``: LangChain ``EnsembleRetriever`` over ``BM25Retriever`` (langchain-community,
  rank-bm25) and an ``InMemoryVectorStore`` retriever, equal weights (weighted reciprocal rank);
- ``lc_graph``: langchain-graph-retriever's ``GraphRetriever`` over an ``InMemoryVectorStore``
  whose documents carry ``title`` and ``mentions`` (the titles of the *other* passages their
  text names), edges ``mentions -> title`` both ways, ``Eager`` traversal, ``max_depth=2``,
  :data:`GRAPH_START_K` passages from the vector search to start from (chosen on the dev sets:
  docs/benchmarks.md, "The peers").

Each is built once per knowledge base from the same :class:`~..core.types.Chunk` list the
``bm25`` baseline reads, and embeds with the same embedder as the graph (wrapped as a LangChain
``Embeddings`` / LlamaIndex ``BaseEmbedding``; the bench's :class:`~.resources.CachedEmbedder`
hands back the very vectors the graph stores, and the question's vector, embedded before the
timed call, comes from its memory). Every framework object is used as its documentation shows,
at its defaults except the settings named here (their BM25s tokenise as each ships: LlamaIndex
with English stop words and a Snowball stemmer, LangChain on white space).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from remindrag_integrations.core.errors import ReMindError
from remindrag_integrations.core.types import Chunk

PEERS = ("li_fusion", "lc_ensemble", "lc_graph")
PEER_EXTRA = "pip install 'remindrag-integrations[peers]'"
GRAPH_START_K = 4  # the dev-set sweep of docs/benchmarks.md, "The peers"
GRAPH_MAX_DEPTH = 2
ID_KEY = "chunk_id"
_WORD = re.compile(r"\w")


class PeerMissing(ReMindError, ImportError):
    """A peer's package is not installed (the message says which extra installs it)."""


def _installed(module: str) -> bool:
    import importlib.util

    try:  # a dotted name imports its parents; a missing parent raises
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _need(method: str, modules: Sequence[str]) -> None:
    missing = [m for m in modules if not _installed(m)]
    if missing:
        raise PeerMissing(f"bench method {method!r} needs {', '.join(missing)}: {PEER_EXTRA}")


REQUIRES = {
    "li_fusion": ("llama_index.core", "llama_index.retrievers.bm25"),
    "lc_ensemble": ("langchain_core", "langchain_community", "rank_bm25", "langchain_classic"),
    "lc_graph": ("langchain_core", "langchain_graph_retriever", "graph_retriever"),
}


def available(method: str) -> bool:
    """Whether ``method``'s packages are installed."""
    try:
        _need(method, REQUIRES[method])
    except PeerMissing:
        return False
    return True


# --- the harness's embedder, seen by each framework ------------------------------------------
def langchain_embeddings(embedder: Any) -> Any:
    """``embedder`` (``.embed(texts) -> array``) as a LangChain ``Embeddings``."""
    from langchain_core.embeddings import Embeddings

    class HarnessEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return np.asarray(embedder.embed(list(texts)), np.float32).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    return HarnessEmbeddings()


def llama_index_embedding(embedder: Any) -> Any:
    """``embedder`` as a LlamaIndex ``BaseEmbedding``."""
    from llama_index.core.embeddings import BaseEmbedding
    from pydantic import PrivateAttr

    class HarnessEmbedding(BaseEmbedding):
        _inner: Any = PrivateAttr()

        def __init__(self, inner: Any) -> None:
            super().__init__(model_name="remindrag-bench", embed_batch_size=256)
            self._inner = inner

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return np.asarray(self._inner.embed(list(texts)), np.float32).tolist()

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_text_embeddings([text])[0]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    return HarnessEmbedding(embedder)


# --- mentions: the titles of other passages a passage's text names ---------------------------
def chunk_title(chunk: Chunk) -> str:
    """The passage's title: its metadata's ``title``, else the chunk's first line."""
    title = chunk.metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    return chunk.text.split("\n", 1)[0].strip()


def _body(chunk: Chunk, title: str) -> str:
    """The chunk's text without its own title line (the bench puts the title first)."""
    text = chunk.text
    return text[len(title) :] if text.startswith(title) else text


def _names(body: str, title: str) -> bool:
    """``title`` occurs in ``body`` as whole words (case as written)."""
    at = body.find(title)
    while at >= 0:
        end = at + len(title)
        before = body[at - 1] if at else " "
        after = body[end] if end < len(body) else " "
        if not _WORD.match(before) and not _WORD.match(after):
            return True
        at = body.find(title, at + 1)
    return False


def mentions(chunks: Sequence[Chunk]) -> list[list[str]]:
    """For each chunk, the sorted titles of the other passages (other titles) its text names."""
    titles = [chunk_title(c) for c in chunks]
    distinct = sorted({t for t in titles if t})
    out = []
    for c, own in zip(chunks, titles):
        body = _body(c, own)
        out.append([t for t in distinct if t != own and t in body and _names(body, t)])
    return out


# --- the three peers ----------------------------------------------------------------------------
class _Peer:
    name = ""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = list(chunks)
        self.by_id = {c.id: c for c in self.chunks}

    def _back(self, ids: Sequence[str], k: int) -> list[Chunk]:
        out: list[Chunk] = []
        for i in ids:
            c = self.by_id.get(i)
            if c is not None and c not in out:
                out.append(c)
        return out[:k]


class LlamaIndexFusion(_Peer):
    """LlamaIndex's hybrid: BM25 + vector, reciprocal-rank fusion, no query generation."""

    name = "li_fusion"

    def __init__(self, chunks: Sequence[Chunk], embedder: Any) -> None:
        _need(self.name, REQUIRES[self.name])
        from llama_index.core import VectorStoreIndex
        from llama_index.core.llms import MockLLM
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
        from llama_index.core.schema import TextNode
        from llama_index.retrievers.bm25 import BM25Retriever

        super().__init__(chunks)
        nodes = [
            TextNode(
                id_=c.id,
                text=c.text,
                metadata={ID_KEY: c.id},
                excluded_embed_metadata_keys=[ID_KEY],
                excluded_llm_metadata_keys=[ID_KEY],
            )
            for c in self.chunks
        ]
        index = VectorStoreIndex(nodes, embed_model=llama_index_embedding(embedder))
        self.vector: Any = index.as_retriever(similarity_top_k=10)
        self.bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=min(10, len(nodes)))
        # num_queries=1: the fusion never asks its LLM for more queries (MockLLM, never called)
        self.fusion = QueryFusionRetriever(
            [self.vector, self.bm25],
            llm=MockLLM(),
            mode=FUSION_MODES.RECIPROCAL_RANK,  # "reciprocal_rerank"
            num_queries=1,
            similarity_top_k=10,
            use_async=False,
        )

    def retrieve(self, query: str, query_vec: np.ndarray, k: int) -> list[Chunk]:
        self.vector.similarity_top_k = k
        self.bm25.similarity_top_k = min(k, len(self.chunks))
        self.fusion.similarity_top_k = k
        found = self.fusion.retrieve(query)
        return self._back([n.node.metadata.get(ID_KEY, n.node.node_id) for n in found], k)


class LangChainEnsemble(_Peer):
    """LangChain's hybrid: BM25 + an in-memory vector store, equal weights."""

    name = "lc_ensemble"

    def __init__(self, chunks: Sequence[Chunk], embedder: Any) -> None:
        _need(self.name, REQUIRES[self.name])
        from langchain_classic.retrievers import EnsembleRetriever
        from langchain_community.retrievers import BM25Retriever
        from langchain_core.documents import Document
        from langchain_core.vectorstores import InMemoryVectorStore

        super().__init__(chunks)
        docs = [Document(page_content=c.text, metadata={ID_KEY: c.id}, id=c.id) for c in chunks]
        store = InMemoryVectorStore(embedding=langchain_embeddings(embedder))
        store.add_documents(docs, ids=[c.id for c in self.chunks])
        self.vector = store.as_retriever(search_kwargs={"k": 10})
        self.bm25 = BM25Retriever.from_documents(docs, k=10)
        self.ensemble = EnsembleRetriever(retrievers=[self.bm25, self.vector], weights=[0.5, 0.5])

    def retrieve(self, query: str, query_vec: np.ndarray, k: int) -> list[Chunk]:
        self.vector.search_kwargs = {"k": k}
        self.bm25.k = k
        found = self.ensemble.invoke(query)
        return self._back([str(d.metadata.get(ID_KEY, d.id)) for d in found], k)


class LangChainGraph(_Peer):
    """langchain-graph-retriever: vector search for ``start_k`` passages, then the passages
    they name and the passages naming them (``Eager``, ``max_depth`` hops), ``k`` in all."""

    name = "lc_graph"
    EDGES = [("mentions", "title"), ("title", "mentions")]

    def __init__(
        self,
        chunks: Sequence[Chunk],
        embedder: Any,
        start_k: int = GRAPH_START_K,
        max_depth: int = GRAPH_MAX_DEPTH,
    ) -> None:
        _need(self.name, REQUIRES[self.name])
        from graph_retriever.strategies import Eager
        from langchain_core.documents import Document
        from langchain_core.vectorstores import InMemoryVectorStore
        from langchain_graph_retriever import GraphRetriever

        super().__init__(chunks)
        self.start_k, self.max_depth = start_k, max_depth
        docs = [
            Document(
                page_content=c.text,
                metadata={ID_KEY: c.id, "title": chunk_title(c), "mentions": named},
                id=c.id,
            )
            for c, named in zip(self.chunks, mentions(self.chunks))
        ]
        store = InMemoryVectorStore(embedding=langchain_embeddings(embedder))
        store.add_documents(docs, ids=[c.id for c in self.chunks])
        self.retriever = GraphRetriever(
            store=store,
            edges=list(self.EDGES),
            strategy=Eager(select_k=10, start_k=start_k, max_depth=max_depth),
        )

    def retrieve(self, query: str, query_vec: np.ndarray, k: int) -> list[Chunk]:
        # select_k = k; the traversal's order does not depend on it, so its top 5 are the
        # five a k = 5 retriever returns (a test checks it)
        found = self.retriever.invoke(query, select_k=k, start_k=self.start_k)
        return self._back([str(d.metadata.get(ID_KEY, d.id)) for d in found], k)


BUILDERS: dict[str, Callable[[Sequence[Chunk], Any], Any]] = {
    "li_fusion": LlamaIndexFusion,
    "lc_ensemble": LangChainEnsemble,
    "lc_graph": LangChainGraph,
}


def make_peer(method: str, chunks: Sequence[Chunk], embedder: Any) -> Any:
    """The peer ``method`` (one of :data:`PEERS`) over ``chunks``; :class:`PeerMissing` when
    its packages are not installed."""
    return BUILDERS[method](chunks, embedder)
