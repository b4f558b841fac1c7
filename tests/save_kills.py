"""``kill -9`` at every step of a save and of a folder store's writes (issue 34 item 1), for
tests/test_save_kills.py and the ``kill_every_step`` row of benchmarks/faults.py.

A step is one change a save or a write makes in the store's folder: a folder made, a file
opened for writing, a rename, a removal (Python's audit events ``os.mkdir``, ``open`` with a
write flag, ``os.rename`` (``os.replace`` too), ``os.remove``, ``os.rmdir``), a database
opened there (``sqlite3.connect``), and each SQL statement that writes run on it (SQLite's
trace callback, set on every connection to a database inside the folder: ``BEGIN``, each
``INSERT``/``UPDATE``/``DELETE``, ``COMMIT``...; a statement run again for the next row of
the same ``executemany`` is the same step, not a new one). :func:`kill_every_step` runs one
interpreter (this file as a script) that counts the steps, then, for each step ``n``, forks
a child that does the same and kills itself with ``SIGKILL`` just before its step ``n``: a
real ``kill -9``, at every place one can land. Each child leaves the folder ``WHERE/NN``;
:func:`problems` says what is wrong with one (``[]``: nothing).

Scenarios: ``first save`` (an in-memory engine's ``save(DIR)`` into a new folder: a new
database, renamed into place), ``folder store`` (``ReMindRAG(store=DIR)`` on a new folder,
then three write calls: an insert, another insert, a delete; each one transaction), ``update
save`` (a save where the engine saved before, with a document added since).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

SCENARIOS = ("first save", "folder store", "update save")
DIM = 32
TEXTS = [
    ("d1", "Scott Derrickson is an American director. He directed Sinister in Los Angeles."),
    ("d2", "Ed Wood was an American filmmaker. Conrad Brooks acted in films by Ed Wood."),
    ("d3", "Sinister is a horror film. Ethan Hawke starred in Sinister."),
]
ADDED = ("d4", "Ethan Hawke is an American actor. He starred in Sinister.")
DELETED = "d2"
STATES = (  # the folder store's documents after each of its write calls
    [],
    ["d1", "d2", "d3"],
    ["d1", "d2", "d3", "d4"],
    ["d1", "d3", "d4"],
)
ROOT = Path(__file__).resolve().parents[1]
_EVENTS = ("open", "os.mkdir", "os.rename", "os.remove", "os.rmdir")
_DB = "store.db"


def kill_every_step(scenario: str, where: Path) -> dict[str, Any]:
    """Kill ``scenario`` at each of its steps, one folder ``where/NN`` per step; returns
    ``{"steps": [the steps of the whole scenario, as (event, name)], "folders": [...]}``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run(
        [sys.executable, __file__, scenario, str(where)],
        check=True,
        env=env,
        timeout=600,
    )
    return json.loads((where / "steps.json").read_text())


def switched(steps: list[list[str]], n: int) -> int:
    """How far the scenario got when it was killed before its step ``n``: how many writes
    of data were committed to the store's database (a transaction that wrote documents or
    a change row, ended by its ``COMMIT`` step; or a new database holding such a
    transaction, renamed into place): for a save, 1 once its store is in place, else 0; for
    the folder store, how many of its write calls were committed."""
    committed, held, writing = 0, set(), set()
    for event, name in steps[: n - 1]:
        if event == "os.rename" and name.endswith(f"-> {_DB}"):
            committed += name.split(" -> ")[0] in held  # a new database, with its data
        elif event == "sql":
            db, sql = name.split(": ", 1)
            if sql.startswith(("INSERT INTO documents", "INSERT INTO changes")):
                writing.add(db)
            elif sql == "COMMIT" and db in writing:
                writing.discard(db)
                if db == _DB:
                    committed += 1
                else:
                    held.add(db)
    return committed


