"""Looking after memory: what it holds (grouped by the past queries that shaped it), and its
portable file format for export / import."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import arguments
from ..errors import InvalidArgumentError, StoreError, UnknownNodeError
from ..ids import EDGE_ID_RE
from ..protocols import Embedder
from ..steps import embed_checked
from ..store import GraphStore
from .math import memory_vector

MEMORY_FORMAT = "remindrag-memory/1"


def leader_cluster(leaders: list[np.ndarray], v: np.ndarray, threshold: float) -> int:
    """Index of the first leader within cosine ``threshold`` of ``v`` (else ``v`` leads)."""
    u = v / (float(np.linalg.norm(v)) or 1.0)
    for i, lead in enumerate(leaders):
        if float(u @ lead) >= threshold:
            return i
    leaders.append(u)
    return len(leaders) - 1


def inspect(
    store: GraphStore, q: np.ndarray | None, k: int, cluster_threshold: float | None
) -> list[dict[str, Any]]:
    """The ``k`` edges with the strongest memory (by norm, or by alignment with ``q``), each
    with its text, endpoint names, score, norm and (unless ``cluster_threshold`` is None) a
    ``cluster``: edges whose memory points the same way share one."""
    top = store.top_memory(q, k)
    vecs = store.memory([e for e, _ in top])
    edges = [store.get_edge(e) for e, _ in top]
    names = {
        n.id: n.name
        for n in store.get_nodes(list(dict.fromkeys(x for e in edges for x in (e.u, e.v))))
    }
    leaders: list[np.ndarray] = []
    rows = []
    for (eid, score), v, e in zip(top, vecs, edges):
        row = {
            "edge_id": eid,
            "kind": e.kind,
            "text": e.text,
            "u": e.u,
            "v": e.v,
            "u_name": names[e.u],
            "v_name": names[e.v],
            "score": score,
            "norm": float(np.linalg.norm(v)),
        }
        if cluster_threshold is not None:
            row["cluster"] = leader_cluster(leaders, v, cluster_threshold)
        rows.append(row)
    return rows


def export_file(store: GraphStore, path: str | os.PathLike[str]) -> int:
    """Write the memory vectors to a JSON file (atomically); returns how many. A folder, or
    a file in a folder that does not exist, is an :class:`InvalidArgumentError`; a write that
    fails otherwise (a full disk, no permission) a :class:`StoreError`. Nothing is left
    behind either way."""
    target = Path(path).expanduser()  # "~/memory.json" as the store's "~/kb" is
    if target.is_dir():
        raise InvalidArgumentError(
            f"{path} is a folder: export_memory writes one file; give a file path, e.g. "
            f"{target / 'memory.json'}"
        )
    if not target.parent.is_dir():
        raise InvalidArgumentError(
            f"cannot write the memory export to {path}: the folder {target.parent} does not "
            "exist; make it first, or give a path in an existing folder"
        )
    vectors = store.export_memory()
    doc: dict[str, Any] = {"format": MEMORY_FORMAT, "namespace": store.namespace}
    doc.update(dim=store.dim, vectors=vectors)
    tmp = Path(f"{target}.tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise StoreError(
            f"cannot write the memory export to {path}: {exc.strerror or exc}; give a path "
            "you can write to (the memory itself is unchanged)"
        ) from exc
    return len(vectors)


def read_export(path: str | os.PathLike[str]) -> dict[str, list[float]]:
    """The vectors of a memory export; anything else raises :class:`InvalidArgumentError`
    (a vector of the wrong shape or norm is refused by the store)."""
    try:
        doc = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"cannot read a memory export from {path}: {exc}") from None
    vectors = doc.get("vectors") if isinstance(doc, dict) else None
    if not isinstance(vectors, dict) or doc.get("format") != MEMORY_FORMAT:
        raise InvalidArgumentError(f"{path} is not a memory export ({MEMORY_FORMAT})")
    for eid, v in vectors.items():
        if not EDGE_ID_RE.match(eid) or not isinstance(v, list):
            raise InvalidArgumentError(f"{path}: entry {eid[:40]!r} is not an edge id and a list")
    return vectors


def import_file(store: GraphStore, path: str | os.PathLike[str], skip_unknown: bool) -> int:
    """Load vectors written by :func:`export_file`; they replace those edges' vectors. Edges
    the graph lacks raise :class:`UnknownNodeError`, or are left out with ``skip_unknown``."""
    vectors = read_export(path)
    if skip_unknown:
        known = {}
        for eid, v in vectors.items():
            try:
                store.get_edge(eid)
            except UnknownNodeError:
                continue
            known[eid] = v
        vectors = known
    return store.import_memory(vectors)


class MemoryAdmin:
    """The engine's memory administration methods (mixed into :class:`~..engine.Engine`)."""

    store: GraphStore
    embedder: Embedder

    def inspect_memory(
        self, k: int = 10, query: str | None = None, *, cluster_threshold: float | None = 0.8
    ) -> list[dict[str, Any]]:
        """The ``k`` edges with the strongest memory (by norm, or by alignment with ``query``),
        each with its text, endpoint names, score and norm. Edges whose memory points the same
        way (cosine >= ``cluster_threshold``) share a ``cluster`` number: one per group of
        similar past queries (``None`` skips the grouping)."""
        arguments.count(k, "k")
        if query is not None:
            arguments.query(query)
        q = embed_checked(self.embedder, [query], dim=self.store.dim)[0] if query else None
        return inspect(self.store, q, k, cluster_threshold)

    def reset_memory(self) -> int:
        """Forget all edge memory of this engine's store (its namespace only)."""
        return self.store.reset_memory()

    def decay_memory(self, factor: float) -> int:
        """Scale every memory vector by ``factor`` in [0, 1]; returns the edges touched."""
        return self.store.decay_memory(arguments.fraction(factor, "factor"))

    def export_memory(self, path: str | os.PathLike[str]) -> int:
        """Write the memory vectors to a JSON file; returns how many were written."""
        return export_file(self.store, arguments.path(path, "path"))

    def import_memory(self, path: str | os.PathLike[str], *, skip_unknown: bool = False) -> int:
        """Load memory vectors written by :meth:`export_memory` (they replace the current
        vectors of those edges). Edges the graph lacks raise :class:`UnknownNodeError`, or are
        left out with ``skip_unknown=True``."""
        return import_file(self.store, arguments.path(path, "path"), skip_unknown)

    # --- one edge at a time: read, forget, put back (the console's corrections and undo) ---
    def memory_vectors(self, edge_ids: Sequence[str] | None = None) -> dict[str, list[float]]:
        """The memory vectors of ``edge_ids`` that hold any memory (a zero vector is left
        out), or of every remembered edge when ``edge_ids`` is None: what
        :meth:`restore_memory` puts back. Unknown edge ids raise :class:`UnknownNodeError`."""
        if edge_ids is None:
            return {e: v for e, v in self.store.export_memory().items() if any(v)}
        ids = _known_edges(self.store, edge_ids, "edge_ids")
        rows = self.store.memory(ids)
        return {e: [float(x) for x in r] for e, r in zip(ids, rows) if np.any(r)}

    def forget_edges(self, edge_ids: Sequence[str]) -> dict[str, list[float]]:
        """Forget the memory of these edges (each vector set to zero, one atomic write; the
        graph is unchanged). Returns the vectors they held (edges that held none left out),
        which :meth:`restore_memory` puts back. Unknown ids raise :class:`UnknownNodeError`
        before anything is written."""
        ids = _known_edges(self.store, edge_ids, "edge_ids")
        before = self.memory_vectors(ids)
        if before:
            self.store.update_memory(list(before), np.zeros_like)
        return before

    def forget_trace(self, trace_id: str) -> dict[str, list[float]]:
        """Forget everything one retrieval's memory write touched: the memory of every edge
        it enhanced, penalised or linked (the edges other writes touched too lose theirs as
        well). A trace that wrote nothing returns ``{}``; an unknown trace raises
        :class:`UnknownTraceError`. Returns the vectors they held, as :meth:`forget_edges`."""
        trace = self.trace(trace_id)  # type: ignore[attr-defined]
        result = trace.memory_result or {}
        wrote = [e for key in ("enhanced", "penalised", "linked") for e in result.get(key) or ()]
        successors = getattr(self.store, "edge_successors", None)  # edges updates replaced
        live = set(successors(wrote).values()) if wrote and successors else set()
        known = [e for e in dict.fromkeys([*wrote, *live]) if _has_edge(self.store, e)]
        return self.forget_edges(known) if known else {}

    def restore_memory(self, vectors: Mapping[str, Sequence[float]]) -> int:
        """Set the memory of each named edge to exactly the given vector (a zero vector
        forgets it): the undo of :meth:`forget_edges`, or of any write whose previous vectors
        were kept with :meth:`memory_vectors`. One atomic write; a vector of the wrong
        dimension, not finite or of norm above 1 raises :class:`EmbeddingError`, an unknown
        edge :class:`UnknownNodeError`, before anything is written. Returns how many."""
        if not isinstance(vectors, Mapping):
            raise InvalidArgumentError(
                f"vectors must map edge ids to vectors, got {type(vectors).__name__}"
            )
        ids = _known_edges(self.store, list(vectors), "vectors")
        if not ids:
            return 0
        rows = np.stack([memory_vector(e, vectors[e], self.store.dim) for e in ids])
        self.store.update_memory(ids, lambda _current: rows)
        return len(ids)


def _has_edge(store: GraphStore, edge_id: str) -> bool:
    try:
        store.get_edge(edge_id)
    except UnknownNodeError:
        return False
    return True


def _known_edges(store: GraphStore, edge_ids: Any, what: str) -> list[str]:
    """Distinct edge ids, each checked to exist (else :class:`UnknownNodeError`)."""
    ids = list(dict.fromkeys(arguments.id_list(edge_ids, what) or ()))
    for eid in ids:
        if not EDGE_ID_RE.match(eid):
            raise InvalidArgumentError(f"{eid[:60]!r} in {what} is not an edge id")
        store.get_edge(eid)  # UnknownNodeError for an edge the graph lacks
    return ids
