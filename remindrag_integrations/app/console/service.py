"""What the console's pages ask for and do, over one engine: plain functions of JSON-ready
values (the HTTP layer is :mod:`.server`). Every change goes through the engine's public
API, is recorded in the store's action log (:mod:`.audit`) and, where it can be, undone."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.errors import InvalidArgumentError, ReMindError, UnknownNodeError
from ...core.store import LexicalStore
from ...core.types import Document, Edge, Node, Trace
from ...stores import InMemoryGraphStore
from .audit import ActionLog, pack, unpack

MAX_NEIGHBOURS = 200
"""The most edges one neighbourhood request returns (the strongest memory first)."""
MAX_LIMIT = 500


class UnknownJobError(ReMindError, KeyError):
    """No background job of this id in this process."""


@dataclass
class Job:
    """A long action (re-indexing a file) run in a thread; the page polls its progress."""

    id: str
    what: str
    done: int = 0
    total: int = 0
    state: str = "running"  # running, done, failed
    result: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "what": self.what,
            "done": self.done,
            "total": self.total,
            "state": self.state,
            "result": self.result,
            "error": self.error,
        }


def limit_arg(value: Any, default: int, what: str = "limit") -> int:
    if value is None or value == "":
        return default
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what} must be a whole number, got {value!r}") from None
    if not 1 <= n <= MAX_LIMIT:
        raise InvalidArgumentError(f"{what} must be between 1 and {MAX_LIMIT}, got {n}")
    return n


def text_arg(value: Any, what: str, *, max_len: int = 2000) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{what} must be a non-empty string")
    if len(value) > max_len:
        raise InvalidArgumentError(f"{what} is longer than {max_len} characters")
    return value


class Console:
    """The console's state over ``engine``: its action log, its jobs, one writer at a time."""

    def __init__(self, engine: Any, who: str = "console") -> None:
        self.engine = engine
        self.who = who
        self.log = ActionLog(engine.store)
        self.jobs: dict[str, Job] = {}
        self._write = threading.Lock()

    def _view(self) -> Any:
        """One consistent read of the store (other processes' writes caught up first)."""
        store = self.engine.store
        return store.pin() if hasattr(store, "pin") else store

    # --- overview --------------------------------------------------------------------------
    def overview(self, traces: int = 200) -> dict[str, Any]:
        view = self._view()
        counts = view.counts()
        touched = view.touched_edges()  # rows kept, a forgotten edge's zero vector included
        remembered = sum(1 for _, norm in view.top_memory(None, touched) if norm > 0)
        dim = view.dim or 0
        recent = [Trace.from_dict(t) for t in view.recent_traces(traces)]
        recent.reverse()  # oldest first, as the plot reads
        per_decision = [
            t.costs.stages["traversal"].tokens / t.decisions
            for t in recent
            if t.decisions and t.costs.stages["traversal"].tokens
        ]
        mean = float(np.mean(per_decision)) if per_decision else 0.0
        series = []
        for n, t in enumerate(recent, 1):
            replayed, moves = len(t.replayed_edges), len(t.moves)
            series.append(
                {
                    "n": n,
                    "trace_id": t.trace_id,
                    "replayed": replayed,
                    "moves": moves,
                    "decisions": t.decisions,
                    "replay_share": replayed / (replayed + moves) if replayed + moves else 0.0,
                    "tokens_spent": t.costs.stages["traversal"].tokens,
                    "tokens_saved": round(replayed * mean),
                }
            )
        return {
            "counts": counts,
            "remembered_edges": remembered,
            "touched_edges": touched,
            "memory_bytes": touched * dim * 4,
            "dim": dim,
            "tokens_per_decision": mean,
            "series": series,
            "recent_writes": self.log.recent(10),
            "memorized_traces": [trace_summary(t) for t in reversed(recent) if t.memorized][:10],
            "log_kept_in": self.log.kept_in,
        }

    # --- graph ----------------------------------------------------------------------------
    def search(self, q: Any, kind: Any = "entity", limit: Any = None) -> list[dict[str, Any]]:
        q = text_arg(q, "q", max_len=500)
        if kind not in ("entity", "passage"):
            raise InvalidArgumentError(f"kind must be 'entity' or 'passage', got {kind!r}")
        k = limit_arg(limit, 20)
        view = self._view()
        if kind == "passage" and isinstance(view, LexicalStore):
            hits = [(c, s) for c, s in view.lexical_search(q, k)]
        else:
            hits = []
        if len(hits) < k:
            vec = np.asarray(self.engine.embedder.embed([q])[0], dtype=np.float32)
            kinds = ("entity",) if kind == "entity" else ("chunk",)
            seen = {h for h, _ in hits}
            hits += [h for h in view.search(vec, k, kinds) if h[0] not in seen]
        nodes = view.get_nodes([h for h, _ in hits[:k]])
        out = []
        for node, (_, score) in zip(nodes, hits):
            row = node_dict(node)
            row["score"] = round(float(score), 4)
            if node.kind == "chunk":
                row["text"] = view.get_chunk(node.chunk_id or node.id).text[:300]
            out.append(row)
        return out

    def neighbourhood(self, node_id: Any, limit: Any = None) -> dict[str, Any]:
        """The node, its edges (the strongest memory first, at most ``limit``) and their
        other ends: what the graph page adds when a node is opened."""
        node_id = text_arg(node_id, "node", max_len=200)
        k = limit_arg(limit, 60)
        k = min(k, MAX_NEIGHBOURS)
        view = self._view()
        centre = view.get_node(node_id)  # UnknownNodeError: 404
        edges = view.neighbors(node_id)
        norms = np.linalg.norm(view.memory([e.id for e in edges]), axis=1) if edges else []
        ranked = sorted(zip(edges, norms), key=lambda p: -float(p[1]))[:k]
        others = view.get_nodes(list(dict.fromkeys(e.other(node_id) for e, _ in ranked)))
        return {
            "node": node_dict(centre),
            "degree": len(edges),
            "nodes": [node_dict(centre), *(node_dict(n) for n in others)],
            "edges": [edge_dict(e, float(w)) for e, w in ranked],
        }

    def edge(self, edge_id: Any) -> dict[str, Any]:
        edge_id = text_arg(edge_id, "edge", max_len=200)
        view = self._view()
        e = view.get_edge(edge_id)
        norm = float(np.linalg.norm(view.memory([e.id])[0]))
        u, v = view.get_nodes([e.u, e.v])
        return {**edge_dict(e, norm), "u_name": u.name, "v_name": v.name}

    # --- queries --------------------------------------------------------------------------
    def traces(self, limit: Any = None) -> list[dict[str, Any]]:
        k = limit_arg(limit, 50)
        return [trace_summary(Trace.from_dict(t)) for t in self._view().recent_traces(k)]

    def trace(self, trace_id: Any) -> dict[str, Any]:
        t = self.engine.trace(trace_id)  # UnknownTraceError / InvalidArgumentError
        view = self._view()
        names = {n.id: n.name for n in view.get_nodes(list(t.parents))}
        # what the retrieval returned (ranked), else what the walk read
        ev = t.rank_evidence
        returned = sorted((c for c in ev if "relevance" in ev[c]), key=lambda c: -ev[c]["score"])
        shown = returned or list(t.chunk_ids)
        chunks = {c: view.get_chunk(c) for c in shown if _has_chunk(view, c)}
        return {
            **trace_summary(t),
            "seeds": [{"id": s, "name": names.get(s, s)} for s in t.seeds],
            "moves": [
                {
                    "step": m.step,
                    "action": m.action,
                    "from": names.get(m.from_node or "", m.from_node),
                    "to": names.get(m.node_id or "", m.node_id),
                    "edge": m.edge_id,
                    "note": m.note,
                }
                for m in t.moves
            ],
            "passages": [
                {
                    "chunk": c,
                    "doc": chunks[c].doc_id if c in chunks else None,
                    "text": chunks[c].text[:600] if c in chunks else "(deleted)",
                    "evidence": t.rank_evidence.get(c, {}),
                }
                for c in shown
            ],
            "walk_read": list(t.chunk_ids),
            "memory_result": t.memory_result,
            "navigation": t.navigation,
            "stop_reason": t.stop_reason,
        }

    # --- corrections (each recorded, each undoable) ----------------------------------------
    def _memory_action(
        self, what: str, args: dict[str, Any], change: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """Run a memory write, keeping the vectors of every edge it changed (before) so the
        action can be undone with :meth:`ReMindRAG.restore_memory`: the difference of the
        memory before and after it (a write another process made to memory in between is
        counted in, and the undo would put those edges back too; a forget, :meth:`_forget`,
        knows exactly what it zeroed)."""
        with self._write:
            before = self.engine.memory_vectors()
            summary = change()
            after = self.engine.memory_vectors()
            changed = {
                e: before.get(e, [0.0] * len(v))
                for e, v in after.items()
                if e not in before or not np.array_equal(before[e], v)
            }
            changed.update({e: v for e, v in before.items() if e not in after})
            summary = {**summary, "edges_changed": len(changed)}
            undo = {"kind": "memory", "vectors": pack(changed)} if changed else None
            return self.log.record(self.who, what, args, summary, undo)

    def _forget(
        self, what: str, args: dict[str, Any], forget: Callable[[], dict[str, list[float]]]
    ) -> dict[str, Any]:
        """A forget: what it zeroed is what its undo puts back, exactly."""
        with self._write:
            held = forget()
            summary = {"forgot": list(held), "edges_changed": len(held)}
            undo = {"kind": "memory", "vectors": pack(held)} if held else None
            return self.log.record(self.who, what, args, summary, undo)

    def forget_edge(self, edge_id: Any) -> dict[str, Any]:
        edge_id = text_arg(edge_id, "edge", max_len=200)
        self._view().get_edge(edge_id)  # 404 before anything is recorded
        return self._forget(
            "forget edge", {"edge": edge_id}, lambda: self.engine.forget_edges([edge_id])
        )

    def forget_trace(self, trace_id: Any) -> dict[str, Any]:
        self.engine.trace(trace_id)
        return self._forget(
            "forget trace", {"trace": trace_id}, lambda: self.engine.forget_trace(trace_id)
        )

    def feedback(self, trace_id: Any, helpful: Any, chunk_ids: Any = None) -> dict[str, Any]:
        if not isinstance(helpful, bool):
            raise InvalidArgumentError("helpful must be true or false")
        self.engine.trace(trace_id)

        def run() -> dict[str, Any]:
            w = self.engine.feedback(trace_id, helpful, chunk_ids)
            return {
                "applied": w.applied,
                "enhanced": len(w.enhanced),
                "penalised": len(w.penalised),
                "skipped_reason": w.skipped_reason,
            }

        what = "confirm trace" if helpful else "penalise trace"
        return self._memory_action(what, {"trace": trace_id, "chunk_ids": chunk_ids}, run)

    def teach(self, question: Any, chunk_ids: Any) -> dict[str, Any]:
        question = text_arg(question, "question")
        if (
            not isinstance(chunk_ids, list)
            or not chunk_ids
            or not all(isinstance(c, str) for c in chunk_ids)
        ):
            raise InvalidArgumentError("chunk_ids must be a non-empty list of passage ids")
        view = self._view()
        for c in chunk_ids:
            view.get_chunk(c)  # UnknownNodeError: 404 before any write

        def run() -> dict[str, Any]:
            report = self.engine.teach([{"question": question, "chunk_ids": chunk_ids}])
            r = report.results[0]
            return {
                "taught": report.taught,
                "reached": r.reached,
                "unreachable": r.unreachable,
                "enhanced": r.enhanced,
                "linked": r.linked,
                "summary": report.summary(),
            }

        return self._memory_action("teach", {"question": question, "chunk_ids": chunk_ids}, run)

    def ask(self, question: Any, min_score: Any = None) -> dict[str, Any]:
        """Retrieve and answer (no memory written: confirm it on the Correct page)."""
        question = text_arg(question, "question")
        overrides: dict[str, Any] = {}
        if min_score is not None:
            if isinstance(min_score, bool) or not isinstance(min_score, (int, float)):
                raise InvalidArgumentError("min_score must be a number in [0, 1]")
            overrides["min_score"] = float(min_score)
        a = self.engine.answer(question, **overrides)
        t = a.retrieval.trace
        return {
            "answer": a.text,
            "citations": a.citations,
            "trace_id": a.trace_id,
            "abstained": t.abstained,
            "passages": [
                {
                    "chunk": rc.chunk.id,
                    "doc": rc.chunk.doc_id,
                    "score": round(rc.score, 4),
                    "source": rc.source,
                    "text": rc.chunk.text[:600],
                    "evidence": t.rank_evidence.get(rc.chunk.id, {}),
                }
                for rc in a.retrieval.chunks
            ],
            "replayed_edges": len(t.replayed_edges),
            "moves": len(t.moves),
        }

    # --- documents -------------------------------------------------------------------------
    def documents(self, q: Any = None, offset: Any = 0, limit: Any = None) -> dict[str, Any]:
        ids = self.engine.document_ids()
        if q not in (None, ""):
            needle = text_arg(q, "q", max_len=500).lower()
            ids = [d for d in ids if needle in d.lower()]
        try:
            start = int(offset or 0)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"offset must be a whole number, got {offset!r}") from None
        if start < 0:
            raise InvalidArgumentError("offset must be 0 or more")
        k = limit_arg(limit, 100)
        page = ids[start : start + k]
        return {"total": len(ids), "offset": start, "documents": self._chunk_counts(page)}

    def _chunk_counts(self, doc_ids: list[str]) -> list[dict[str, Any]]:
        """Each document with its number of chunks: one pass over the nodes of an
        in-process store (a lookup per document there scans every chunk), else a query per
        document (PostgreSQL's is an index lookup)."""
        view = self._view()
        if isinstance(view, InMemoryGraphStore):
            wanted = set(doc_ids)
            n: dict[str, int] = dict.fromkeys(doc_ids, 0)
            for node in view.whole_graph()[0]:
                if node.kind == "chunk" and node.doc_id in wanted:
                    n[node.doc_id] += 1
            return [{"id": d, "chunks": n[d]} for d in doc_ids]
        return [{"id": d, "chunks": len(view.document_chunks(d))} for d in doc_ids]

    def delete_document(self, doc_id: Any) -> dict[str, Any]:
        doc_id = text_arg(doc_id, "document id", max_len=4000)
        with self._write:
            docs = self.engine.get_documents([doc_id])
            if not docs:
                raise UnknownNodeError(f"unknown document {doc_id!r}")
            report = dict(self.engine.delete([doc_id]))
            undo = {"kind": "documents", "documents": [document_dict(d) for d in docs]}
            return self.log.record(self.who, "delete document", {"document": doc_id}, report, undo)

    def reindex(self, path: Any) -> dict[str, Any]:
        """Read a file (or folder) again and index what changed, in a background job."""
        from ..documents import read_files
        from ..specs import CLIError

        path = text_arg(path, "path", max_len=4000)
        try:
            found = read_files([path])
        except CLIError as exc:
            raise InvalidArgumentError(str(exc)) from None
        if not found.documents:
            raise InvalidArgumentError(f"no readable document at {path}")
        job = Job(uuid.uuid4().hex[:12], f"re-index {path}")
        self.jobs[job.id] = job

        def progress(done: int, total: int) -> None:
            job.done, job.total = done, total

        def run() -> None:
            try:
                with self._write:
                    old = self.engine.get_documents([d.id for d in found.documents])
                    report = self.engine.insert(found.documents, progress=progress)
                    result = {
                        "documents": report.documents,
                        "unchanged": report.skipped_documents,
                        "chunks": report.chunks,
                        "skipped_files": found.skipped,
                    }
                    undo = {
                        "kind": "documents",
                        "documents": [document_dict(d) for d in old],
                        "replace": [d.id for d in found.documents],
                    }
                    self.log.record(self.who, "re-index", {"path": path}, result, undo)
                job.result, job.state = result, "done"
            except Exception as exc:  # the job's page shows it; nothing else waits on it
                job.error, job.state = f"{type(exc).__name__}: {exc}", "failed"

        threading.Thread(target=run, name=f"console-job-{job.id}", daemon=True).start()
        return job.to_dict()

    def job(self, job_id: Any) -> dict[str, Any]:
        job = self.jobs.get(job_id) if isinstance(job_id, str) else None
        if job is None:
            raise UnknownJobError(f"unknown job {job_id!r}")
        return job.to_dict()

    # --- the log ---------------------------------------------------------------------------
    def actions(self, limit: Any = None) -> list[dict[str, Any]]:
        return self.log.recent(limit_arg(limit, 50))

    def undo(self, action_id: Any) -> dict[str, Any]:
        with self._write:
            row = self.log.get(action_id)
            undo = row.get("undo")
            if row.get("undone") or undo is None:
                raise InvalidArgumentError(
                    f"action {action_id} cannot be undone"
                    + (" (it was already)" if row.get("undone") else "")
                )
            if undo["kind"] == "memory":
                n = self.engine.restore_memory(unpack(undo["vectors"]))
                done = {"restored_edges": n}
            else:
                replaced = [
                    d
                    for d in undo.get("replace", [])
                    if d not in {x["id"] for x in undo["documents"]}
                ]
                if replaced:
                    self.engine.delete(replaced)
                docs = [Document(d["id"], d["text"], d["metadata"]) for d in undo["documents"]]
                report = self.engine.insert(docs) if docs else None
                done = {"documents": report.documents if report else 0, "removed": replaced}
            self.log.mark_undone(action_id, self.who, "undo")
            return self.log.record(self.who, "undo", {"action": action_id}, done)


