"""The embedded store's content as files (JSON and ``.npy``, never pickle), and back."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import ConfigError, StoreCorruptError
from ..core.progress import ProgressFn
from ..core.types import Chunk, Edge, Node
from .node_index import KINDS

# what a load does after reading and checking the files, in order (its progress steps)
LOAD_STEPS = ("files read", "graph", "memory", "ANN indexes", "BM25 index", "graph matrix")

FILES = (
    "documents.json",
    "chunks.json",
    "nodes.json",
    "edges.json",
    "embeddings.npy",
    "memory_ids.json",
    "memory.npy",
    "traces.json",
)


def dump(store: Any) -> tuple[dict[str, bytes], dict[str, Any]]:
    """``(files, metadata)`` of one version of ``store``: read from a snapshot, so readers and
    writers go on while it is serialised (a save saves the version of its start). Each file
    is encoded on its own, its rows a slice at a time: what a save holds beside the store is
    about the files' bytes (at 100 K passages, issue 35), not also a dict per row."""
    view = store.pin()
    node_ids = list(view._nodes)
    mem_ids = list(view._memory)
    with store._trace_lock:
        traces = list(store._traces.values())
    files: dict[str, bytes] = {
        "documents.json": json.dumps({k: [v[0], v[1]] for k, v in view._docs.items()}).encode(),
        "chunks.json": _json_rows(c.to_dict() for c in view._chunks.values()),
        "nodes.json": _json_rows(view._nodes[n].to_dict() for n in node_ids),
        "edges.json": _json_rows(e.to_dict() for e in view._edges.values()),
        "memory_ids.json": json.dumps(mem_ids).encode(),
        "traces.json": json.dumps(traces).encode(),
    }
    dim = view._dim or 0
    table = view._vectors.table
    emb = table.matrix()[table.rows_of(node_ids)] if node_ids else np.zeros((0, dim))
    memory = _rows([view._memory[e] for e in mem_ids], dim)
    indexes: dict = {}  # the ANN indexes follow the store: saved while they are this version's
    if store._lock.acquire(blocking=False):  # (else a write is applied: rebuilt after a load)
        try:
            if store._version == view._version:
                indexes = store._vectors.saved_indexes()
        finally:
            store._lock.release()
    for kind, (ids, keys, data) in indexes.items():
        files[f"ann-{kind}.json"] = json.dumps({"ids": ids, "keys": keys}).encode()
        files[f"ann-{kind}.usearch"] = data  # built ANN indexes
    files["embeddings.npy"] = _npy(emb, table.dtype)  # float16 when the store keeps float16
    files["memory.npy"] = _npy(memory, np.dtype(np.float32))
    return files, {"namespace": view.namespace, "dim": view._dim}


def _json_rows(rows: Iterable[Any], per: int = 4096) -> bytes:
    """``json.dumps(list(rows)).encode()``, made ``per`` rows at a time."""
    parts: list[bytes] = []
    it = iter(rows)
    while part := list(itertools.islice(it, per)):
        parts.append(json.dumps(part)[1:-1].encode())
    return b"[" + b", ".join(parts) + b"]"


def load(
    cls: Any,
    manifest: dict,
    files: dict[str, bytes],
    root: Path,
    options: dict[str, Any],
    progress: ProgressFn | None = None,
) -> Any:
    """The store the files of a verified generation describe, made with the constructor
    ``options`` (vectors, ANN); malformed content raises :class:`StoreCorruptError`.
    ``progress(done, len(LOAD_STEPS))`` is called as each step of :data:`LOAD_STEPS` ends
    (the first, reading the files, has ended when this is called)."""
    missing = [f for f in FILES if f not in files]
    if missing:
        raise StoreCorruptError(f"store at {root} lacks {', '.join(missing)}")
    try:
        store = cls(namespace="default", **options)
    except TypeError as exc:  # an unknown option: the caller's mistake, not damage
        raise ConfigError(f"unknown store option: {exc}") from None
    step = _stepper(progress)
    step()  # the files are read and verified
    try:
        return _restore(store, manifest, files, step)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise StoreCorruptError(f"store at {root} has malformed content: {exc}") from exc


