"""Metadata filters (:mod:`...core.filters`) as SQL over ``rr_documents.metadata`` (jsonb,
GIN-indexed with ``jsonb_path_ops``): equality uses containment (``@>``: the value, or a
list holding it, as MongoDB reads equality), ``$in``,
``$contains`` and ``$all`` a JSON path (``@?``, ``$."key" ? (@ == v1 || @ == v2)``; lax mode
reads a list-valued key's items), both served by the index; comparisons check the JSON type
first, so ``"a" > 3`` is false as in Python.
"""

from __future__ import annotations

import json
import math
from typing import Any

from psycopg.types.json import Jsonb

from ...core.filters import Condition, Filter

_SQL_OP = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def where_sql(f: Filter | Condition, params: dict[str, Any]) -> str:
    """A boolean SQL expression over ``metadata`` for ``f``; its values are added to
    ``params`` (named ``f0``, ``f1``...)."""
    if isinstance(f, Filter):
        joiner = " OR " if f.any_of else " AND "
        return "(" + joiner.join(where_sql(p, params) for p in f.parts) + ")"
    if f.op in ("$eq", "$ne"):  # the value, or (as MongoDB reads it) a list holding it
        whole = f"metadata @> %({_bind(params, Jsonb({f.key: f.value}))})s"
        item = f"metadata @> %({_bind(params, Jsonb({f.key: [f.value]}))})s"
        return f"({whole} OR {item})" if f.op == "$eq" else f"NOT ({whole} OR {item})"
    if f.op in ("$in", "$nin"):  # the value, or a list holding it
        anyof = _holds(params, f.key, f.value)
        return anyof if f.op == "$in" else f"NOT {anyof}"
    if f.op in ("$contains", "$all"):
        wanted = f.value if f.op == "$all" else (f.value,)
        return "(" + " AND ".join(_holds(params, f.key, [v]) for v in wanted) + ")"
    key, value = _bind(params, f.key), _bind(params, f.value)
    if isinstance(f.value, bool):
        json_type, cast = "boolean", "::boolean"
    elif isinstance(f.value, int | float):
        json_type, cast = "number", "::numeric"
    else:  # strings compare by code point, as Python does
        json_type, cast = "string", ' COLLATE "C"'
    return (
        f"(CASE WHEN jsonb_typeof(metadata -> %({key})s) = '{json_type}' "
        f"THEN (metadata ->> %({key})s){cast} {_SQL_OP[f.op]} %({value})s{cast} ELSE false END)"
    )


def _holds(params: dict[str, Any], key: str, values: Any) -> str:
    """``metadata[key]`` is one of ``values`` or a list that holds one: one JSON path test,
    served by the index as a whole (an OR of containments is not, past a few values)."""
    # NaN equals nothing (as in Python); no value: no match
    finite = [v for v in values if not (isinstance(v, float) and not math.isfinite(v))]
    if not finite:
        return "false"
    alts = " || ".join(f"@ == {json.dumps(v)}" for v in finite)
    path = _bind(params, f"$.{json.dumps(key)} ? ({alts})")
    return f"(metadata @? %({path})s::jsonpath)"


def _bind(params: dict[str, Any], value: Any) -> str:
    name = f"f{len(params)}"
    params[name] = value
    return name
