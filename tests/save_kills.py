"""``kill -9`` at every step of a save (issue 34 item 1), for tests/test_save_kills.py and the
``kill_every_step`` row of benchmarks/faults.py.

A step is one change a save makes in the store's folder: a folder made, a file opened for
writing, a rename, a removal (Python's audit events ``os.mkdir``, ``open`` with a write flag,
``os.rename`` (``os.replace`` too), ``os.remove``, ``os.rmdir``). :func:`kill_every_step`
runs one interpreter (this file as a script) that counts the steps of a save, then, for each
step ``n``, forks a child that saves and kills itself with ``SIGKILL`` just before its step
``n``: a real ``kill -9``, at every place one can land. Each child leaves the folder
``WHERE/NN``; :func:`problems` says what is wrong with one (``[]``: nothing).

Scenarios: ``first save`` (``ReMindRAG(...).save(DIR)`` into a new folder), ``folder store``
(``ReMindRAG(store=DIR)`` then its first ``insert``), ``update save`` (a save where the
engine saved before, with a document added since).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

SCENARIOS = ("first save", "folder store", "update save")
DIM = 32
TEXTS = [
    ("d1", "Scott Derrickson is an American director. He directed Sinister in Los Angeles."),
    ("d2", "Ed Wood was an American filmmaker. Conrad Brooks acted in films by Ed Wood."),
    ("d3", "Sinister is a horror film. Ethan Hawke starred in Sinister."),
]
ADDED = ("d4", "Ethan Hawke is an American actor. He starred in Sinister.")
ROOT = Path(__file__).resolve().parents[1]
_EVENTS = ("open", "os.mkdir", "os.rename", "os.remove", "os.rmdir")


def kill_every_step(scenario: str, where: Path) -> dict[str, Any]:
    """Kill a save of ``scenario`` at each of its steps, one folder ``where/NN`` per step;
    returns ``{"steps": [the steps of a whole save, as (event, name)], "folders": [...]}``."""
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


def switched(steps: list[list[str]], n: int) -> bool:
    """True when a save killed before its step ``n`` had switched ``CURRENT`` already."""
    return any(name.endswith("-> CURRENT") for _, name in steps[: n - 1])


def problems(scenario: str, folder: Path, switched: bool = False) -> list[str]:
    """What is wrong with ``folder``, left by a save of ``scenario`` killed at some step
    (``switched``: after its ``CURRENT`` switch): it must load (an update save's new store
    once switched, else the previous one; after a first save, none, with a typed not-found
    error) and take the next save, which leaves no temporary file nor half-made generation.
    A typed error where none belongs is one of the problems; any other exception is raised."""
    from remindrag_integrations import Document, ReMindError, ReMindRAG
    from remindrag_integrations.errors import StoreEmptyError, StoreNotFoundError
    from remindrag_integrations.stores import InMemoryGraphStore
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

    docs = [Document(i, t) for i, t in TEXTS]
    if scenario == "update save":  # the save before the killed one, or the killed one
        had = sorted([i for i, _ in TEXTS] + ([ADDED[0]] if switched else []))
        eng = attempt("load", load)
        if eng is not None and sorted(eng.store.document_ids()) != had:
            found.append(f"loads {sorted(eng.store.document_ids())}, not {had}")
        if eng is not None:  # the next save: an update again
            eng.insert([Document(*ADDED)])
            attempt("the next save", lambda: eng.save(folder))
        want = sorted([*(i for i, _ in TEXTS), ADDED[0]])
    else:  # a first save that did not finish: nothing was saved
        if InMemoryGraphStore.exists(folder):
            found.append("InMemoryGraphStore.exists() is True")
        attempt("load", load, StoreNotFoundError)
        attempt(
            "store=DIR, retrieve",
            lambda: ReMindRAG(embeddings=HashEmbedder(DIM), store=folder).retrieve("Who?"),
            StoreEmptyError,
        )
        if scenario == "folder store":  # the next save: the first insert again
            attempt(
                "the next save",
                lambda: ReMindRAG(embeddings=HashEmbedder(DIM), store=folder).insert(docs),
            )
        else:  # a new engine, no overwrite=True
            fresh = ReMindRAG(embeddings=HashEmbedder(DIM))
            fresh.insert(docs)
            attempt("the next save", lambda: fresh.save(folder))
        want = [i for i, _ in TEXTS]
    after = attempt("load after the next save", load)
    if after is not None and sorted(after.store.document_ids()) != want:
        found.append(f"after the next save it loads {sorted(after.store.document_ids())}")
    left = sorted(p.name for p in folder.glob("*") if p.name.endswith(".tmp"))
    if left:
        found.append(f"temporary files survived the next save: {left}")
    if (folder / ".first-save").exists():
        found.append("the next save left the first-save mark")
    gens = len(list(folder.glob("gen-*")))
    if gens > (2 if scenario == "update save" else 1):
        found.append(f"{gens} generations after the next save")
    return found


# --- the script: one interpreter, one forked child per step ----------------------------------

_armed: dict[str, Any] = {"root": "", "at": 0, "seen": []}


def _hook(event: str, args: tuple) -> None:
    """Count the steps inside the armed folder; SIGKILL this process before step ``at``."""
    root = _armed["root"]
    if not root or event not in _EVENTS:
        return
    if event == "open":
        if isinstance(args[0], int) or not args[2] & (os.O_WRONLY | os.O_RDWR):
            return  # a read, or by file descriptor
    path = os.fsdecode(args[0])
    if os.path.isabs(path):
        if path != root and not path.startswith(root + os.sep):
            return
        name = os.path.relpath(path, root)
    else:  # relative to a folder descriptor: only rmtree of a folder inside the store
        name = f"(in a removed folder) {path}"
    if event == "os.rename":
        name += " -> " + os.path.relpath(os.fsdecode(args[1]), root)
    _armed["seen"].append((event, name))
    if len(_armed["seen"]) == _armed["at"]:
        os.kill(os.getpid(), signal.SIGKILL)


def _engine(store: Any = None) -> Any:
    from remindrag_integrations import Document, ReMindRAG
    from remindrag_integrations.testing import HashEmbedder

    eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=store)
    if store is None:
        eng.insert([Document(i, t) for i, t in TEXTS])
    return eng


def _save(scenario: str, folder: Path, at: int) -> list[tuple[str, str]]:
    """One save of ``scenario`` into ``folder`` with the hook armed (killed at step ``at``;
    0: never); returns the steps it took."""
    from remindrag_integrations import Document

    eng = None
    if scenario == "first save":
        eng = _engine()
    elif scenario == "update save":
        eng = _engine()
        eng.save(folder)
        eng.insert([Document(*ADDED)])
    _armed.update(root=str(folder), at=at, seen=[])
    try:
        if scenario == "folder store":
            _engine(folder).insert([Document(i, t) for i, t in TEXTS])
        else:
            eng.save(folder)
    finally:
        _armed["root"] = ""
    return list(_armed["seen"])


def main(scenario: str, where: Path) -> None:
    sys.addaudithook(_hook)
    where.mkdir(parents=True, exist_ok=True)
    steps = _save(scenario, where / "whole", 0)
    folders = []
    for n in range(1, len(steps) + 1):
        folder = where / f"{n:02d}"
        pid = os.fork()
        if pid == 0:  # the child: save, killed at step n
            try:
                _save(scenario, folder, n)
            finally:
                os._exit(3)  # not killed: the test reports it
        _, status = os.waitpid(pid, 0)
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            raise SystemExit(f"{scenario}: the save was not killed at step {n} ({status})")
        folders.append(folder.name)
    (where / "steps.json").write_text(json.dumps({"steps": steps, "folders": folders}))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
