"""The embedded default store: in RAM, persisted to a directory without pickle.

Layout of a saved store: ``DIR/CURRENT`` names a generation folder ``DIR/gen-<id>/`` holding
``manifest.json`` (format version, dimension, sha256 of every file) and the data files. A save
writes a new generation and then swaps ``CURRENT`` with an atomic rename, so a crash mid-save
leaves the previous generation loadable.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.memory import math as mem
from ..core.protocols import MemoryUpdateResult
from ..core.types import (
    Chunk,
    Edge,
    EmbeddingError,
    Node,
    NodeKind,
    StoreCorruptError,
    UnknownNodeError,
)

FORMAT_VERSION = 1
_FILES = (
    "documents.json",
    "chunks.json",
    "nodes.json",
    "edges.json",
    "embeddings.npy",
    "memory_ids.json",
    "memory.npy",
    "traces.json",
)


class InMemoryGraphStore:
    """A graph store in RAM; ``save(dir)`` / ``load(dir)`` round-trip everything."""

    def __init__(self, namespace: str = "default", max_traces: int = 10_000) -> None:
        self.namespace = namespace
        self.max_traces = max_traces
        self._lock = threading.RLock()
        self._docs: dict[str, tuple[str, dict]] = {}
        self._chunks: dict[str, Chunk] = {}
        self._nodes: dict[str, Node] = {}
        self._edges: dict[str, Edge] = {}
        self._adj: dict[str, set[str]] = {}
        self._emb: dict[str, np.ndarray] = {}
        self._memory: dict[str, np.ndarray] = {}
        self._traces: dict[str, dict] = {}
        self._entity_names: dict[str, str] = {}
        self._dim: int | None = None
        self._index: dict[str, tuple[list[str], np.ndarray]] = {}

    # --- size and documents ---------------------------------------------------------------
    @property
    def dim(self) -> int | None:
        return self._dim

    def counts(self) -> dict[str, int]:
        with self._lock:
            kinds = {"chunk": 0, "anchor": 0, "entity": 0}
            for n in self._nodes.values():
                kinds[n.kind] += 1
            return {
                "documents": len(self._docs),
                "chunks": kinds["chunk"],
                "anchors": kinds["anchor"],
                "entities": kinds["entity"],
                "edges": len(self._edges),
                "touched_edges": len(self._memory),
            }

    def document_hash(self, doc_id: str) -> str | None:
        entry = self._docs.get(doc_id)
        return entry[0] if entry else None

    def document_ids(self) -> list[str]:
        return list(self._docs)

    # --- writes ---------------------------------------------------------------------------
    def add_graph(
        self,
        *,
        documents: Sequence[tuple[str, str, dict]],
        chunks: Sequence[Chunk],
        nodes: Sequence[Node],
        embeddings: np.ndarray,
        edges: Sequence[Edge],
        entity_aliases: Mapping[str, Sequence[str]],
    ) -> None:
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if len(nodes) and (embeddings.ndim != 2 or embeddings.shape[0] != len(nodes)):
            raise EmbeddingError(f"expected {len(nodes)} embedding rows, got {embeddings.shape}")
        with self._lock:
            if len(nodes):
                if self._dim is None:
                    self._dim = int(embeddings.shape[1])
                elif embeddings.shape[1] != self._dim:
                    raise EmbeddingError(
                        f"embedding dimension {embeddings.shape[1]} != store dimension {self._dim}"
                    )
            for doc_id, digest, meta in documents:
                self._docs[doc_id] = (digest, dict(meta))
            for c in chunks:
                self._chunks[c.id] = c
            for node, row in zip(nodes, embeddings):
                if node.id in self._nodes:
                    continue
                self._nodes[node.id] = node
                self._emb[node.id] = row
                self._adj.setdefault(node.id, set())
                if node.kind == "entity":
                    self._entity_names[_norm(node.name)] = node.id
            for node_id, aliases in entity_aliases.items():
                self._add_aliases(node_id, aliases)
            for e in edges:
                if e.id in self._edges:
                    continue
                if e.u not in self._nodes or e.v not in self._nodes:
                    raise UnknownNodeError(f"edge {e.id} joins unknown node(s) {e.u}, {e.v}")
                self._edges[e.id] = e
                self._adj[e.u].add(e.id)
                self._adj[e.v].add(e.id)
            self._index.clear()

    def _add_aliases(self, node_id: str, aliases: Sequence[str]) -> None:
        node = self._nodes.get(node_id)
        if node is None:
            raise UnknownNodeError(f"unknown entity {node_id}")
        new = tuple(a for a in aliases if a not in node.aliases and a != node.name)
        if new:
            self._nodes[node_id] = Node(**{**node.to_dict(), "aliases": node.aliases + new})
        for a in aliases:
            self._entity_names.setdefault(_norm(a), node_id)

    def delete_documents(self, doc_ids: Iterable[str]) -> dict[str, int]:
        with self._lock:
            doc_set = {d for d in doc_ids if d in self._docs}
            doomed = {
                n.id
                for n in self._nodes.values()
                if n.kind in ("chunk", "anchor") and n.doc_id in doc_set
            }
            # entities left with no mention edge to a surviving anchor
            for n in list(self._nodes.values()):
                if n.kind != "entity":
                    continue
                anchors = [
                    self._edges[e].other(n.id)
                    for e in self._adj[n.id]
                    if self._edges[e].kind == "mention"
                ]
                if anchors and all(a in doomed for a in anchors):
                    doomed.add(n.id)
            dead_edges = {e for nid in doomed for e in self._adj.get(nid, ())}
            for eid in dead_edges:
                e = self._edges.pop(eid)
                self._adj.get(e.u, set()).discard(eid)
                self._adj.get(e.v, set()).discard(eid)
                self._memory.pop(eid, None)
            for nid in doomed:
                self._nodes.pop(nid)
                self._emb.pop(nid, None)
                self._adj.pop(nid, None)
            self._entity_names = {k: v for k, v in self._entity_names.items() if v not in doomed}
            chunks = [c for c in self._chunks.values() if c.doc_id in doc_set]
            for c in chunks:
                del self._chunks[c.id]
            for d in doc_set:
                del self._docs[d]
            self._index.clear()
            return {
                "documents": len(doc_set),
                "chunks": len(chunks),
                "nodes": len(doomed),
                "edges": len(dead_edges),
            }

    # --- reads ----------------------------------------------------------------------------
    def get_node(self, node_id: str) -> Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise UnknownNodeError(f"unknown node id {node_id!r}") from None

    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]:
        return [self.get_node(n) for n in node_ids]

    def get_chunk(self, chunk_id: str) -> Chunk:
        try:
            return self._chunks[chunk_id]
        except KeyError:
            raise UnknownNodeError(f"unknown chunk id {chunk_id!r}") from None

    def get_edge(self, edge_id: str) -> Edge:
        try:
            return self._edges[edge_id]
        except KeyError:
            raise UnknownNodeError(f"unknown edge id {edge_id!r}") from None

    def node_embeddings(self, node_ids: Sequence[str]) -> np.ndarray:
        if not node_ids:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        try:
            return np.stack([self._emb[n] for n in node_ids])
        except KeyError as exc:
            raise UnknownNodeError(f"unknown node id {exc.args[0]!r}") from None

    def neighbors(self, node_id: str) -> list[Edge]:
        if node_id not in self._adj:
            raise UnknownNodeError(f"unknown node id {node_id!r}")
        with self._lock:
            return [self._edges[e] for e in sorted(self._adj[node_id])]

    def _kind_index(self, kinds: Sequence[NodeKind]) -> tuple[list[str], np.ndarray]:
        key = ",".join(sorted(kinds))
        with self._lock:
            if key not in self._index:
                ids = [n.id for n in self._nodes.values() if n.kind in kinds]
                mat = (
                    np.stack([self._emb[i] for i in ids])
                    if ids
                    else np.zeros((0, self._dim or 1), dtype=np.float32)
                )
                self._index[key] = (ids, mat)
            return self._index[key]

    def search(
        self, query: np.ndarray, k: int, kinds: Sequence[NodeKind]
    ) -> list[tuple[str, float]]:
        ids, mat = self._kind_index(kinds)
        if not ids or k <= 0:
            return []
        sims = mat @ mem.unit(query)
        k = min(k, len(ids))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.lexsort((top, -sims[top]))]
        return [(ids[i], float(sims[i])) for i in top]

    def find_entity_by_name(self, normalized_name: str) -> str | None:
        return self._entity_names.get(normalized_name)

    # --- memory ---------------------------------------------------------------------------
    def memory(self, edge_ids: Sequence[str]) -> np.ndarray:
        dim = self._dim or 0
        out = np.zeros((len(edge_ids), dim), dtype=np.float32)
        with self._lock:
            for i, eid in enumerate(edge_ids):
                v = self._memory.get(eid)
                if v is not None:
                    out[i] = v
        return out

    def update_memory(
        self, enhance: Sequence[str], penalise: Sequence[str], query: np.ndarray
    ) -> MemoryUpdateResult:
        q_hat = mem.unit(query)
        with self._lock:  # read-modify-write under one lock: no lost update
            for eid in [*enhance, *penalise]:
                if eid not in self._edges:
                    raise UnknownNodeError(f"unknown edge id {eid!r}")
            current = {e: self._memory[e] for e in [*enhance, *penalise] if e in self._memory}
            new = mem.apply_updates(current, enhance, penalise, q_hat, self._dim or len(q_hat))
            for eid, v in new.items():
                if np.any(v) or eid in self._memory:
                    self._memory[eid] = v.astype(np.float32)
        return MemoryUpdateResult(
            enhanced=len(set(enhance)), penalised=len(set(penalise) - set(enhance))
        )

    def touched_edges(self) -> int:
        return len(self._memory)

    def top_memory(self, query: np.ndarray | None, k: int) -> list[tuple[str, float]]:
        with self._lock:
            if not self._memory:
                return []
            ids = list(self._memory)
            mat = np.stack([self._memory[i] for i in ids])
        scores = mat @ mem.unit(query) if query is not None else np.linalg.norm(mat, axis=1)
        order = np.argsort(-scores)[:k]
        return [(ids[i], float(scores[i])) for i in order]

    def reset_memory(self) -> int:
        with self._lock:
            n = len(self._memory)
            self._memory.clear()
            return n

    def decay_memory(self, factor: float) -> int:
        if not 0.0 <= factor <= 1.0:
            raise ValueError("decay factor must be in [0, 1]")
        with self._lock:
            for eid in list(self._memory):
                self._memory[eid] = self._memory[eid] * np.float32(factor)
            return len(self._memory)

    def export_memory(self) -> dict[str, list[float]]:
        with self._lock:
            return {k: v.astype(float).tolist() for k, v in self._memory.items()}

    def import_memory(self, vectors: dict[str, list[float]]) -> int:
        with self._lock:
            rows = {}
            for eid, v in vectors.items():
                if eid not in self._edges:
                    raise UnknownNodeError(f"unknown edge id {eid!r}")
                arr = np.asarray(v, dtype=np.float32)
                if arr.shape != (self._dim,) or not np.all(np.isfinite(arr)):
                    raise EmbeddingError(f"memory vector of {eid} has shape {arr.shape}")
                rows[eid] = arr
            self._memory.update(rows)
            return len(rows)

    # --- traces ---------------------------------------------------------------------------
    def save_trace(self, trace: dict) -> None:
        with self._lock:
            self._traces[trace["trace_id"]] = trace
            while len(self._traces) > self.max_traces:
                self._traces.pop(next(iter(self._traces)))

    def load_trace(self, trace_id: str) -> dict | None:
        return self._traces.get(trace_id)

    def flush(self) -> None:
        return None

    # --- persistence ----------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write a new generation under ``directory`` and switch to it atomically."""
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        gen = f"gen-{uuid.uuid4().hex[:12]}"
        tmp = root / f".{gen}.tmp"
        tmp.mkdir()
        with self._lock:
            node_ids = list(self._nodes)
            mem_ids = list(self._memory)
            payload: dict[str, Any] = {
                "documents.json": {k: [v[0], v[1]] for k, v in self._docs.items()},
                "chunks.json": [c.to_dict() for c in self._chunks.values()],
                "nodes.json": [self._nodes[n].to_dict() for n in node_ids],
                "edges.json": [e.to_dict() for e in self._edges.values()],
                "memory_ids.json": mem_ids,
                "traces.json": list(self._traces.values()),
            }
            dim = self._dim or 0
            emb = (
                np.stack([self._emb[n] for n in node_ids])
                if node_ids
                else np.zeros((0, dim), dtype=np.float32)
            )
            memory = (
                np.stack([self._memory[e] for e in mem_ids])
                if mem_ids
                else np.zeros((0, dim), dtype=np.float32)
            )
        for name, obj in payload.items():
            (tmp / name).write_text(json.dumps(obj), encoding="utf-8")
        np.save(tmp / "embeddings.npy", emb.astype(np.float32), allow_pickle=False)
        np.save(tmp / "memory.npy", memory.astype(np.float32), allow_pickle=False)
        manifest = {
            "format": FORMAT_VERSION,
            "namespace": self.namespace,
            "dim": self._dim,
            "sha256": {f: _sha256(tmp / f) for f in _FILES},
        }
        _write_synced(tmp / "manifest.json", json.dumps(manifest).encode())
        os.replace(tmp, root / gen)
        _write_synced(root / ".CURRENT.tmp", gen.encode())
        os.replace(root / ".CURRENT.tmp", root / "CURRENT")
        for old in root.glob("gen-*"):
            if old.name != gen:
                shutil.rmtree(old, ignore_errors=True)
        return root

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> InMemoryGraphStore:
        """Load a saved store; raises :class:`StoreCorruptError` on any damage."""
        root = Path(directory)
        try:
            gen = (root / "CURRENT").read_text(encoding="utf-8").strip()
            base = root / gen
            manifest = json.loads((base / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreCorruptError(f"no readable store at {root}: {exc}") from exc
        if manifest.get("format") != FORMAT_VERSION:
            raise StoreCorruptError(f"unsupported store format {manifest.get('format')!r}")
        for name in _FILES:
            path = base / name
            if not path.exists() or _sha256(path) != manifest["sha256"].get(name):
                raise StoreCorruptError(f"store file {path} is missing or damaged")
        try:
            return cls._from_files(base, manifest)
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreCorruptError(f"store at {root} has malformed content: {exc}") from exc

    @classmethod
    def _from_files(cls, base: Path, manifest: dict) -> InMemoryGraphStore:
        def read(name: str) -> Any:
            return json.loads((base / name).read_text(encoding="utf-8"))

        store = cls(namespace=manifest.get("namespace", "default"))
        nodes = [Node.from_dict(d) for d in read("nodes.json")]
        emb = np.load(base / "embeddings.npy", allow_pickle=False)
        store._dim = manifest["dim"]
        store._docs = {k: (v[0], v[1]) for k, v in read("documents.json").items()}
        store.add_graph(
            documents=[],
            chunks=[Chunk.from_dict(d) for d in read("chunks.json")],
            nodes=nodes,
            embeddings=emb,
            edges=[Edge.from_dict(d) for d in read("edges.json")],
            entity_aliases={},
        )
        for n in nodes:
            for a in n.aliases:
                store._entity_names.setdefault(_norm(a), n.id)
        memory = np.load(base / "memory.npy", allow_pickle=False)
        store._memory = {e: memory[i] for i, e in enumerate(read("memory_ids.json"))}
        store._traces = {t["trace_id"]: t for t in read("traces.json")}
        return store


def _norm(name: str) -> str:
    return " ".join(name.lower().split())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
