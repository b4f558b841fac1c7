"""Which embedder a saved store was built with, and whether another one may load it.

A record (``engine.json``'s ``embedder``) holds the embedder's ``name`` (``all-MiniLM-L6-v2``,
a sentence-transformers model or path, ``langchain:Class`` / ``llama_index:Class`` for a
framework's embedding object, ``custom:Class`` or the ``identity`` attribute of your own
:class:`~..core.protocols.Embedder`) and ``dimension``. An embedder that its name does not
rebuild (a framework's or your own object) is also recorded by its ``model`` (the first of
the attributes :data:`MODEL_ATTRS` it has, e.g. ``OpenAIEmbeddings(model=...)``; set
``embedder_id`` on your own class to name it) and a ``fingerprint``: its unit vector for the
fixed text :data:`PROBE`. Loading with another name, model or dimension, or with an embedder
whose probe vector differs (cosine below :data:`MIN_COSINE`), is an
:class:`EmbedderMismatchError`: two models of one class and one dimension are told apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ConfigError, EmbedderMismatchError, EmbeddingError
from ..core.protocols import Embedder
from .embeddings import (
    DEFAULT_IDENTITY,
    LangChainEmbedder,
    LlamaIndexEmbedder,
    SentenceTransformerEmbedder,
    as_embedder,
    identity_of,
)

PROBE = "ReMindRAG embedder fingerprint: Marie Curie was born in Warsaw in 1867."
MIN_COSINE = 0.99  # the same model agrees to ~1.0 (remote APIs to ~0.9999), others far below
MODEL_ATTRS = ("embedder_id", "model", "model_name", "model_id", "deployment_name")
_OBJECT_PREFIXES = ("langchain:", "llama_index:", "custom:")


def by_name(embedder: Any) -> bool:
    """True for the embedders a name rebuilds: the packaged default and sentence-transformers
    models (their name is their identity: no fingerprint needed)."""
    return isinstance(embedder, SentenceTransformerEmbedder) or (
        identity_of(embedder) == DEFAULT_IDENTITY  # the packaged model on onnxruntime
    )


def name_of(embedder: Any) -> str:
    """The name a record gives ``embedder`` (see the module docstring)."""
    return identity_of(embedder) or f"custom:{type(embedder).__name__}"


def model_of(embedder: Any) -> str | None:
    """The model a framework's (or your own) embedding object names, if any."""
    inner = embedder
    if isinstance(embedder, LangChainEmbedder):
        inner = embedder.embeddings
    elif isinstance(embedder, LlamaIndexEmbedder):
        inner = embedder.embed_model
    for attr in MODEL_ATTRS:
        value = getattr(inner, attr, None)
        if isinstance(value, str) and value.strip() and value != "unknown":
            return value
    return None


def fingerprint(embedder: Embedder) -> list[float]:
    """``embedder``'s unit vector for :data:`PROBE` (rounded: it is kept as JSON)."""
    try:
        vec = np.asarray(embedder.embed([PROBE]), dtype=np.float64)
    except EmbeddingError:
        raise
    except Exception as exc:  # the provider failed: say which step needed it
        raise EmbeddingError(
            f"the embedder failed on its identity probe: {type(exc).__name__}: {exc}"
        ) from exc
    if vec.ndim != 2 or vec.shape[0] != 1 or not np.all(np.isfinite(vec)):
        raise EmbeddingError(f"the embedder returned shape {vec.shape} for one probe text")
    norm = float(np.linalg.norm(vec[0]))
    return [round(float(x), 6) for x in (vec[0] / norm if norm else vec[0])]


def record(embedder: Embedder, dimension: int | None, probe: list[float] | None) -> dict:
    """What ``engine.json`` records of ``embedder``, with its fingerprint ``probe`` (``None``:
    not known, e.g. the provider was down at save time; the name and model still are)."""
    out: dict[str, Any] = {"name": name_of(embedder), "dimension": dimension}
    if not by_name(embedder):
        out["model"] = model_of(embedder)
        if probe is not None:
            out["fingerprint"] = probe
    return out


def _described(recorded: dict[str, Any]) -> str:
    name, dim, model = recorded.get("name"), recorded.get("dimension"), recorded.get("model")
    return f"{name!r}" + (f" (model {model!r})" if model else "") + f" ({dim} dimensions)"


def _an_object(recorded: dict[str, Any]) -> bool:
    """True when the record is of an embedding object (no name rebuilds it)."""
    name = recorded.get("name")
    return (
        not isinstance(name, str)
        or name.startswith(_OBJECT_PREFIXES)
        or "model" in recorded
        or "fingerprint" in recorded
    )


def _advice(recorded: dict[str, Any]) -> str:
    name = str(recorded.get("name") or "")
    if not _an_object(recorded):
        return f"load it with embeddings={name!r} or re-index"
    kind, _, cls = name.partition(":")
    what = {"langchain": "LangChain ", "llama_index": "LlamaIndex "}.get(kind, "")
    model = recorded.get("model")
    return (
        f"load it with embeddings= the {what}{cls if cls else name} object it was built with"
        + (f" (model {model!r})" if model else "")
        + ", or re-index"
    )


def embedder_for_record(
    recorded: dict[str, Any] | None, given: Any
) -> tuple[Embedder, list[float] | None]:
    """The embedder to load a saved engine with, and its fingerprint when one was checked:
    ``given`` (checked against the record), else the recorded one when its name rebuilds
    it. A mismatch raises :class:`EmbedderMismatchError`, naming what the store needs."""
    name = recorded.get("name") if recorded else None
    dim = recorded.get("dimension") if recorded else None
    if given is None and recorded is not None:
        if _an_object(recorded):
            raise ConfigError(
                f"this store was built with the {name or 'unnamed'} embedder ({dim} dimensions):"
                f" pass embeddings= to load it ({_advice(recorded)})"
            )
        given = name
    embedder = as_embedder(given)
    if recorded is None or not isinstance(name, str):
        return embedder, None
    mine = name_of(embedder)
    old = "model" not in recorded and "fingerprint" not in recorded  # saved before issue 23
    if mine != name and not (old and identity_of(embedder) is None):
        raise EmbedderMismatchError(
            f"this store was built with the embedder {_described(recorded)}, not {mine!r}: "
            + _advice(recorded)
        )
    model = model_of(embedder)
    if "model" in recorded and recorded["model"] != model:
        raise EmbedderMismatchError(
            f"this store was built with the embedder {_described(recorded)}, not with model "
            f"{model!r}: " + _advice(recorded)
        )
    if "fingerprint" not in recorded:  # a name that rebuilds it, or none could be taken
        return embedder, None
    probe = fingerprint(embedder)
    saved = np.asarray(recorded["fingerprint"], dtype=np.float64)
    if saved.shape != (len(probe),):
        raise EmbedderMismatchError(
            f"this store was built with the embedder {_described(recorded)}, not one of "
            f"{len(probe)} dimensions: " + _advice(recorded)
        )
    cosine = float(saved @ np.asarray(probe)) / max(float(np.linalg.norm(saved)), 1e-12)
    if cosine < MIN_COSINE:
        raise EmbedderMismatchError(
            f"this store was built with the embedder {_described(recorded)}; this one has the "
            f"same name but other vectors (cosine {cosine:.3f} on a fixed probe text): "
            + _advice(recorded)
        )
    return embedder, probe
