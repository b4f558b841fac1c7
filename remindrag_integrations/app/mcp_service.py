"""What the MCP tools do, without the protocol: one store served to many agent sessions, kept
in step with the other processes that use the same store (:mod:`.mcp_server` wires it to MCP).

A store directory (the embedded store) is shared between processes through its generations:
- a read uses the generation this server loaded last, and loads again first when another
  process has switched ``CURRENT`` to a newer one; the switch is atomic, so a read never sees
  a half-written store;
- a write takes the directory's lock, loads the newest generation under it, applies the
  change and saves before it lets go: two servers on one directory take turns and neither
  loses the other's writes, and a server killed mid-write leaves the last generation current.
A PostgreSQL store is shared as it is (writes go through; the store serialises them, and a
trace is memorized once whichever server asks).

A search's trace is kept until a write saves it with the store (``remember`` saves it marked
as memorized): in this server's memory, and, for a store directory, as a file under
``DIR/mcp-traces/``, so that ``remember`` works from another server process too. Clients such
as ``langchain-mcp-adapters`` and ``llama-index-tools-mcp`` start a new server for every tool
call by default.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import InvalidArgumentError, ReMindError
from ..core.types import Trace
from ..core.workers import cpus
from .specs import CLIError

MAX_PENDING_TRACES = 1000  # traces of searches kept for remember / feedback until saved
MAX_TEXTS = 1000  # documents one add_documents call may carry
LOCK_WAIT = 60.0  # seconds a write waits for another writer (then a tool error says so)
SHELF = "mcp-traces"


class TraceShelf:
    """Searches' traces not yet saved with the store, one JSON file each (written whole with
    a rename), the newest ``keep`` kept (pruned every ``keep // 10`` puts, so at most
    ``1.1 × keep`` files wait)."""

    def __init__(self, folder: Path, keep: int = MAX_PENDING_TRACES) -> None:
        self.folder, self.keep = folder, keep
        self._puts = 0  # since the last pruning

    def _path(self, trace_id: str) -> Path | None:
        ok = trace_id.isalnum() and len(trace_id) <= 64  # an id never names another file
        return self.folder / f"{trace_id}.json" if ok else None

    def put(self, trace: Trace) -> None:
        path = self._path(trace.trace_id)
        if path is None:
            return
        self.folder.mkdir(exist_ok=True)
        tmp = self.folder / f".{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(trace.to_dict()), encoding="utf-8")
        os.replace(tmp, path)
        self._puts += 1
        if self._puts >= max(self.keep // 10, 1):  # prune now and then (listing is not free)
            self._puts = 0
            files = list(self.folder.glob("*.json"))
            if len(files) > self.keep:  # oldest first
                files.sort(key=lambda f: f.stat().st_mtime)
                for old in files[: len(files) - self.keep]:
                    old.unlink(missing_ok=True)

    def get(self, trace_id: str) -> Trace | None:
        path = self._path(trace_id)
        try:
            return Trace.from_dict(json.loads(path.read_text(encoding="utf-8"))) if path else None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # gone (saved by another server) or unreadable: unknown here

    def drop(self, trace_ids: Sequence[str]) -> None:
        for tid in trace_ids:
            path = self._path(tid)
            if path is not None:
                path.unlink(missing_ok=True)


class ReadOnlyError(ReMindError):
    """A write asked of a server started with ``--read-only``."""


class StoreService:
    """The operations behind the MCP tools on the store ``args`` names (``--store``,
    ``--namespace``, ``--llm``, ``--cache``); ``local_files`` allows ``add_documents`` to read
    paths (a stdio server runs as its user; an HTTP server takes texts only)."""

    def __init__(
        self, args: argparse.Namespace, *, read_only: bool = False, local_files: bool = True
    ) -> None:
        from .session import _is_dsn

        self.args = args
        self.read_only = read_only
        self.local_files = local_files
        self.shared_db = _is_dsn(args)
        self._lock = threading.RLock()  # one request at a time swaps or writes the engine
        self._searching = threading.BoundedSemaphore(max(2, cpus()))
        self._pending: OrderedDict[str, Trace] = OrderedDict()  # not yet saved with the store
        self._writes = {"applied": 0, "skipped": 0}
        self._generation: str | None = None
        self._shelf = None if self.shared_db else TraceShelf(self.root / SHELF)
        self.engine = self._open()

    # --- the store across processes ---------------------------------------------------------
    @property
    def root(self) -> Path:
        return Path(self.args.store).resolve()

    def _current(self) -> str | None:
        from ..stores.generations import current_or_none

        return current_or_none(self.root)

    def _open(self) -> Any:
        """The engine over the newest saved store (read access: no lock held)."""
        from .session import open_engine

        if self.shared_db:
            return open_engine(self.args)
        self._generation = self._current()  # before the load: a newer one is seen next time
        engine = open_engine(argparse.Namespace(**{**vars(self.args), "command": "search"}))
        engine.store.close()
        return self._adopt(engine)

    def _adopt(self, engine: Any) -> Any:
        """Hand this server's unsaved traces to a freshly loaded engine."""
        for trace in self._pending.values():
            if engine.store.load_trace(trace.trace_id) is None:
                engine.store.save_trace(trace.to_dict())
        return engine

    def _fresh(self) -> Any:
        """The engine, loaded again when another process saved the store since."""
        now = None if self.shared_db else self._current()
        if now != self._generation:
            from ..stores import InMemoryGraphStore

            self._generation = now  # before the load, as in _open
            self.engine = self._load(InMemoryGraphStore.load(self.root))
        return self.engine

    def _load(self, store: Any) -> Any:
        """The engine saved in the directory over ``store``, with this server's LLM and
        embedder (loaded once, at start)."""
        from ..engine import ReMindRAG

        engine = ReMindRAG.load(
            self.root, llm=self.engine.llm, embeddings=self.engine.embedder, store=store
        )
        return self._adopt(engine)

    def _write(self, change: Callable[[Any], Any]) -> Any:
        """Apply ``change(engine)`` to the newest store and persist it, under the store's lock."""
        if self.read_only:
            raise ReadOnlyError("this server is read-only (started with --read-only)")
        if self.shared_db:
            return change(self.engine)
        from ..stores import InMemoryGraphStore

        store = InMemoryGraphStore.open(self.root, self.args.namespace, lock=True, wait=LOCK_WAIT)
        try:
            engine = self._load(store)
            result = change(engine)
            engine.save(self.root)
            self._generation = self._current()  # ours: still under the lock
        finally:
            store.close()
        self.engine = engine
        if self._shelf is not None:  # saved with the store
            self._shelf.drop(list(self._pending))
        self._pending.clear()
        return result

    def _known(self, trace_id: str) -> None:
        """Raise :class:`UnknownTraceError` unless the trace is a search of this server not
        saved yet, one another server left on the shelf (then it is this server's too), or
        saved in the store. Loads the store again only in the last case."""
        if trace_id in self._pending:
            return
        shelved = self._shelf.get(trace_id) if self._shelf is not None else None
        if shelved is None:
            self._fresh().trace(trace_id)
            return
        self._pending[trace_id] = shelved
        self._adopt(self.engine)

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
        with self._lock:
            engine = self._fresh()
        # searches run side by side, as many as there are CPUs (the engine takes concurrent
        # reads; a write swaps in a new engine and leaves this one to the searches still on
        # it; more threads than CPUs would only contend for them), the bookkeeping in turn
        with self._searching:
            retrieval = engine.retrieve(query, **overrides)
        trace = retrieval.trace
        if not self.shared_db:
            with self._lock:
                if engine is not self.engine:  # a write or reload came meanwhile: adopt it
                    self.engine.store.save_trace(trace.to_dict())
                self._pending[trace.trace_id] = trace
                while len(self._pending) > MAX_PENDING_TRACES:
                    self._pending.popitem(last=False)
                if self._shelf is not None and not self.read_only:
                    self._shelf.put(trace)
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
        with self._lock:
            self._known(trace_id)  # an unknown trace fails before the store's lock is taken
            write = self._write(lambda e: e.memorize(trace_id, answer, cited=named))
        return self._written(write)

    def feedback(
        self, trace_id: str, helpful: bool, chunk_ids: Sequence[str] | None = None
    ) -> dict[str, Any]:
        with self._lock:
            self._known(trace_id)
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
        with self._lock:
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
        with self._lock:
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
        with self._lock:
            return dict(self._write(lambda e: e.delete(ids)))

    def stats(self) -> dict[str, Any]:
        with self._lock:
            engine = self._fresh()
            counts = dict(engine.store.counts())
        return {
            **counts,
            "writes_applied_here": self._writes["applied"],
            "writes_skipped_here": self._writes["skipped"],
            "read_only": self.read_only,
        }

    # --- the resources ----------------------------------------------------------------------
    def trace_text(self, trace_id: str) -> str:
        from .display import describe_path

        with self._lock:
            self._known(trace_id)
            engine = self._fresh()  # a reload adopts this server's unsaved traces
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

        with self._lock:
            engine = self._fresh()
            saved = [Trace.from_dict(t) for t in engine.store.recent_traces(traces)]
            return render_memory_view(engine.store, saved)


def check_store(args: argparse.Namespace) -> None:
    """Fail before serving when ``--store`` names no saved store (a DSN is checked on open)."""
    from ..stores import InMemoryGraphStore, is_postgres_dsn

    if not is_postgres_dsn(args.store) and not InMemoryGraphStore.exists(args.store):
        raise CLIError(
            f"no store at {args.store}: run 'remindrag index PATH --store {args.store}' first"
        )