def problems(scenario: str, folder: Path, switched: int = 0) -> list[str]:
    """What is wrong with ``folder``, left by ``scenario`` killed at some step (``switched``:
    how far it got, :func:`switched`): it must open with every write that was committed and
    nothing else (an update save's new store once renamed into place, else the previous one;
    after a first save, none, with a typed not-found error, or the whole new one; the folder
    store's committed calls), and take the next run of the same calls (no ``overwrite=True``),
    which leaves no temporary file. A typed error where none belongs is one of the problems;
    any other exception is raised."""
    import shutil

    from remindrag_integrations import Document, ReMindError, ReMindRAG
    from remindrag_integrations.errors import StoreEmptyError, StoreNotFoundError
    from remindrag_integrations.stores import SQLiteGraphStore, sqlite_store
    from remindrag_integrations.testing import HashEmbedder

    found: list[str] = []

    def attempt(what: str, call: Any, expected: type[Exception] | None = None) -> Any:
        """``call()``, or None when it raised ``expected`` or (noted) another typed error;
        a call that returned where ``expected`` was due is noted too."""
        try:
            got = call()
        except ReMindError as exc:
            if expected is None or not isinstance(exc, expected):
                found.append(f"{what}: {type(exc).__name__}: {exc}")
            return None
        if expected is not None:
            found.append(f"{what}: no {expected.__name__}")
        return got

    def load() -> Any:
        return ReMindRAG.load(folder, embeddings=HashEmbedder(DIM))

    def holds(eng: Any, want: list[str], when: str) -> None:
        got = sorted(eng.store.document_ids())
        eng.close()
        if got != want:
            found.append(f"{when} it loads {got}, not {want}")

    docs = [Document(i, t) for i, t in TEXTS]
    if scenario == "update save":  # the save before the killed one, or the killed one
        eng = attempt("load", load)
        if eng is not None:
            holds(eng, sorted([i for i, _ in TEXTS] + ([ADDED[0]] if switched else [])), "")
        again = attempt("open again", load)
        if again is not None:  # the next run: the document added again, saved again
            again.insert([Document(*ADDED)])
            attempt("the next save", lambda: again.save(folder))
            again.close()
        want = sorted([*(i for i, _ in TEXTS), ADDED[0]])
    elif scenario == "folder store":  # the calls committed, then the same calls again
        if not sqlite_store.holds_database(folder):
            if switched:
                found.append(f"{switched} calls committed and no {_DB}")
            attempt("load", load, StoreNotFoundError)
        else:
            eng = attempt("load", load)
            if eng is not None:
                holds(eng, STATES[switched], "")
        attempt("the next run", lambda: _folder_calls(folder))
        want = STATES[-1]
    elif switched:  # a first save killed after its rename: the whole store is there
        eng = attempt("load", load)
        if eng is not None:
            holds(eng, [i for i, _ in TEXTS], "")
        want = [i for i, _ in TEXTS]
    else:  # a first save that did not finish: nothing was saved
        if SQLiteGraphStore.exists(folder):
            found.append("SQLiteGraphStore.exists() is True")
        attempt("load", load, StoreNotFoundError)
        probe = folder.with_name(f"{folder.name}-probe")  # opening makes a store: a copy
        if folder.exists():
            shutil.copytree(folder, probe)

        def retrieve() -> Any:
            eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=probe)
            try:
                return eng.retrieve("Who?")
            finally:
                eng.close()

        attempt("store=DIR, retrieve", retrieve, StoreEmptyError)
        fresh = ReMindRAG(embeddings=HashEmbedder(DIM))  # a new engine, no overwrite=True
        fresh.insert(docs)
        attempt("the next save", lambda: fresh.save(folder))
        want = [i for i, _ in TEXTS]
    after = attempt("load after the next run", load)
    if after is not None:
        holds(after, want, "after the next run")
    left = sorted(p.name for p in folder.glob("*") if p.name.endswith(".tmp"))
    if left:
        found.append(f"temporary files survived the next run: {left}")
    return found


def _folder_calls(folder: Path) -> None:
    """The folder store scenario's calls: open, insert, insert another, delete one."""
    from remindrag_integrations import Document, ReMindRAG
    from remindrag_integrations.testing import HashEmbedder

    eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=folder)
    try:
        eng.insert([Document(i, t) for i, t in TEXTS])
        eng.insert([Document(*ADDED)])
        eng.delete([DELETED])
    finally:
        eng.close()


# --- the script: one interpreter, one forked child per step ----------------------------------

_armed: dict[str, Any] = {"root": "", "at": 0, "seen": [], "last": None}


def _inside(path: str) -> str | None:
    """``path`` relative to the armed folder, or None when it is outside."""
    root = _armed["root"]
    if path.startswith("file:"):  # a URI (``?mode=ro``)
        path = unquote(urlparse(path).path)
    if not os.path.isabs(path) or (path != root and not path.startswith(root + os.sep)):
        return None
    return os.path.relpath(path, root)


