"""The typed errors the library raises, every one a :class:`ReMindError`, and its one warning
class. This module is the only place they are defined; users import them from
``remindrag_integrations.errors`` (the top level keeps the few an application catches)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path


class ReMindError(Exception):
    """Base class of every error this library raises on purpose."""


class ConfigError(ReMindError, ValueError):
    """A configuration value is out of range or inconsistent."""


class InvalidDocumentError(ReMindError, ValueError):
    """A document cannot be indexed (empty text, bad id, wrong type)."""


class DocumentIdentityError(InvalidDocumentError):
    """A document given without an id or a source (named by its content) whose passages
    overlap those of a stored document also named by its content: an edit of a document
    without an id cannot be told from a new one, so nothing is written. ``new`` and ``stored``
    name the documents; give documents ids or sources, or delete the old version first."""

    def __init__(self, message: str, new: str = "", stored: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.new, self.stored = new, stored


class JsonlLineError(InvalidDocumentError):
    """A line of a JSONL file of documents that is no document (not JSON, not an object, no
    string ``text``, not UTF-8). ``path`` and ``line`` (1-based) say where; the batches
    committed before it stay, so fixing that line and running the same command again
    continues."""

    def __init__(self, message: str, path: str = "", line: int = 0) -> None:
        super().__init__(message)
        self.path, self.line = path, line


class SourceNotFoundError(ReMindError, FileNotFoundError):
    """A file or folder of documents to index that does not exist (``remindrag index PATH``,
    :class:`~.jsonl.JsonlDocuments`)."""


class EmbedderLanguageWarning(UserWarning):
    """A question or a document mostly written in a script the embedder does not read (the
    packaged all-MiniLM-L6-v2 reads English): its scores are near chance and may pass
    ``min_score``. Said once per engine; the message names a multilingual embedder that
    works offline."""


class FilterMatchesNothingError(ConfigError):
    """A metadata filter that no stored document can pass because of a mistake in it: a key
    no document has (the close ones named), a value of a type no document holds under that
    key (``"2021"`` for integer years), a value held only in another case, a dotted path
    into nested metadata. Raised by a retrieval that the filter left empty; a filter whose
    value no document happens to hold (a tenant with no documents yet) is no mistake and
    returns nothing."""


class InvalidQueryError(ReMindError, ValueError):
    """A query that cannot be retrieved for (not a string, empty or whitespace only)."""


class LLMError(ReMindError):
    """The LLM call failed (exception from the provider)."""


class LLMTimeoutError(LLMError, TimeoutError):
    """The LLM did not answer within the configured timeout."""


class LLMOutputError(ReMindError, ValueError):
    """The LLM answered, but the reply cannot be parsed into the expected structure."""

    def __init__(self, message: str, reply: str = "") -> None:
        super().__init__(message)
        self.reply = reply


class ExtractionError(ReMindError):
    """Entity / relation extraction failed for some chunks; nothing was written."""


class UnknownNodeError(ReMindError, KeyError):
    """A node id that is not in the graph."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "unknown node"


class UnknownTraceError(ReMindError, KeyError):
    """A trace id that this engine never produced (or has forgotten)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown trace"


class NoTraceError(ReMindError, ValueError):
    """No trace id was given and none follows from the context (nothing retrieved yet, or
    several retrievals ran at once and "the last one" would be a guess)."""


class InvalidTeachPairError(ReMindError, ValueError):
    """A teach pair without a question or without any passage; nothing was written."""


class StoreError(ReMindError):
    """A graph store failed to read or write."""


class BulkLoadError(StoreError):
    """A bulk load into PostgreSQL failed (the message names the phase: COPY, an index build,
    a foreign key check, ...). The batch's transaction was rolled back: nothing of it was
    written, and the indexes and constraints it had dropped are back."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """There is no saved engine where one was to be loaded."""


class StoreEmptyError(StoreNotFoundError):
    """A retrieval from a store named by its folder (``store="PATH"``) that holds no
    documents: a mistyped path looks like an empty knowledge base, so it is refused. Add
    documents first, or give the folder of a saved store (``ReMindRAG.load(PATH)`` refuses a
    folder that holds none)."""


class StoreCorruptError(StoreError):
    """A persisted store is damaged (missing file, bad checksum, bad format)."""


class StoreLockedError(StoreError):
    """Another writer holds the store directory's lock (retry later, or wait for it)."""


class StoreConflictError(StoreError):
    """The store directory was saved by another writer since this store was loaded from it:
    saving would lose that writer's changes. Load again, re-apply, save."""


class StoreExistsError(StoreError, FileExistsError):
    """Saving would replace something: the folder holds a saved store this one was not loaded
    from (and its learned memory; pass ``overwrite=True`` to replace it), or files that are
    not a store (choose a new or empty folder)."""


class InvalidArgumentError(ReMindError, ValueError, TypeError):
    """A public method got an argument of the wrong type or out of range."""


class EmbeddingError(ReMindError):
    """The embedder returned something unusable (wrong shape, NaN, wrong dimension)."""


class EmbedderMismatchError(EmbeddingError, ConfigError):
    """A saved store is loaded with another embedder than it was built with (another class,
    model, dimension, or vectors that differ on a fixed probe text)."""


class NotCopyableError(ReMindError, TypeError):
    """An engine (or a retriever holding one) was pickled or copied: it holds loaded models,
    a store and locks. Share the one object (it is thread-safe), or ``save`` it and ``load``
    it where it is needed."""


class EmptyCorpusWarning(UserWarning):
    """A retriever was built from no documents over a store that holds none: it would answer
    ``[]`` to every question. Usually a loader whose glob matched no file, or a list filtered
    to nothing; silence it (``warnings.simplefilter("ignore", EmptyCorpusWarning)``) where an
    empty start is meant."""


# frames in these folders are the library's (or pydantic's, which validates a config): a
# warning names the first frame outside them, the user's line
_INSIDE = str(Path(__file__).resolve().parents[1])


def warn_user(message: str, category: type[Warning]) -> None:
    """Warn, the warning pointing at the first line outside this library: the user's."""
    import pydantic

    # the library, pydantic, and the import machinery (a module may warn as it is imported)
    inside = (_INSIDE, str(Path(pydantic.__file__).resolve().parent), "<frozen importlib")
    frame, level = sys._getframe(0), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


__all__ = [
    "BulkLoadError",
    "ConfigError",
    "DocumentIdentityError",
    "EmbedderMismatchError",
    "EmbeddingError",
    "EmbedderLanguageWarning",
    "EmptyCorpusWarning",
    "ExtractionError",
    "FilterMatchesNothingError",
    "InvalidArgumentError",
    "InvalidDocumentError",
    "InvalidQueryError",
    "InvalidTeachPairError",
    "JsonlLineError",
    "LLMError",
    "LLMOutputError",
    "LLMTimeoutError",
    "NoTraceError",
    "NotCopyableError",
    "ReMindError",
    "SourceNotFoundError",
    "StoreConflictError",
    "StoreCorruptError",
    "StoreEmptyError",
    "StoreError",
    "StoreExistsError",
    "StoreLockedError",
    "StoreNotFoundError",
    "UnknownNodeError",
    "UnknownTraceError",
]
