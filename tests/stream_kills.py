"""``kill -9`` while a big corpus streams in (issue 35), for tests/test_stream_kills.py.

One interpreter (this file as a script) imports the package once, then forks a child per run:
``remindrag index CORPUS --store STORE --batch-size B`` (the command line's ``main``) or the
Python API's ``ReMindRAG(store=STORE).insert_stream(JsonlDocuments(CORPUS))``, killed with
``SIGKILL`` at a chosen point, then the same run again, not killed, which must finish
(``api-ahead``: the Python API embedding ahead, each batch built in two insert batches). Each
child's output goes to ``WHERE/<name>.<try>.out``; ``WHERE/runs.json`` says how each ended.

Points (``KIND:ARG``):

- ``between:K``: after batch K was committed and reported, before batch K+1 is read;
- ``mid-batch:K``: batch K extracted, before its graph is built and written;
- ``commit:K``: inside the K-th insert batch's transaction (the folder store's SQLite one or
  PostgreSQL's), every row written, before it commits;
- ``external:N``: the parent kills the child (``kill -9`` from outside) once it has printed
  N progress lines, wherever it is then.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
BATCH = 10

_state: dict[str, Any] = {"count": 0}


def corpus(path: Path, n: int = 50) -> list[str]:
    """``n`` HotpotQA passages of the test sample as a JSONL file; returns their ids."""
    rows = []
    with open(DATA / "hotpotqa_train100_sample.corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            rows.append({"id": row["pid"], "title": row["title"], "text": row["text"]})
    rows = rows[:n]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return [r["id"] for r in rows]


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(point: str) -> None:
    """Patch the places a kill at ``point`` lands (in a child only)."""
    from remindrag_integrations.core import insert, stream

    kind, _, arg = point.partition(":")
    if kind == "between":
        add = stream.Tally.add

        def counted_add(self: Any, *args: Any) -> Any:
            got = add(self, *args)
            if self.batches == int(arg):
                _die()
            return got

        stream.Tally.add = counted_add  # type: ignore[method-assign]
    elif kind == "mid-batch":
        commit = insert.commit

        def counted_commit(*args: Any, **kwargs: Any) -> Any:
            _state["count"] += 1
            if _state["count"] == int(arg):
                _die()
            return commit(*args, **kwargs)

        insert.commit = counted_commit
    elif kind == "commit":
        from remindrag_integrations.stores import SQLiteGraphStore
        from remindrag_integrations.stores.postgres.graph import GraphWrites

        store = GraphWrites._store  # a PostgreSQL write's last step before its COMMIT

        def counted_store(self: Any, *args: Any) -> Any:
            out = store(self, *args)
            _state["count"] += 1
            if _state["count"] == int(arg):
                _die()
            return out

        GraphWrites._store = counted_store  # type: ignore[method-assign]
        persist = SQLiteGraphStore._persist  # a folder store's write: its rows, then COMMIT

        def counted_persist(self: Any, con: Any) -> None:
            persist(self, con)
            _state["count"] += 1
            if _state["count"] == int(arg):
                _die()

        SQLiteGraphStore._persist = counted_persist  # type: ignore[method-assign]
    elif kind != "external":
        raise SystemExit(f"unknown kill point {point!r}")


def _run(how: str, corpus_path: Path, store: str, namespace: str) -> None:
    """One run in this process: the command line, or the Python API."""
    if how == "cli":
        from remindrag_integrations.app.cli import main

        argv = ["index", str(corpus_path), "--store", store, "--batch-size", str(BATCH)]
        code = main([*argv, "--namespace", namespace])
        sys.stdout.flush()
        os._exit(code)
    from remindrag_integrations import JsonlDocuments, ReMindRAG

    # api-ahead: each batch of the stream built in two insert batches, the second embedded
    # while the first is written (IndexConfig.embed_ahead)
    cfg = {"embed_ahead": True, "insert_batch_documents": BATCH // 2} if how == "api-ahead" else {}
    eng = ReMindRAG(store=store, namespace=namespace, index_config=cfg or None)
    report = eng.insert_stream(
        JsonlDocuments(corpus_path),
        batch_documents=BATCH,
        progress=lambda p: print(f"committed {p}", flush=True),
    )
    print(f"indexed {report.documents} documents, {report.chunks} chunks", flush=True)
    sys.stdout.flush()
    os._exit(0)


def _child(out: Path, point: str, *run: Any) -> int:
    """Fork a child that runs ``run`` (killed at ``point``; "" never) with its output in
    ``out``; returns its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            if point:
                _arm(point)
            _run(*run)
        finally:
            os._exit(3)
    return pid


def _external(out: Path, lines: int, pid: int) -> int:
    """Kill ``pid`` once ``out`` holds ``lines`` progress lines; its wait status."""
    import time

    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status  # it ended before the kill: the test reports it
        text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        if text.count("committed ") >= lines:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1]
        time.sleep(0.05)


def main(where: Path, how: str, store: str, points: list[str]) -> None:
    """Each point: a killed run, then the same run again (namespace = the point's name, a
    folder store under ``store/<name>``); ``whole``: one run never killed."""
    import remindrag_integrations.app.cli  # noqa: F401  (imported once, before the forks)
    import remindrag_integrations.stores.postgres  # noqa: F401

    path = where / "corpus.jsonl"
    corpus(path)
    runs = {}
    for point in ["", *points]:
        name = _name(point)
        target = store if store.startswith("postgresql://") else str(Path(store) / name)
        statuses = []
        for attempt, armed in enumerate([point, ""] if point else [""]):
            out = where / f"{name}.{attempt}.out"
            kind, _, arg = armed.partition(":")
            pid = _child(out, "" if kind == "external" else armed, how, path, target, name)
            status = _external(out, int(arg), pid) if kind == "external" else os.waitpid(pid, 0)[1]
            killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
            statuses.append(
                {"killed": killed, "exit": code, "out": out.name, "held": held(target, name)}
            )
        runs[name] = {"point": point, "store": target, "runs": statuses}
    (where / "runs.json").write_text(json.dumps(runs, indent=1), encoding="utf-8")


def held(store: str, namespace: str) -> int:
    """How many documents ``store`` holds now (what a run committed)."""
    if store.startswith("postgresql://"):
        from remindrag_integrations.stores.postgres import PostgresGraphStore

        pg = PostgresGraphStore(store, namespace=namespace)
        try:
            return int(pg.counts()["documents"])
        finally:
            pg.close()
    from remindrag_integrations.stores import SQLiteGraphStore

    if not SQLiteGraphStore.exists(store):
        return 0
    folder = SQLiteGraphStore.load(store)
    try:
        return len(folder.document_ids())
    finally:
        folder.close()


def _name(point: str) -> str:
    return "whole" if not point else point.replace(":", "_").replace("-", "_")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:])
