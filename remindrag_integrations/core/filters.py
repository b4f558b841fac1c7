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

A value no metadata can hold is refused (:class:`ConfigError`, before any store reads the
filter), not run to an empty result: NaN or infinity (metadata holds finite numbers only), a
NUL character or a lone surrogate in a key or a value, and ``$gt`` / ``$gte`` / ``$lt`` /
``$lte`` with ``None`` (``None`` has no order). An empty filter ``{}`` holds for every
document, at the top (no filter) as inside ``$and`` / ``$or``. ``$and`` / ``$or`` nest at
most :data:`MAX_DEPTH` (32) levels, checked before the filter is read (never a
``RecursionError``, in process or over MCP).

How a walk honours it (docs/method.md §2 with a filter): entity nodes are shared by every document and
always allowed; an anchor or a chunk belongs to one document and is never seeded, replayed
into, offered as a move, read or dense-filled when that document fails the filter.
"""

from __future__ import annotations

import datetime
import difflib
import math
import operator
import os
import reprlib
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ConfigError
from .text import storable

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
_ORDER = ("$gt", "$gte", "$lt", "$lte")  # operators that need an ordered value

MAX_DEPTH = 32
"""How deep ``$and`` / ``$or`` may nest: ``{"$and": [{"$or": [...]}]}`` is 2 levels."""

_REPR = reprlib.Repr()  # a value as an error shows it: short, and safe at any depth
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60


def _shown(value: Any) -> str:
    return _REPR.repr(value)


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
        if self.op in ("$eq", "$ne"):  # as MongoDB: a list equals each value it holds
            equal = have == self.value or (isinstance(have, list) and self.value in have)
            return equal if self.op == "$eq" else not equal
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
    Raises :class:`ConfigError` for an operator or a value it cannot honour, or one that
    could never match (see the module)."""
    if spec is None or isinstance(spec, Filter):
        return spec
    if not isinstance(spec, Mapping):
        raise ConfigError(f"a filter is a dict like {{'dept': 'x'}}, got {type(spec).__name__}")
    _check_depth(spec)  # before the recursion below, which it bounds
    parsed = _parse(spec)
    if parsed is not None and _levels(parsed) > MAX_DEPTH:  # its canonical form, re-read later
        raise _too_deep()
    return parsed


def _too_deep() -> ConfigError:
    return ConfigError(
        f"a filter nests $and / $or at most {MAX_DEPTH} levels deep, this one deeper: write "
        "it flatter ($and and $or take any number of filters, so an $and directly inside an "
        "$and, or an $or inside an $or, merges into it; several keys in one dict are AND-ed)"
    )


def _levels(f: Condition | Filter) -> int:
    """How deep the canonical form (:meth:`Filter.to_dict`) nests ``$and`` / ``$or``."""
    if isinstance(f, Condition):
        return 0
    if len(f.parts) == 1:
        return _levels(f.parts[0])
    return 1 + max(_levels(p) for p in f.parts)


def _check_depth(spec: Mapping[str, Any]) -> None:
    """Refuse ``$and`` / ``$or`` nested deeper than :data:`MAX_DEPTH`, without recursion."""
    todo: list[tuple[Mapping[str, Any], int]] = [(spec, 0)]
    while todo:
        node, depth = todo.pop()
        for key in ("$and", "$or"):
            items = node.get(key)
            if not isinstance(items, list | tuple):
                continue
            if depth >= MAX_DEPTH:
                raise _too_deep()
            todo.extend((x, depth + 1) for x in items if isinstance(x, Mapping))


def _parse(spec: Any) -> Filter | None:
    if not isinstance(spec, Mapping):
        raise ConfigError(f"a filter is a dict like {{'dept': 'x'}}, got {type(spec).__name__}")
    parts: list[Condition | Filter] = []
    for key, value in spec.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list | tuple) or not value:
                raise ConfigError(f"{key} takes a non-empty list of filters")
            subs = [_parse(v) for v in value]
            # an empty filter ({}) holds for every document, as at the top: it drops out of
            # an $and, and makes an $or always hold
            if key == "$or" and None in subs:
                continue
            kept = tuple(x for x in subs if x is not None)
            if kept:
                parts.append(Filter(kept, any_of=key == "$or"))
        elif not isinstance(key, str) or key.startswith("$"):
            raise ConfigError(
                f"unknown filter operator {_shown(key)} (use $and or $or at the top; "
                f"a field's operators go inside it: {{'year': {{'$gte': 2020}}}})"
            )
        elif not storable(key):
            raise ConfigError(
                f"the filter key {key!r} holds a NUL character or a lone surrogate, which no "
                "metadata key holds (insert refuses them): remove it"
            )
        elif isinstance(value, Mapping):
            parts.extend(_conditions(key, value))
        else:
            parts.append(_condition(key, "$eq", value))
    return Filter(tuple(parts)) if parts else None