def _stepper(progress: ProgressFn | None) -> Callable[[], None]:
    """A function that reports the next of :data:`LOAD_STEPS` done."""
    count = itertools.count(1)

    def step() -> None:
        done = next(count)
        if progress is not None:
            progress(done, len(LOAD_STEPS))

    return step


def _restore(
    store: Any,
    manifest: dict,
    files: dict[str, bytes],
    step: Callable[[], None],
) -> Any:
    """``store`` (a new, empty ``InMemoryGraphStore``; typed loosely, as :func:`dump`'s, so
    this module imports nothing of the store it serialises) filled from ``files``."""

    def read(name: str) -> Any:
        return json.loads(files[name])

    namespace, dim = manifest["namespace"], manifest["dim"]
    if not isinstance(namespace, str) or not (dim is None or isinstance(dim, int)):
        raise ValueError("manifest namespace / dim have the wrong type")
    store.namespace = namespace
    nodes, edges = _graph(files["nodes.json"], files["edges.json"])
    store._dim = dim
    store.add_graph(
        documents=[(k, v[0], v[1]) for k, v in read("documents.json").items()],
        chunks=[Chunk.from_dict(d) for d in read("chunks.json")],
        nodes=nodes,
        embeddings=_array(files["embeddings.npy"]),
        edges=edges,
        entity_aliases={},
    )
    step()
    memory = _array(files["memory.npy"])
    mem_ids = read("memory_ids.json")
    if len(mem_ids) != len(memory) or (len(memory) and memory.shape[1] != dim):
        raise ValueError("memory rows do not match their ids or the dimension")
    store._memory = {str(e): memory[i] for i, e in enumerate(mem_ids)}
    store._traces = {t["trace_id"]: t for t in read("traces.json")}
    step()
    for kind in KINDS:  # saved ANN indexes (older stores have none: built when needed)
        if f"ann-{kind}.json" in files and f"ann-{kind}.usearch" in files:
            saved = read(f"ann-{kind}.json")
            store._vectors.adopt_index(
                kind, saved["ids"], saved["keys"], files[f"ann-{kind}.usearch"]
            )
    step()
    store.lexical_index()  # what the first query's prior needs, built here rather than then
    step()
    store.graph_matrix()
    step()
    return store


def _graph(nodes_json: bytes, edges_json: bytes) -> tuple[list[Node], list[Edge]]:
    """Nodes and edges as the store holds them after building a graph: made while parsing
    (each dict dropped at once, not a million of them alive until the end), an edge's ends
    the very strings of its nodes' ids, and kinds and repeated edge texts one string each
    (JSON gives every value its own copy: at 1 M edges ~200 MB of duplicate strings)."""
    shared: dict[str, str] = {}

    def one(d: dict[str, Any], key: str) -> None:
        if isinstance(d.get(key), str):
            d[key] = shared.setdefault(d[key], d[key])

    def node(d: dict[str, Any]) -> Node:
        one(d, "kind")
        return Node.from_dict(d)

    nodes = json.loads(nodes_json, object_hook=node)
    if not isinstance(nodes, list) or not all(isinstance(n, Node) for n in nodes):
        raise ValueError("nodes.json must be a list of nodes")
    ids = {n.id: n.id for n in nodes}

    def edge(d: dict[str, Any]) -> Edge:
        one(d, "kind")
        if d.get("kind") in ("mention", "context"):  # one text for every edge of the kind
            one(d, "text")
        for end in ("u", "v"):
            if isinstance(d.get(end), str):
                d[end] = ids.get(d[end], d[end])
        return Edge.from_dict(d)

    edges = json.loads(edges_json, object_hook=edge)
    if not isinstance(edges, list) or not all(isinstance(e, Edge) for e in edges):
        raise ValueError("edges.json must be a list of edges")
    return nodes, edges


def _rows(rows: list[np.ndarray], dim: int) -> np.ndarray:
    return np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)


def _npy(arr: np.ndarray, dtype: np.dtype) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr.astype(dtype, copy=False), allow_pickle=False)
    return buf.getvalue()


def _array(data: bytes) -> np.ndarray:
    return np.asarray(np.load(io.BytesIO(data), allow_pickle=False), dtype=np.float32)
