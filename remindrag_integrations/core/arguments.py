"""Checks of the arguments of the public API, so a mistake is a typed error raised before
anything is written (a string where a list of ids belongs would otherwise be iterated
character by character; ``helpful="no"`` would count as a thumbs-up)."""

from __future__ import annotations

import datetime
import json
import math
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, InvalidDocumentError, InvalidQueryError
from .indexing import describe
from .text import storable
from .types import Document


def id_list(value: Any, what: str, *, optional: bool = False) -> list[str] | None:
    """A list of id strings (any iterable of them; not one string)."""
    if value is None and optional:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{what} must be a list of ids, got {type(value).__name__}")
    ids = list(value)
    for i in ids:
        if not isinstance(i, str) or not storable(i):
            raise InvalidArgumentError(f"{what} must hold id strings, got {i!r}")
    return ids


def items(value: Any, what: str) -> Iterable[Any]:
    """A list (any iterable) of items: not one string, not None, not one dict (iterating
    it would read its keys as the items)."""
    if isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"{what} must be a list, got one {type(value).__name__}: to pass one item, wrap "
            "it in a list ([item])"
        )
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{what} must be a list, got {type(value).__name__}")
    return value


def trace_id(value: Any) -> str:
    """A trace id: a non-empty string (the ``trace_id`` of a retrieval)."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(
            "trace_id must be a non-empty string, the trace_id of a retrieval "
            f"(retrieval.trace_id, or a result's metadata['remindrag']['trace_id']), got {value!r}"
        )
    return value


def path(value: Any, what: str) -> str | os.PathLike[str]:
    """A file-system path: a string or an ``os.PathLike`` (``pathlib.Path``)."""
    if not isinstance(value, (str, os.PathLike)) or (isinstance(value, str) and not value):
        raise InvalidArgumentError(
            f"{what} must be a path (a non-empty str or pathlib.Path), got {value!r}"
        )
    return value


def flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{what} must be True or False, got {value!r}")
    return value


def count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"{what} must be a non-negative integer, got {value!r}")
    return value


def fraction(value: Any, what: str) -> float:
    """A real number in [0, 1] (not a bool, a string or NaN)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0.0 <= value <= 1.0
    ):
        raise InvalidArgumentError(f"{what} must be a number in [0, 1], got {value!r}")
    return float(value)


MAX_QUESTION_CHARS = 4096
"""The longest question (in characters) a retrieval, an answer or a teach pair takes. The
packaged embedder reads a question's first 256 tokens (about 1,000 characters of English):
past this limit a question is refused (:class:`InvalidQueryError`), never run for minutes on
text the embedder would not read."""


def query(value: Any) -> str:
    """A question as every door takes it (retrieve, answer, teach, MCP, the CLI)."""
    if not isinstance(value, str) or not value.strip():
        shown = value if not isinstance(value, str) else value[:80]
        raise InvalidQueryError(f"the query must be a non-empty string, got {shown!r}")
    if len(value) > MAX_QUESTION_CHARS:
        raise InvalidQueryError(
            f"the query is {len(value):,} characters long, over the limit of "
            f"{MAX_QUESTION_CHARS:,} (the embedder reads a question's first 256 tokens, "
            "about 1,000 characters): ask a shorter question, or search a passage's key "
            "sentence rather than the passage"
        )
    if not storable(value):
        raise InvalidQueryError("the query holds a NUL character or a lone surrogate")
    return value


def documents(docs: list[Document]) -> None:
    """Ids, texts and metadata every store can keep: no NUL, no lone surrogate, metadata
    that is JSON (str keys; str, finite numbers, bools, None, lists, dicts)."""
    for d in docs:
        name = describe(d.id, d.metadata)
        for label, text in (("id", d.id), ("text", d.text)):
            if isinstance(text, str) and not storable(text):
                raise InvalidDocumentError(
                    f"{name}: its {label} holds a NUL character or a lone surrogate"
                )
        for meta in (d.metadata, *(p.metadata for p in d.pieces)):  # a piece's metadata too
            if not isinstance(meta, dict):
                raise InvalidDocumentError(f"{name}: metadata must be a dict")
            try:
                _json_value(meta, 0)
                json.dumps(meta, allow_nan=False)
            except (TypeError, ValueError, RecursionError) as exc:
                raise InvalidDocumentError(
                    f"{name}: metadata cannot be saved ({exc}); use JSON values"
                ) from None


