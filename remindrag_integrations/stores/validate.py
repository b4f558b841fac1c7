"""Checks every store makes before it writes, written once: the rows of an ``add_graph`` batch
and of an ``update_memory`` function. Each raises a typed error before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import numpy as np

from ..core.errors import EmbeddingError, InvalidArgumentError, UnknownNodeError
from ..core.ids import is_learned
from ..core.memory.math import memory_vector as memory_vector  # the stores check imports with it
from ..core.store import MemoryFn
from ..core.types import Edge, Node


def graph_embeddings(nodes: Sequence[Node], embeddings: np.ndarray, dim: int | None) -> np.ndarray:
    """The batch's embeddings as float32 rows, one per node, of the store's dimension
    (``dim`` None: the store has none yet, the batch sets it). Raises :class:`EmbeddingError`."""
    emb = np.asarray(embeddings, dtype=np.float32)
    if not len(nodes):
        return emb
    if emb.ndim != 2 or emb.shape[0] != len(nodes):
        raise EmbeddingError(f"expected {len(nodes)} embedding rows, got {emb.shape}")
    if dim is not None and emb.shape[1] != dim:
        raise EmbeddingError(f"embedding dimension {emb.shape[1]} != store dimension {dim}")
    if emb.shape[1] == 0 or not np.all(np.isfinite(emb)):
        raise EmbeddingError("embeddings must be finite rows of positive dimension")
    return emb


def edge_endpoints(
    edges: Sequence[Edge], nodes: Sequence[Node], known: Callable[[list[str]], Collection[str]]
) -> None:
    """Every edge joins nodes of the batch or nodes the store has (``known(ids)`` returns the
    ids it holds). Raises :class:`UnknownNodeError`."""
    batch = {n.id for n in nodes}
    ends = sorted({x for e in edges for x in (e.u, e.v)} - batch)
    have = set(known(ends)) if ends else set()
    for e in edges:
        missing = [x for x in (e.u, e.v) if x not in batch and x not in have]
        if missing:
            raise UnknownNodeError(f"edge {e.id} joins unknown node(s) {', '.join(missing)}")


def learned_links(links: Sequence[Edge]) -> list[Edge]:
    """The links of a memory update: ``learned`` edges with ``l-`` ids."""
    out = list(links)
    for e in out:
        if not isinstance(e, Edge) or e.kind != "learned" or not is_learned(e.id):
            raise InvalidArgumentError(f"a memory update can only add learned edges, got {e!r}")
    return out


def successors(ids: list[str], successor: Callable[[list[str]], dict[str, str]]) -> dict[str, str]:
    """Each of ``ids`` a document update replaced -> the edge now in its place (``successor``
    maps one step; chains are followed, as :func:`redirected` follows them)."""
    now = {e: e for e in ids}
    for _ in range(8):
        found = successor(list(dict.fromkeys(now.values())))
        if not found:
            break
        now = {e: found.get(x, x) for e, x in now.items()}
    return {e: x for e, x in now.items() if x != e}


def redirected(
    ids: list[str], successor: Callable[[list[str]], dict[str, str]], fn: MemoryFn
) -> tuple[list[str], MemoryFn]:
    """A memory update's edge ids with each edge a document update replaced by its successor
    (``successor(ids)`` maps the replaced ones; chains are followed), and ``fn`` on those:
    a write that raced an update lands where the edge's memory went, not nowhere."""
    now = list(ids)
    for _ in range(8):  # a chain of updates, each moving the edge again
        found = successor(now)
        if not found:
            break
        now = [found.get(e, e) for e in now]
    if now == ids:
        return ids, fn
    unique = list(dict.fromkeys(now))
    first = [now.index(e) for e in unique]
    where = [unique.index(e) for e in now]

    def on_unique(current: np.ndarray) -> np.ndarray:
        return np.asarray(fn(np.asarray(current)[where]))[first]

    return unique, on_unique


def memory_ids(edge_ids: Sequence[str]) -> list[str]:
    """The edge ids of a memory update: a list of distinct strings."""
    ids = list(edge_ids)
    if isinstance(edge_ids, str) or not all(isinstance(e, str) for e in ids):
        raise TypeError("edge_ids must be a sequence of edge id strings")
    if len(set(ids)) != len(ids):
        raise ValueError("edge_ids of a memory update must be distinct")
    return ids


def memory_rows(new: object, n: int, dim: int) -> np.ndarray:
    """What a memory-update function returned, checked: ``[n, dim]`` finite float32 rows."""
    out = np.asarray(new, dtype=np.float32)
    if out.shape != (n, dim) or not np.all(np.isfinite(out)):
        raise EmbeddingError(f"a memory update must return finite rows of shape {(n, dim)}")
    return out


def storable(emb: np.ndarray, dtype: np.dtype) -> None:
    """Rows fit the store's vector type (float16 holds magnitudes up to 65504). Raises
    :class:`EmbeddingError`."""
    if (
        dtype == np.float16
        and emb.size
        and float(np.abs(emb).max()) > float(np.finfo(np.float16).max)
    ):
        raise EmbeddingError(
            "embedding values exceed the float16 range: normalise them or use vectors='float32'"
        )