def _step(event: str, name: str) -> None:
    _armed["seen"].append((event, name))
    if len(_armed["seen"]) == _armed["at"]:
        os.kill(os.getpid(), signal.SIGKILL)


def _traced(db: str) -> Any:
    """A trace callback counting the writing statements run on the database ``db``."""

    def trace(sql: str) -> None:
        if not _armed["root"]:
            return
        text = " ".join(sql.split())
        head = text.split(" ", 1)[0].upper()
        if head == "SELECT" or (head == "PRAGMA" and "journal_mode" not in text):
            return  # reads
        shape = re.sub(r"'(?:[^']|'')*'|X'[0-9A-Fa-f]*'|-?\b\d+(?:\.\d+)?(?:e-?\d+)?\b", "?", text)
        if (db, shape) == _armed["last"]:
            return  # the next row of the same executemany
        _armed["last"] = (db, shape)
        _step("sql", f"{db}: {shape[:60]}")

    return trace


def _connect(real: Any) -> Any:
    """``sqlite3.connect`` that counts opening a database inside the armed folder as a step
    and traces the statements run on it."""

    def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
        name = _inside(os.fsdecode(database)) if _armed["root"] else None
        if name is not None:
            _armed["last"] = None
            _step("sqlite3.connect", name)
        con = real(database, *args, **kwargs)
        if name is not None:
            con.set_trace_callback(_traced(name))
        return con

    return connect


def _hook(event: str, args: tuple) -> None:
    """Count the steps inside the armed folder; SIGKILL this process before step ``at``."""
    if not _armed["root"] or event not in _EVENTS:
        return
    if event == "open":
        if isinstance(args[0], int) or not args[2] & (os.O_WRONLY | os.O_RDWR):
            return  # a read, or by file descriptor
    path = os.fsdecode(args[0])
    if os.path.isabs(path):
        name = _inside(path)
        if name is None:
            return
    else:  # relative to a folder descriptor: only rmtree of a folder inside the store
        name = f"(in a removed folder) {path}"
    if event == "os.rename":
        name += " -> " + os.path.relpath(os.fsdecode(args[1]), _armed["root"])
    _armed["last"] = None
    _step(event, name)


def _engine() -> Any:
    from remindrag_integrations import Document, ReMindRAG
    from remindrag_integrations.testing import HashEmbedder

    eng = ReMindRAG(embeddings=HashEmbedder(DIM))
    eng.insert([Document(i, t) for i, t in TEXTS])
    return eng


def _run(scenario: str, folder: Path, at: int) -> list[tuple[str, str]]:
    """One run of ``scenario`` into ``folder`` with the hook armed (killed at step ``at``;
    0: never); returns the steps it took."""
    from remindrag_integrations import Document

    eng = None
    if scenario != "folder store":
        eng = _engine()
    if scenario == "update save":
        eng.save(folder)
        eng.insert([Document(*ADDED)])
    _armed.update(root=str(folder), at=at, seen=[], last=None)
    try:
        if scenario == "folder store":
            _folder_calls(folder)
        else:
            eng.save(folder)
    finally:
        _armed["root"] = ""
    return list(_armed["seen"])


def arm() -> None:
    """Count (and kill at) the steps of this process: the audit hook, ``sqlite3.connect``."""
    import sqlite3

    sys.addaudithook(_hook)
    sqlite3.connect = _connect(sqlite3.connect)  # type: ignore[assignment]


def main(scenario: str, where: Path) -> None:
    arm()
    where.mkdir(parents=True, exist_ok=True)
    steps = _run(scenario, where / "whole", 0)
    folders = []
    for n in range(1, len(steps) + 1):
        folder = where / f"{n:02d}"
        pid = os.fork()
        if pid == 0:  # the child: the same run, killed at step n
            try:
                _run(scenario, folder, n)
            finally:
                os._exit(3)  # not killed: the test reports it
        _, status = os.waitpid(pid, 0)
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            raise SystemExit(f"{scenario}: the run was not killed at step {n} ({status})")
        folders.append(folder.name)
    (where / "steps.json").write_text(json.dumps({"steps": steps, "folders": folders}))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
