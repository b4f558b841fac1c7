"""Each framework's names for "how many" and "which documents", accepted or refused loudly.

At construction ``ReMindRetriever`` takes ``k`` / ``filter`` / ``score_threshold`` (its own),
LangChain's ``search_kwargs={"k": ..., "filter": ..., "score_threshold": ...}`` with
``search_type="similarity"`` or ``"similarity_score_threshold"`` (which needs a
``score_threshold``), and LlamaIndex's ``similarity_top_k`` and ``filters=MetadataFilters(...)``.
Per call (``invoke(q, ...)``) it takes ``k``, ``filter``, ``score_threshold`` and any
:class:`RetrievalConfig` field. Anything else is a :class:`ConfigError` naming what is
accepted: an argument is never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import filters
from ..core.config import RetrievalConfig, nearest
from ..core.errors import ConfigError

SEARCH_KWARGS = ("k", "filter", "score_threshold")
SEARCH_TYPES = ("similarity", "similarity_score_threshold")
CALL_EXTRAS = ("verbose",)  # passed by some framework helpers; no effect on the walk


def _set(out: dict[str, Any], key: str, value: Any, source: str) -> None:
    if value is None:
        return
    if key in out and out[key] != value:
        raise ConfigError(f"{key} given twice with different values ({out[key]!r}, {source})")
    out[key] = value


def construction_args(data: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    """The retriever's constructor arguments with the frameworks' aliases folded into ``k``
    and ``filter``; raises :class:`ConfigError` for anything it would not honour."""
    data = dict(data)
    search_type = data.pop("search_type", "similarity")
    if search_type not in SEARCH_TYPES:
        raise ConfigError(
            f"search_type={search_type!r} is not supported: ReMindRAG ranks the chunks its "
            "graph walk reads ('similarity' is accepted and means the same; "
            "'similarity_score_threshold' with search_kwargs={'score_threshold': ...} drops "
            "passages whose relevance is below it)"
        )
    search_kwargs = data.pop("search_kwargs", None) or {}
    if not isinstance(search_kwargs, Mapping):
        raise ConfigError("search_kwargs must be a dict")
    unknown = sorted(set(search_kwargs) - set(SEARCH_KWARGS))
    if unknown:
        raise ConfigError(
            f"search_kwargs: unsupported key(s) {', '.join(unknown)}; "
            f"ReMindRetriever takes {', '.join(SEARCH_KWARGS)}"
        )
    out: dict[str, Any] = {}
    _set(out, "k", data.pop("k", None), "k")
    _set(out, "k", search_kwargs.get("k"), "search_kwargs['k']")
    _set(out, "k", data.pop("similarity_top_k", None), "similarity_top_k")
    given = [data.pop("score_threshold", None), search_kwargs.get("score_threshold")]
    for where, value in zip(("score_threshold", "search_kwargs['score_threshold']"), given):
        _set(out, "score_threshold", score_threshold(value, where), where)
    if search_type == "similarity_score_threshold" and "score_threshold" not in out:
        raise ConfigError(
            "search_type='similarity_score_threshold' needs a threshold: "
            "search_kwargs={'score_threshold': 0.525} (a relevance in [0, 1]; "
            "docs/retriever.md#scores)"
        )
    found = [
        filters.normalise(data.pop("filter", None)),
        filters.normalise(search_kwargs.get("filter")),
        llamaindex_filter(data.pop("filters", None)),
    ]
    for f in found:
        out["filter"] = filters.both(out.get("filter"), f)
    unknown = sorted(set(data) - fields - set(CALL_EXTRAS))
    if unknown:
        raise ConfigError(
            f"unknown argument(s) to ReMindRetriever: {', '.join(unknown)} (accepted: "
            "engine, k, filter, score_threshold, search_kwargs, search_type, "
            "similarity_top_k, filters)"
        )
    data.pop("verbose", None)
    return {**data, **{k: v for k, v in out.items() if v is not None}}


def score_threshold(value: Any, where: str = "score_threshold") -> float | None:
    """A relevance cutoff in [0, 1] (``None``: none); anything else is a :class:`ConfigError`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(
            f"{where} must be a number in [0, 1] (a passage's relevance: "
            f"docs/retriever.md#scores), got {value!r}"
        )
    return float(value)


def call_overrides(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Per-call arguments as :class:`RetrievalConfig` overrides (``filter`` validated;
    ``score_threshold`` is the retriever's own, taken out before)."""
    kwargs = {k: v for k, v in kwargs.items() if k not in CALL_EXTRAS}
    unknown = sorted(k for k in kwargs if not RetrievalConfig.accepts(k))
    if unknown:
        raise ConfigError(
            "unknown argument(s) for this retrieval: "
            + "; ".join(f"{k} ({nearest(k, RetrievalConfig)})" for k in unknown)
            + " (accepted: k, filter, score_threshold and the RetrievalConfig fields)"
        )
    if "filter" in kwargs:
        kwargs["filter"] = filters.normalise(kwargs["filter"])
    return kwargs


def llamaindex_filter(spec: Any) -> dict[str, Any] | None:
    """LlamaIndex ``MetadataFilters`` (or ``None``) as a filter dict."""
    if spec is None:
        return None
    return filters.normalise(metadata_filters_to_dict(spec))


_OPERATORS = {
    "==": "$eq",
    "!=": "$ne",
    ">": "$gt",
    ">=": "$gte",
    "<": "$lt",
    "<=": "$lte",
    "in": "$in",
    "nin": "$nin",
    "contains": "$contains",  # a list-valued key holds the value
    "any": "$in",  # a list-valued key holds any of the values (in: the value is among them)
    "all": "$all",  # a list-valued key holds every one of the values
}


def metadata_filters_to_dict(spec: Any) -> dict[str, Any]:
    """LlamaIndex ``MetadataFilters`` (nested, AND / OR) as a LangChain-style filter dict.
    Operators other than ``== != > >= < <= in nin contains any all`` and the NOT condition
    raise :class:`ConfigError`; on list-valued metadata ``in`` / ``any`` hold when the list
    holds any of the values, ``contains`` when it holds the value, ``all`` every value (see
    :mod:`..core.filters`)."""
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    if isinstance(spec, MetadataFilter):
        op = str(getattr(spec.operator, "value", spec.operator))
        if op not in _OPERATORS:
            raise ConfigError(
                f"MetadataFilter on {spec.key!r}: operator {op!r} is not supported "
                f"(supported: {', '.join(_OPERATORS)})"
            )
        return {spec.key: {_OPERATORS[op]: spec.value}}
    if not isinstance(spec, MetadataFilters):
        raise ConfigError(f"filters must be llama_index MetadataFilters, got {type(spec).__name__}")
    cond = str(getattr(spec.condition, "value", spec.condition) or "and")
    if cond not in ("and", "or"):
        raise ConfigError(f"MetadataFilters condition {cond!r} is not supported (and, or)")
    parts = [metadata_filters_to_dict(f) for f in spec.filters]
    return {f"${cond}": parts} if parts else {}
