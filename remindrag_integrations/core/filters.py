"""Metadata filters: one small type that LangChain's ``filter={...}`` dicts and LlamaIndex's
``MetadataFilters`` both translate into.

A filter tests a *document's* metadata (every chunk carries its document's metadata). The
written form is LangChain's (Chroma / PGVector style): ``{"dept": "x"}`` is equality, an
operator dict ``{"year": {"$gte": 2020}}`` compares, ``{"$and": [...]}`` / ``{"$or": [...]}``
combine; several keys in one dict are AND-ed. Operators: ``$eq $ne $gt $gte $lt $lte $in
$nin $contains $all``. A document without the key matches only ``$ne`` / ``$nin``; a
comparison between values of different types (``"a" > 3``) is false, never an error.

List-valued metadata (``{"tags": ["faq", "billing"]}``), as MongoDB and Pinecone read it:
``$in`` holds when any of its items is among the values, ``$nin`` when none is;
``{"tags": {"$contains": "faq"}}`` when the list holds the value, ``{"$all": [...]}`` when it
holds every one of them. ``$contains`` / ``$all`` read a plain value as a list of one
(``{"dept": {"$contains": "x"}}`` is ``{"dept": "x"}``), never as a substring test.
``$eq`` / ``$ne`` compare the whole value.

How a walk honours it (docs/method.md §2 with a filter): entity nodes are shared by every document and
always allowed; an anchor or a chunk belongs to one document and is never seeded, replayed
into, offered as a move, read or dense-filled when that document fails the filter.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
OPERATORS = (*_COMPARE, "$in", "$nin", "$contains", "$all")
_LISTS = ("$in", "$nin", "$all")  # operators that take a list of plain values
_SCALAR = (str, int, float, bool)


@dataclass(frozen=True)
class Condition:
    """``metadata[key] <op> value``."""

    key: str
    op: str
    value: Any

    def test(self, metadata: Mapping[str, Any]) -> bool:
        if self.key not in metadata:
            return self.op in ("$ne", "$nin")
        have = metadata[self.key]
        if self.op in ("$in", "$nin"):
            items = have if isinstance(have, list) else (have,)
            found = any(x in self.value for x in items)
            return found if self.op == "$in" else not found
        if self.op in ("$contains", "$all"):
            items = have if isinstance(have, list) else [have]
            wanted = self.value if self.op == "$all" else (self.value,)
            return all(w in items for w in wanted)
        try:
            return bool(_COMPARE[self.op](have, self.value))
        except TypeError:
            return False

    def to_dict(self) -> dict[str, Any]:
        return {self.key: {self.op: self.value}}


@dataclass(frozen=True)
class Filter:
    """All (``any_of=False``) or any of ``parts`` must hold."""

    parts: tuple[Condition | Filter, ...]
    any_of: bool = False

    def test(self, metadata: Mapping[str, Any]) -> bool:
        results = (p.test(metadata) for p in self.parts)
        return any(results) if self.any_of else all(results)

    def to_dict(self) -> dict[str, Any]:
        if len(self.parts) == 1:  # keeps normalise() idempotent
            return self.parts[0].to_dict()
        return {"$or" if self.any_of else "$and": [p.to_dict() for p in self.parts]}


def parse(spec: Mapping[str, Any] | Filter | None) -> Filter | None:
    """A LangChain-style filter dict as a :class:`Filter` (``None`` / ``{}``: no filter).
    Raises :class:`ConfigError` for an operator or a value it cannot honour."""
    if spec is None or isinstance(spec, Filter):
        return spec
    if not isinstance(spec, Mapping):
        raise ConfigError(f"a filter is a dict like {{'dept': 'x'}}, got {type(spec).__name__}")
    parts: list[Condition | Filter] = []
    for key, value in spec.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list | tuple) or not value:
                raise ConfigError(f"{key} takes a non-empty list of filters")
            subs = [parse(v) for v in value]
            parts.append(Filter(tuple(s for s in subs if s is not None), any_of=key == "$or"))
        elif not isinstance(key, str) or key.startswith("$"):
            raise ConfigError(f"unknown filter operator {key!r} (use $and or $or at the top)")
        elif isinstance(value, Mapping):
            parts.extend(_conditions(key, value))
        else:
            parts.append(_condition(key, "$eq", value))
    return Filter(tuple(parts)) if parts else None


def _conditions(key: str, ops: Mapping[str, Any]) -> list[Condition]:
    if not ops:
        raise ConfigError(f"filter on {key!r}: empty operator dict")
    return [_condition(key, op, v) for op, v in ops.items()]


def _condition(key: str, op: str, value: Any) -> Condition:
    if op not in OPERATORS:
        raise ConfigError(
            f"filter on {key!r}: unknown operator {op!r} (supported: {', '.join(OPERATORS)})"
        )
    if op in _LISTS:
        if not isinstance(value, list | tuple | set) or not all(
            isinstance(v, _SCALAR) for v in value
        ):
            raise ConfigError(f"filter on {key!r}: {op} takes a list of plain values")
        if op == "$all" and not value:
            raise ConfigError(f"filter on {key!r}: $all takes a non-empty list")
        return Condition(key, op, tuple(value))
    if op == "$contains" and not isinstance(value, _SCALAR):
        raise ConfigError(
            f"filter on {key!r}: $contains takes one plain value (a list holds it), got "
            f"{value!r}; for several use $all (every one) or $in (any one)"
        )
    if value is not None and not isinstance(value, _SCALAR):
        raise ConfigError(f"filter on {key!r}: {op} compares with a plain value, got {value!r}")
    return Condition(key, op, value)


def normalise(spec: Mapping[str, Any] | Filter | None) -> dict[str, Any] | None:
    """The canonical dict form of a filter (validated), or ``None``: what a configuration
    stores and a trace records."""
    parsed = parse(spec)
    return parsed.to_dict() if parsed is not None else None


def both(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Two filters that must both hold (either may be ``None``)."""
    if a and b:
        return {"$and": [dict(a), dict(b)]}
    either = a or b
    return dict(either) if either else None
