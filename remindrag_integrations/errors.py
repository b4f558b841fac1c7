"""Every error the library raises (each a :class:`ReMindError`) and its deprecation warning.

``from remindrag_integrations.errors import StoreLockedError``. The package's top level keeps
only :class:`ReMindError` and the few errors an application catches; the others are here.
"""

from __future__ import annotations

from .core.errors import (
    ConfigError,
    EmbedderMismatchError,
    EmbeddingError,
    ExtractionError,
    InvalidArgumentError,
    InvalidDocumentError,
    InvalidQueryError,
    InvalidTeachPairError,
    LLMError,
    LLMOutputError,
    LLMTimeoutError,
    NotCopyableError,
    NoTraceError,
    ReMindDeprecationWarning,
    ReMindError,
    StoreConflictError,
    StoreCorruptError,
    StoreError,
    StoreExistsError,
    StoreLockedError,
    StoreNotFoundError,
    UnknownNodeError,
    UnknownTraceError,
)

__all__ = [
    "ConfigError",
    "EmbedderMismatchError",
    "EmbeddingError",
    "ExtractionError",
    "InvalidArgumentError",
    "InvalidDocumentError",
    "InvalidQueryError",
    "InvalidTeachPairError",
    "LLMError",
    "LLMOutputError",
    "LLMTimeoutError",
    "NoTraceError",
    "NotCopyableError",
    "ReMindDeprecationWarning",
    "ReMindError",
    "StoreConflictError",
    "StoreCorruptError",
    "StoreError",
    "StoreExistsError",
    "StoreLockedError",
    "StoreNotFoundError",
    "UnknownNodeError",
    "UnknownTraceError",
]
