"""What the MCP tools do, without the protocol: one store served to many agent sessions, kept
in step with the other processes that use the same store (:mod:`.mcp_server` wires it to MCP).

Both stores are shared as they are, by any number of servers and commands at once: a store
directory is an SQLite database (:mod:`..stores.sqlite_store`) and PostgreSQL a server. Every
write is one transaction, committed before the tool answers; the store serialises writers (one
waits up to :data:`LOCK_WAIT` seconds for another, then the tool error says the store is held
by another writer), and each server sees the others' writes at its next call. A search's trace
is a row of the store (written without waiting for another writer; kept and written by the next
write when one holds the store), so ``remember`` works from another server process: clients
such as ``langchain-mcp-adapters`` and ``llama-index-tools-mcp`` start a new server for every
tool call by default. A trace is memorized once, whichever server is asked (each claims it in
its row). A ``--read-only`` server on a store directory writes nothing there: its searches'
traces stay in its memory.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.errors import InvalidArgumentError, ReMindError
from ..core.types import Trace
from ..core.workers import cpus
from .specs import CLIError

MAX_TEXTS = 1000  # documents one add_documents call may carry
MAX_LISTED = 1000  # document ids one list_documents call returns
LOCK_WAIT = 60.0  # seconds a write waits for another writer (then a tool error says so)


class ReadOnlyError(ReMindError):
    """A write asked of a server started with ``--read-only``."""


class StoreService:
    """The operations behind the MCP tools on the store ``args`` names (``--store``,
    ``--namespace``, ``--llm``, ``--cache``); ``local_files`` allows ``add_documents`` to read
    paths (a stdio server runs as its user; an HTTP server takes texts only)."""

    def __init__(
        self, args: argparse.Namespace, *, read_only: bool = False, local_files: bool = True
    ) -> None:
        from .session import open_engine

        self.args = args
        self.read_only = read_only
        self.local_files = local_files
        # the engine takes concurrent reads: searches run side by side, as many as there are
        # CPUs (more threads would only contend for them); this server's writes take turns
        # (the store serialises them with other processes' writes)
        self._writing = threading.Lock()
        self._searching = threading.BoundedSemaphore(max(2, cpus()))
        self._writes = {"applied": 0, "skipped": 0}
        self.engine = open_engine(args, lock_wait=LOCK_WAIT, read_only=read_only)

    def close(self) -> None:
        """Close the store (a folder store writes the traces it still holds); idempotent."""
        close = getattr(self.engine, "close", None)
        if callable(close):
            close()

    def _write(self, change: Callable[[Any], Any]) -> Any:
        """``change(engine)``: a write, committed when it returns (one at a time here)."""
        if self.read_only:
            raise ReadOnlyError("this server is read-only (started with --read-only)")
        with self._writing:
            return change(self.engine)

    # --- the tools --------------------------------------------------------------------------
    def search(
        self,
        query: str,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        min_score: float | None = None,
    ) -> dict[str, Any]:
        """The ``search`` tool: a retrieval with the given overrides (``min_score``: abstain
        below it; ``None`` keeps the store's setting), its trace kept for ``remember``."""
        overrides: dict[str, Any] = {}
        if k is not None:
            overrides["k"] = k
        if filter:
            overrides["filter"] = dict(filter)
        if min_score is not None:
            overrides["min_score"] = min_score
        with self._searching:
            retrieval = self.engine.retrieve(query, **overrides)
        trace = retrieval.trace
        return {
            "trace_id": trace.trace_id,
            "stop_reason": trace.stop_reason,
            "abstained": trace.abstained,
            "replayed_edges": len(trace.replayed_edges),
            "walk_steps": len(trace.moves),
            "llm_calls": trace.costs.total_calls,
            "passages": [
                {
                    "n": n,
                    "chunk_id": rc.chunk.id,
                    "doc_id": rc.chunk.doc_id,
                    "score": round(float(rc.score), 4),
                    "found_by": rc.source,
                    "metadata": dict(rc.chunk.metadata),
                    "text": rc.chunk.text,
                }
                for n, rc in enumerate(retrieval.chunks, 1)
            ],
        }

    def remember(
        self, trace_id: str, answer: str | None = None, cited: Sequence[str] | None = None
    ) -> dict[str, Any]:
        named = list(cited) if cited else None  # with the answer's [c-…]: the support
        write = self._write(lambda e: e.memorize(trace_id, answer, cited=named))
        return self._written(write)

    def feedback(
        self, trace_id: str, helpful: bool, chunk_ids: Sequence[str] | None = None
    ) -> dict[str, Any]:
        write = self._write(lambda e: e.feedback(trace_id, helpful, chunk_ids))
        return self._written(write)

    def _written(self, write: Any) -> dict[str, Any]:
        self._writes["applied" if write.applied else "skipped"] += 1
        out = {
            "trace_id": write.trace_id,
            "applied": write.applied,
            "enhanced_edges": len(write.enhanced),
            "penalised_edges": len(write.penalised),
            "supporting_chunks": list(write.supporting_chunks),
        }
        if write.ignored_citations:  # cited ids the search did not return: ignored
            out["ignored_citations"] = list(write.ignored_citations)
        if not write.applied:
            out["skipped_reason"] = write.skipped_reason
        return out

    def teach(self, pairs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        from ..core.memory.teach import TeachPair

        checked = [TeachPair.of(p, f"pair {n}: ") for n, p in enumerate(pairs, 1)]
        report = self._write(lambda e: e.teach(checked))
        return {"pairs": report.pairs, "taught": report.taught, "summary": report.summary()}

    def add_documents(
        self,
        texts: Sequence[str] | None = None,
        paths: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
        metadata: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        docs = self._documents(texts, paths, ids, metadata)
        report = self._write(lambda e: e.insert(docs))
        return {
            "documents": report.documents,
            "unchanged": report.skipped_documents,
            "chunks": report.chunks,
            "entities_added": report.entities_added,
            "relations": report.relations,
            "doc_ids": [d.id for d in docs],
        }

    def _documents(self, texts: Any, paths: Any, ids: Any, metadata: Any) -> list[Any]:
        from ..core.ids import hex_id
        from ..core.types import Document
        from .documents import read_documents

        if bool(texts) == bool(paths):
            raise InvalidArgumentError("give either texts or paths (one of them, not empty)")
        if paths:
            if not self.local_files:
                raise InvalidArgumentError("paths are read only by a stdio server: send texts")
            if ids is not None or metadata is not None:
                raise InvalidArgumentError("ids and metadata go with texts; files name themselves")
            return list(read_documents([str(p) for p in paths]))
        if len(texts) > MAX_TEXTS:
            raise InvalidArgumentError(f"at most {MAX_TEXTS} texts a call, got {len(texts)}")
        if ids is not None and len(ids) != len(texts):
            raise InvalidArgumentError(f"{len(ids)} ids for {len(texts)} texts")
        metas = [metadata] * len(texts) if isinstance(metadata, Mapping) else metadata
        if metas is not None and len(metas) != len(texts):
            raise InvalidArgumentError(f"{len(metas)} metadata objects for {len(texts)} texts")
        return [
            Document(
                ids[i] if ids is not None else f"mcp-{hex_id(t, n=16)}",
                t,
                dict(metas[i]) if metas is not None else {},
            )
            for i, t in enumerate(texts)
        ]

    def delete_documents(self, ids: Sequence[str]) -> dict[str, int]:
        return dict(self._write(lambda e: e.delete(ids)))

    def list_documents(self, offset: int = 0, limit: int = MAX_LISTED) -> dict[str, Any]:
        """The stored documents' ids, sorted, ``limit`` of them from ``offset`` on: the ids
        ``delete_documents`` takes; ``next_offset`` asks for the next page (None: no more)."""
        for name, value, least in (("offset", offset, 0), ("limit", limit, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InvalidArgumentError(f"{name} must be an integer >= {least}, got {value!r}")
        if limit > MAX_LISTED:
            raise InvalidArgumentError(f"at most {MAX_LISTED} ids a call (limit), got {limit}")
        ids = self.engine.document_ids()
        page = ids[offset : offset + limit]
        more = offset + len(page) < len(ids)
        return {
            "doc_ids": page,
            "total": len(ids),
            "next_offset": offset + len(page) if more else None,
        }

    def stats(self) -> dict[str, Any]:
        counts = dict(self.engine.store.counts())
        return {
            **counts,
            "writes_applied_here": self._writes["applied"],
            "writes_skipped_here": self._writes["skipped"],
            "read_only": self.read_only,
        }

    # --- the resources ----------------------------------------------------------------------
    def trace_text(self, trace_id: str) -> str:
        from .display import describe_path

        engine = self.engine
        trace = engine.trace(trace_id)
        lines = [
            f"query: {trace.query}",
            f"trace: {trace.trace_id} ({len(trace.parents)} nodes, {len(trace.moves)} "
            f"moves; stop: {trace.stop_reason})",
            *(f"  {line}" for line in describe_path(engine, trace)),
            "chunks:",
        ]
        for cid in trace.chunk_ids:
            chunk = engine.store.get_chunk(cid)
            lines.append(f"  [{cid}] {chunk.doc_id}: {' '.join(chunk.text.split())[:120]}")
        result = trace.memory_result or {}
        lines.append(
            f"memory: {len(result.get('enhanced', []))} edges enhanced, "
            f"{len(result.get('penalised', []))} penalised"
            if trace.memorized
            else "memory: not memorized"
        )
        return "\n".join(lines)

    def memory_view(self, traces: int = 1000) -> str:
        from .memory_view import render_memory_view

        store = self.engine.store
        saved = [Trace.from_dict(t) for t in store.recent_traces(traces)]
        return render_memory_view(store, saved)


def check_store(args: argparse.Namespace) -> None:
    """Fail before serving when ``--store`` names no saved store (a DSN is checked on open)."""
    from ..stores import SQLiteGraphStore, is_postgres_dsn

    if not is_postgres_dsn(args.store) and not SQLiteGraphStore.exists(args.store):
        raise CLIError(
            f"no store at {args.store}: run 'remindrag index PATH --store {args.store}' first"
        )
