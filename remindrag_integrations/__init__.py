"""ReMindRAG for LangChain and LlamaIndex: a knowledge-graph retriever that memorises the LLM's
traversals in edge vectors and replays them for similar questions.

Everything listed in ``__all__`` is importable from here; the framework faces (which import
LangChain and LlamaIndex) load only when first asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.config import IndexConfig, RetrievalConfig
from .core.memory.teach import InvalidTeachPairError, TeachPair, TeachReport, TeachResult
from .core.prompts import Prompts
from .core.protocols import ChatLLM, Completion, Embedder, GraphStore
from .core.types import (
    Answer,
    Chunk,
    ConfigError,
    DeleteReport,
    Document,
    EmbedderMismatchError,
    EmbeddingError,
    ExtractionError,
    IndexReport,
    InvalidArgumentError,
    InvalidDocumentError,
    InvalidQueryError,
    LLMError,
    LLMOutputError,
    LLMTimeoutError,
    MemoryStats,
    MemoryWrite,
    NotCopyableError,
    ReMindError,
    Retrieval,
    RetrievedChunk,
    StoreConflictError,
    StoreCorruptError,
    StoreError,
    StoreExistsError,
    StoreLockedError,
    StoreNotFoundError,
    Trace,
    Triple,
    UnknownNodeError,
    UnknownTraceError,
)
from .engine import ReMindRAG

if TYPE_CHECKING:
    from .adapters.llm import as_chat_llm
    from .langchain.callbacks import ReMindMemoryCallback
    from .llama_index.events import ReMindMemoryEventHandler
    from .retriever import ReMindRetriever

__version__ = "0.1.0"

_LAZY = {
    "ReMindRetriever": ".retriever",
    "ReMindMemoryCallback": ".langchain.callbacks",
    "ReMindMemoryEventHandler": ".llama_index.events",
    "as_chat_llm": ".adapters.llm",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Answer",
    "ChatLLM",
    "Chunk",
    "Completion",
    "ConfigError",
    "DeleteReport",
    "Document",
    "EmbedderMismatchError",
    "EmbeddingError",
    "Embedder",
    "ExtractionError",
    "GraphStore",
    "IndexConfig",
    "IndexReport",
    "InvalidArgumentError",
    "InvalidDocumentError",
    "InvalidQueryError",
    "InvalidTeachPairError",
    "LLMError",
    "LLMOutputError",
    "LLMTimeoutError",
    "MemoryStats",
    "MemoryWrite",
    "NotCopyableError",
    "Prompts",
    "ReMindError",
    "ReMindMemoryCallback",
    "ReMindMemoryEventHandler",
    "ReMindRAG",
    "ReMindRetriever",
    "Retrieval",
    "RetrievalConfig",
    "RetrievedChunk",
    "StoreConflictError",
    "StoreCorruptError",
    "StoreExistsError",
    "StoreError",
    "StoreLockedError",
    "StoreNotFoundError",
    "TeachPair",
    "TeachReport",
    "TeachResult",
    "Trace",
    "Triple",
    "UnknownNodeError",
    "UnknownTraceError",
    "__version__",
    "as_chat_llm",
]