def json_documents(docs: list[Document]) -> list[Document]:
    """The documents with their metadata as :func:`json_metadata` converts it (a document
    whose metadata is not a dict is left for :func:`documents` to refuse)."""
    return [
        replace(
            d,
            metadata=json_metadata(d.metadata, describe(d.id, d.metadata)),
            pieces=tuple(
                replace(p, metadata=json_metadata(p.metadata, describe(d.id, p.metadata)))
                if isinstance(getattr(p, "metadata", None), dict)
                else p  # not a piece, or metadata not a dict: refused by documents()
                for p in d.pieces
            ),
        )
        if isinstance(d.metadata, dict)
        else d
        for d in docs
    ]


def json_metadata(metadata: Any, name: str = "a document") -> dict[str, Any]:
    """A document's metadata as the JSON every store keeps, the same on every path in (the
    engine's ``insert``, LangChain documents, LlamaIndex nodes, ``from_texts``, MCP):

    - str, finite int / float, bool, None, lists and dicts of them: kept;
    - ``datetime`` / ``date`` / ``time``: the ISO 8601 string (``date(2024, 5, 1)`` →
      ``"2024-05-01"``, so ``$gte`` / ``$lt`` on ISO strings compare dates);
    - ``set`` / ``frozenset``: a sorted list; a tuple: a list;
    - NumPy numbers and arrays: the Python numbers and lists they hold;
    - ``pathlib.Path`` and ``uuid.UUID``: their string;
    - anything else (``bytes``, ``Decimal``, NaN, a key that is not a string, an object) is
      an :class:`InvalidDocumentError` that names the key and what to do, never a string
      made of its ``repr``."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidDocumentError(
            f"{name}: metadata must be a dict, got {type(metadata).__name__}"
        )
    out = _plain(metadata, name, "metadata", 0)
    assert isinstance(out, dict)
    return out


_WHAT_TO_DO = {
    "bytes": "decode it to a str (value.decode()) or leave it out",
    "bytearray": "decode it to a str (value.decode()) or leave it out",
    "Decimal": "convert it to a float or a str",
    "complex": "store its real and imaginary parts as two numbers",
}


def _plain(v: Any, name: str, where: str, depth: int) -> Any:
    if depth > 50:
        raise InvalidDocumentError(f"{name}: {where} is nested too deeply (over 50 levels)")
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool) or v is None or isinstance(v, int):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise InvalidDocumentError(
                f"{name}: {where} is {v}: JSON has no NaN or infinity; use None or leave it out"
            )
        return v
    if isinstance(v, str):
        if not storable(v):
            raise InvalidDocumentError(
                f"{name}: {where} holds a NUL character or a lone surrogate; remove it"
            )
        return v
    if isinstance(v, Mapping):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise InvalidDocumentError(
                    f"{name}: {where} has the key {k!r} ({type(k).__name__}): metadata keys "
                    "are strings; use str(key)"
                )
            out[_plain(k, name, where, depth + 1)] = _plain(x, name, f"{where}[{k!r}]", depth + 1)
        return out
    if isinstance(v, (list, tuple, np.ndarray)):
        items = v.tolist() if isinstance(v, np.ndarray) else v
        return [_plain(x, name, f"{where}[{i}]", depth + 1) for i, x in enumerate(items)]
    if isinstance(v, (set, frozenset)):
        items = [_plain(x, name, f"{where} (a set)", depth + 1) for x in v]
        try:
            return sorted(items)
        except TypeError:  # mixed types: grouped by type, then in order
            return sorted(items, key=lambda x: (type(x).__name__, json.dumps(x, sort_keys=True)))
    if isinstance(v, (datetime.date, datetime.time)):  # datetime is a date
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, os.PathLike):
        path = os.fspath(v)
        if isinstance(path, str):
            return _plain(path, name, where, depth + 1)
    kind = type(v).__name__
    advice = _WHAT_TO_DO.get(kind, "convert it to a str, a number, a bool, None, a list or a dict")
    raise InvalidDocumentError(
        f"{name}: {where} is a {kind}, which metadata cannot keep (it is stored as JSON); {advice}"
    )


def _json_value(v: Any, depth: int) -> None:
    if depth > 50:
        raise ValueError("metadata nested too deeply")
    if isinstance(v, str):
        if not storable(v):
            raise ValueError("a NUL character or a lone surrogate")
    elif isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError("NaN or infinity")
    elif isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                raise TypeError(f"key {k!r} is not a string")
            _json_value(k, depth + 1)
            _json_value(x, depth + 1)
    elif isinstance(v, list):
        for x in v:
            _json_value(x, depth + 1)
    elif not (v is None or isinstance(v, (bool, int))):
        raise TypeError(f"{type(v).__name__} is not JSON")