def _has_chunk(view: Any, chunk_id: str) -> bool:
    try:
        view.get_chunk(chunk_id)
    except UnknownNodeError:
        return False
    return True


def node_dict(n: Node) -> dict[str, Any]:
    return {"id": n.id, "kind": n.kind, "name": n.name, "doc": n.doc_id}


def edge_dict(e: Edge, strength: float) -> dict[str, Any]:
    return {
        "id": e.id,
        "source": e.u,
        "target": e.v,
        "kind": e.kind,
        "text": e.text,
        "strength": round(strength, 4),
    }


def document_dict(d: Document) -> dict[str, Any]:
    return {"id": d.id, "text": d.text, "metadata": dict(d.metadata or {})}


def trace_summary(t: Trace) -> dict[str, Any]:
    result = t.memory_result or {}
    return {
        "trace_id": t.trace_id,
        "query": t.query,
        "passages": len(t.chunk_ids),
        "replayed": len(t.replayed_edges),
        "moves": len(t.moves),
        "decisions": t.decisions,
        "tokens": t.costs.total_tokens,
        "walker": (t.navigation or {}).get("mode", ""),
        "abstained": t.abstained,
        "memorized": t.memorized,
        "enhanced": len(result.get("enhanced") or ()),
        "penalised": len(result.get("penalised") or ()),
        "memory_note": result.get("skipped_reason") or "",
    }
