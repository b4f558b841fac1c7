"""ReMindRAG for LangChain and LlamaIndex: a knowledge-graph retriever that memorises the LLM's
traversals in edge vectors and replays them for similar questions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import IndexConfig, RetrievalConfig
from .engine import ReMindRAG
from .types import (
    Answer,
    Chunk,
    ConfigError,
    Document,
    EmbeddingError,
    ExtractionError,
    IndexReport,
    InvalidDocumentError,
    InvalidQueryError,
    LLMError,
    LLMOutputError,
    LLMTimeoutError,
    MemoryStats,
    MemoryWrite,
    ReMindError,
    Retrieval,
    RetrievedChunk,
    StoreCorruptError,
    StoreError,
    Trace,
    Triple,
    UnknownNodeError,
    UnknownTraceError,
)

if TYPE_CHECKING:
    from .retriever import ReMindRetriever

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # the framework face imports langchain and llama_index: load it only when asked for
    if name in ("ReMindRetriever", "ReMindMemoryCallback", "ReMindMemoryEventHandler"):
        from . import retriever

        return getattr(retriever, name)
    raise AttributeError(name)


__all__ = [
    "Answer",
    "Chunk",
    "ConfigError",
    "Document",
    "EmbeddingError",
    "ExtractionError",
    "IndexConfig",
    "IndexReport",
    "InvalidDocumentError",
    "InvalidQueryError",
    "LLMError",
    "LLMOutputError",
    "LLMTimeoutError",
    "MemoryStats",
    "MemoryWrite",
    "ReMindError",
    "ReMindMemoryCallback",
    "ReMindMemoryEventHandler",
    "ReMindRAG",
    "ReMindRetriever",
    "Retrieval",
    "RetrievalConfig",
    "RetrievedChunk",
    "StoreCorruptError",
    "StoreError",
    "Trace",
    "Triple",
    "UnknownNodeError",
    "UnknownTraceError",
    "__version__",
]