def _conditions(key: str, ops: Mapping[str, Any]) -> list[Condition]:
    if not ops:
        raise ConfigError(f"filter on {key!r}: empty operator dict")
    return [_condition(key, op, v) for op, v in ops.items()]


def _as_value(value: Any) -> Any:
    """A filter value as metadata keeps it (:func:`.arguments.json_metadata`): a NumPy
    number as the Python number it holds, a ``datetime`` / ``date`` / ``time`` as its ISO
    string, a ``UUID`` or a path as its string; anything else as given."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
        return path if isinstance(path, str) else value
    return value


def _condition(key: str, op: str, value: Any) -> Condition:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple | set | frozenset):
        value = [_as_value(v) for v in value]
    else:
        value = _as_value(value)
    if op not in OPERATORS:
        raise ConfigError(
            f"filter on {key!r}: unknown operator {_shown(op)} (supported: {', '.join(OPERATORS)})"
        )
    if op in _LISTS:
        if not isinstance(value, list | tuple | set | frozenset) or not all(
            isinstance(v, _SCALAR) for v in value
        ):
            raise ConfigError(
                f"filter on {key!r}: {op} takes a list of plain values (str, number, bool), "
                f"got {_shown(value)}"
            )
        if op == "$all" and not value:
            raise ConfigError(f"filter on {key!r}: $all takes a non-empty list")
        for v in value:
            _matchable(key, op, v)
        return Condition(key, op, tuple(value))
    if op == "$contains" and not isinstance(value, _SCALAR):
        raise ConfigError(
            f"filter on {key!r}: $contains takes one plain value (a list holds it), got "
            f"{_shown(value)}; for several use $all (every one) or $in (any one)"
        )
    if value is not None and not isinstance(value, _SCALAR):
        raise ConfigError(
            f"filter on {key!r}: {op} compares with a plain value (str, number, bool or "
            f"None), got {_shown(value)}"
        )
    if value is None and op in _ORDER:
        raise ConfigError(
            f"filter on {key!r}: {op} None matches no document (None has no order): "
            f"compare with a number, a string or a bool, or test for None with "
            f"{{{key!r}: None}} / {{{key!r}: {{'$ne': None}}}}"
        )
    _matchable(key, op, value)
    return Condition(key, op, value)


def _matchable(key: str, op: str, value: Any) -> None:
    """Refuse a value no stored metadata can hold: the condition could never match (and
    PostgreSQL cannot even be asked about it)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(
            f"filter on {key!r}: {op} {value} is no metadata value (metadata holds finite "
            "numbers only, and NaN equals nothing): compare with a finite number, or leave "
            "the condition out"
        )
    if isinstance(value, str) and not storable(value):
        raise ConfigError(
            f"filter on {key!r}: {op} {_shown(value)} holds a NUL character or a lone "
            "surrogate, which no metadata value holds (insert refuses them): remove it"
        )


def normalise(spec: Mapping[str, Any] | Filter | None) -> dict[str, Any] | None:
    """The canonical dict form of a filter (validated), or ``None``: what a configuration
    stores and a trace records."""
    parsed = parse(spec)
    return parsed.to_dict() if parsed is not None else None


