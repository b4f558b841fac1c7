"""ReMindRAG for LangChain and LlamaIndex: a knowledge-graph retriever that memorises the LLM's
traversals in edge vectors and replays them for similar questions.

Everything listed in ``__all__`` is importable from here; the framework faces (which import
LangChain and LlamaIndex) load only when first asked for. Of the errors, the top level keeps
:class:`ReMindError` and the ones an application catches (a bad setting, a user's query or
document it passed on, a failing LLM provider or store); every error is in :mod:`.errors`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import errors  # noqa: F401  (`remindrag_integrations.errors` after `import remindrag_integrations`)
from .core.config import (
    IndexConfig,
    MemoryConfig,
    NavigatorConfig,
    PriorConfig,
    PromptConfig,
    RetrievalConfig,
)
from .core.errors import (
    ConfigError,
    InvalidDocumentError,
    InvalidQueryError,
    LLMError,
    ReMindError,
    StoreError,
)
from .core.jsonl import JsonlDocuments
from .core.memory.teach import TeachPair, TeachReport, TeachResult
from .core.prompts import Prompts
from .core.protocols import ChatLLM, Completion, Embedder
from .core.store import GraphStore
from .core.stream import StreamProgress
from .core.types import (
    Answer,
    Chunk,
    DeleteReport,
    Document,
    IndexReport,
    MemoryStats,
    MemoryWrite,
    Piece,
    Retrieval,
    RetrievedChunk,
    Trace,
    Triple,
)
from .engine import ReMindRAG

if TYPE_CHECKING:
    from .adapters.llm import as_chat_llm
    from .faces.langchain.callbacks import ReMindMemoryCallback
    from .faces.llama_index.events import ReMindMemoryEventHandler
    from .faces.retriever import ReMindRetriever

__version__ = "0.1.0"

_LAZY = {
    "ReMindRetriever": ".faces.retriever",
    "ReMindMemoryCallback": ".faces.langchain.callbacks",
    "ReMindMemoryEventHandler": ".faces.llama_index.events",
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
    "Embedder",
    "GraphStore",
    "IndexConfig",
    "IndexReport",
    "InvalidDocumentError",
    "InvalidQueryError",
    "JsonlDocuments",
    "LLMError",
    "MemoryConfig",
    "MemoryStats",
    "MemoryWrite",
    "Piece",
    "NavigatorConfig",
    "PriorConfig",
    "PromptConfig",
    "Prompts",
    "ReMindError",
    "ReMindMemoryCallback",
    "ReMindMemoryEventHandler",
    "ReMindRAG",
    "ReMindRetriever",
    "Retrieval",
    "RetrievalConfig",
    "RetrievedChunk",
    "StoreError",
    "StreamProgress",
    "TeachPair",
    "TeachReport",
    "TeachResult",
    "Trace",
    "Triple",
    "__version__",
    "as_chat_llm",
]
