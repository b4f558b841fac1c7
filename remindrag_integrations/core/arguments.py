"""Checks of the arguments of the public API, so a mistake is a typed error raised before
anything is written (a string where a list of ids belongs would otherwise be iterated
character by character; ``helpful="no"`` would count as a thumbs-up)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from typing import Any

from .errors import InvalidArgumentError, InvalidDocumentError, InvalidQueryError
from .indexing import describe
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
    """A list (any iterable) of items: not one string, not None."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{what} must be a list, got {type(value).__name__}")
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


def storable(text: str) -> bool:
    """True when every store can keep ``text``: no NUL character, no lone surrogate."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def query(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidQueryError(f"the query must be a non-empty string, got {value!r}")
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