def both(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Two filters that must both hold (either may be ``None``): one ``$and`` of their parts,
    so it nests no deeper than the deeper of the two."""
    if a and b:
        return {"$and": [*_and_parts(a), *_and_parts(b)]}
    either = a or b
    return dict(either) if either else None


def _and_parts(f: Mapping[str, Any]) -> list[Any]:
    """The filters ``f`` ANDs: an ``{"$and": [...]}``'s items, else ``f`` itself."""
    if len(f) == 1 and isinstance(f.get("$and"), list | tuple):
        return list(f["$and"])
    return [dict(f)]


# --- a filter that passes no document: why --------------------------------------------------
def conditions(f: Filter | Condition) -> list[Condition]:
    """Every condition of ``f``, in order, each once."""
    if isinstance(f, Condition):
        return [f]
    return list(dict.fromkeys(c for p in f.parts for c in conditions(p)))


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "None"
    return "list" if isinstance(value, list) else "dict"


def explain(f: Filter, metadata: Iterable[Mapping[str, Any]]) -> str | None:
    """Why ``f`` passes none of the documents whose ``metadata`` is given, when a mistake in
    the filter is why: a key no document has (the close ones named), a value of a type no
    document holds under its key, a string held only in another case, a dotted path into
    nested metadata. ``None`` when some document passes, or when none does only because no
    document holds the value asked for (no mistake: e.g. a tenant with no documents yet)."""
    metas = [m for m in metadata if isinstance(m, Mapping)]
    if not metas or any(f.test(m) for m in metas):
        return None
    found = [why for c in conditions(f) if (why := _mistake(c, metas))]
    return "; ".join(dict.fromkeys(found)) or None


def _mistake(c: Condition, metas: list[Mapping[str, Any]]) -> str | None:
    holders = [m[c.key] for m in metas if c.key in m]
    if not holders:
        return _unknown_key(c.key, metas)
    if c.op in ("$ne", "$nin"):
        return None  # passes documents with another value: no document passing is no mistake
    wanted = list(c.value) if c.op in _LISTS else [c.value]
    if c.op in _ORDER:  # compares a whole value: a list is no number
        held = [h for h in holders if not isinstance(h, list)]
    else:  # a list is read item by item
        held = [x for h in holders for x in (h if isinstance(h, list) else [h])]
    kinds = {_kind(h) for h in held}
    if held and not kinds & {_kind(w) for w in wanted}:
        example = next(h for h in held if _kind(h) in kinds)
        w = next(w for w in wanted)
        return (
            f"{c.key!r} holds {' and '.join(sorted(kinds))} values (e.g. {_shown(example)}), "
            f"never a {_kind(w)} like {_shown(w)}: compare with a {_kind(example)}"
            + _suggest(c, w, _kind(example))
        )
    if c.op in ("$eq", "$in", "$contains", "$all"):
        strings = {h for h in held if isinstance(h, str)}
        for w in wanted:
            if not isinstance(w, str) or w in strings:
                continue
            other = sorted(h for h in strings if h.casefold() == w.casefold())
            if other:
                return (
                    f"no document has {c.key!r} = {_shown(w)}, but {_shown(other[:3])} "
                    "is held: values compare case-sensitively"
                )
    return None


def _converted(value: Any, kind: str) -> Any:
    """``value`` as a ``kind`` ("number" / "string"), or ``None`` where it does not convert."""
    if kind == "number" and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        return int(number) if number.is_integer() and "." not in value else number
    if kind == "string" and _kind(value) in ("number", "bool"):
        return str(value)
    return None


def _suggest(c: Condition, value: Any, kind: str) -> str:
    """How ``c`` reads with its values converted to ``kind``, when they convert."""
    if c.op in _LISTS:
        new: Any = [_converted(v, kind) for v in c.value]
        if any(v is None for v in new):
            return ""
    else:
        new = _converted(value, kind)
        if new is None:
            return ""
    shown = {c.key: new} if c.op == "$eq" else {c.key: {c.op: new}}
    return f", e.g. {shown}"


def _unknown_key(key: str, metas: list[Mapping[str, Any]]) -> str:
    head = key.split(".", 1)[0]
    if "." in key and any(isinstance(m.get(head), Mapping) for m in metas):
        return (
            f"{key!r} is a dotted path into nested metadata ({head!r} holds dicts), which "
            "filters do not read: filter on a top-level key (store the value flat, e.g. "
            f"{key.replace('.', '_')!r}, beside {head!r})"
        )
    keys = sorted({k for m in metas for k in m})
    close = [k for k in keys if k.casefold() == key.casefold()]
    close = close or difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
    if close:
        return f"no document has the key {key!r} (close: {', '.join(map(repr, close))})"
    listed = ", ".join(map(repr, keys[:12])) + (", ..." if len(keys) > 12 else "")
    return f"no document has the key {key!r} (the keys: {listed or 'none'})"
