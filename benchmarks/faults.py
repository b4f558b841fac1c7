"""The long part of the fault suite (issue 13): hostile but realistic use, counted.

Rows: fuzzed LLM replies across every stage; ``kill -9`` during save; every byte of every
store file flipped; two concurrent savers (threads, then processes); two processes
memorizing on one directory; threads reading while one updates. Issue 26 adds: hostile store
directories (paths out of the store, links, FIFOs); retrieves during updates and deletes (a
failed retrieve counts as lost); the public API with wrong types and failing parts (a call
that runs with a coerced value counts as lost); disk full / read-only during save; the exit
after an LLM timeout. Issue 34 adds: ``kill -9`` at every step of a first save, of the folder
store's first insert and of an update save (tests/save_kills.py). Each row counts what was tried, what survived (a correct result or a
typed ``ReMindError``), crashes (any other exception, or a hang) and lost (data missing or
silently wrong). Prints a table and writes JSON.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/faults.py --out benchmarks/results/faults.json
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import hashlib
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from remindrag_integrations import Document, ReMindError, ReMindRAG, StoreError
from remindrag_integrations.core.config import IndexConfig
from remindrag_integrations.core.ids import chunk_of
from remindrag_integrations.errors import StoreCorruptError
from remindrag_integrations.stores import InMemoryGraphStore, generations
from remindrag_integrations.testing import HashEmbedder, ScriptedLLM

DIM = 32
TEXTS = [
    ("d1", "Scott Derrickson is an American director. He directed Sinister in Los Angeles."),
    ("d2", "Ed Wood was an American filmmaker. Conrad Brooks acted in films by Ed Wood."),
    ("d3", "Sinister is a horror film. Ethan Hawke starred in Sinister."),
]
QUERIES = ["Who directed Sinister?", "Who acted in films by Ed Wood?", "Who starred in Sinister?"]


def engine(store: Any = None, llm: Any = None, **kw: Any) -> ReMindRAG:
    eng = ReMindRAG(llm=llm, embeddings=HashEmbedder(DIM), store=store, **kw)
    if not eng.store.document_ids():
        eng.insert([Document(i, t) for i, t in TEXTS])
    return eng


def memorize(eng: ReMindRAG, query: str) -> None:
    r = eng.retrieve(query, navigator={"min_similarity": -1.0})
    eng.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])


def row(name: str, tried: int, survived: int, crashes: int, lost: int) -> dict:
    return {"case": name, "tried": tried, "survived": survived, "crashes": crashes, "lost": lost}


# --- 1. fuzzed LLM replies -----------------------------------------------------------------


def hostile(rng: random.Random) -> str:
    nest = rng.choice("[{")
    pool = [
        nest * rng.randint(100, 5000),
        '{"a":' * rng.randint(100, 3000),
        "x" * rng.randint(1, 1_000_000),
        '{"title": NaN, "entities": [Infinity, -Infinity, "A"], "triples": [[1, 2, 3]]}',
        '{"title": "\\ud800", "entities": ["Al\\ud800ice", "B\\u0000ob"],'
        ' "triples": [["Al\\ud800ice", "knows \\udfff", "B\\u0000ob"]]}',
        '{"enough": false, "action": "forward", "node": "e-\\ud800"}',
        '{"enough": "maybe", "action": ["forward"], "node": {"id": 1}}',
        '{"chunks": ["c-\\ud800", 5, null], "edges": [1e309]}',
        '{"need_retrieval": "maybe", "subquestions": [{"a": 1}, null, "q\\u0000?"]}',
        "",
        "null",
        "[]",
        '{"entities": {"a": 1}, "triples": "x", "title": ["t"]}',
        '{"title": "' + "y" * rng.randint(1000, 900_000) + '", "entities": ["z"]}',
        "```json\n" + '{"enough": true}' + "\n```" + "}" * 50,
        "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(1, 200))),
        '{"answer": "\\ud83d", "chunks": ["c-0000"]}',
    ]
    return rng.choice(pool)


def fuzz_replies(n: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    served = [0]

    def reply(prompt: str) -> str:
        served[0] += 1
        return hostile(rng)

    survived = crashes = 0
    while served[0] < n:
        on_error = rng.choice(["raise", "fallback"])
        eng = ReMindRAG(
            llm=ScriptedLLM(reply),
            embeddings=HashEmbedder(DIM),
            index_config=IndexConfig(on_extraction_error=on_error),  # type: ignore[arg-type]
        )
        for op in _operations(eng, rng):
            try:
                op()
                survived += 1
            except ReMindError:
                survived += 1
            except Exception as exc:  # noqa: BLE001 - what this row counts
                crashes += 1
                print("crash:", type(exc).__name__, exc, file=sys.stderr)
    name = f"fuzzed LLM replies ({served[0]} replies, all stages; rows: operations)"
    out = row(name, survived + crashes, survived, crashes, 0)
    out["replies"] = served[0]
    return out


def _operations(eng: ReMindRAG, rng: random.Random) -> list[Callable[[], Any]]:
    """Every stage that asks the LLM: extraction, pre-query + traversal, answer, filter."""
    return [
        lambda: eng.insert([Document(i, t) for i, t in TEXTS]),
        lambda: eng.retrieve(rng.choice(QUERIES)),
        lambda: eng.answer(rng.choice(QUERIES)),
        lambda: eng.memorize(eng.retrieve(rng.choice(QUERIES)).trace_id),
    ]


# --- 2. kill -9 during save ------------------------------------------------------------------

_SAVER = """
import sys
from remindrag_integrations import ReMindRAG
from remindrag_integrations.testing import HashEmbedder
eng = ReMindRAG.load(sys.argv[1], embeddings=HashEmbedder(32))
print("ready", flush=True)
while True:
    eng.save(sys.argv[1])
"""


def kill_during_save(rounds: int, tmp: Path) -> dict:
    root = engine().save(tmp / "kill")
    want = InMemoryGraphStore.load(root).export_memory()
    survived = lost = mid_write = 0
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    for _ in range(rounds):
        p = subprocess.Popen(
            [sys.executable, "-c", _SAVER, str(root)], stdout=subprocess.PIPE, env=env
        )
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        time.sleep(random.uniform(0.0, 0.3))
        p.send_signal(signal.SIGKILL)
        p.wait()
        mid_write += bool(list(root.glob(".gen-*.tmp")))  # the kill landed inside a save
        try:
            ok = InMemoryGraphStore.load(root).export_memory() == want
        except StoreCorruptError:
            ok = False
        survived += ok
        lost += not ok
    eng = ReMindRAG.load(root, embeddings=HashEmbedder(DIM))
    eng.save(root)  # the next save cleans what killed ones left
    stale = len(list(root.glob(".*.tmp")))
    out = row("kill -9 during save", rounds, survived, 0, lost + stale)
    out["stale_temp_after_next_save"] = stale
    out["kills_inside_a_write"] = mid_write
    return out


def kill_every_step(tmp: Path) -> dict:
    """``kill -9`` before each step of a save (issue 34): a forked saver kills itself at
    step n. Survived: the folder loads (the previous save, the new one once ``CURRENT`` is
    switched, or none with ``StoreNotFoundError`` after a first save) and takes the next
    save with no temporary file left; lost: anything else a check finds (a typed error on
    the way counts too: the folder did not load or did not save); crashes: a raw exception."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import save_kills

    survived = crashes = lost = 0
    steps: dict[str, int] = {}
    for scenario in save_kills.SCENARIOS:
        where = tmp / "steps" / scenario.replace(" ", "-")
        done = save_kills.kill_every_step(scenario, where)
        steps[scenario] = len(done["steps"])
        for n in done["folders"]:
            switched = save_kills.switched(done["steps"], int(n))
            try:
                found = save_kills.problems(scenario, where / n, switched)
            except ReMindError as exc:
                found = [f"{type(exc).__name__}: {exc}"]
            except Exception as exc:  # noqa: BLE001 - what this row counts
                crashes += 1
                print("crash:", scenario, n, type(exc).__name__, exc, file=sys.stderr)
                continue
            survived += not found
            lost += bool(found)
            for problem in found:
                print("lost:", scenario, n, problem, file=sys.stderr)
    name = "kill -9 at every step of a first save, a folder store's first insert, an update"
    out = row(name, survived + crashes + lost, survived, crashes, lost)
    out["steps"] = steps
    return out


# --- 3. every byte of every store file flipped -------------------------------------------------


def _fingerprint(eng: ReMindRAG, trace_id: str) -> Any:
    """Everything a saved store holds, in comparable form."""
    s = eng.store
    nodes = sorted(n for n, _ in s.search(np.ones(DIM, np.float32), 10**6, ("entity", "anchor")))
    return (
        s.namespace,
        s.counts(),
        [(d, s.document_hash(d)) for d in sorted(s.document_ids())],
        s.export_memory(),
        eng.index_config.model_dump(),
        eng.retrieval_config.model_dump(),
        [s.get_chunk(chunk_of(a)).to_dict() for a in nodes if a.startswith("a-")],
        [n.to_dict() for n in s.get_nodes(nodes)],
        s.node_embeddings(nodes).tobytes(),
        sorted(e.to_dict().__repr__() for n in nodes for e in s.neighbors(n)),
        s.load_trace(trace_id),
    )


def flip_every_byte(tmp: Path) -> dict:
    eng = ReMindRAG(embeddings=HashEmbedder(DIM))
    eng.insert([Document(*TEXTS[0])])
    r = eng.retrieve(QUERIES[0], navigator={"min_similarity": -1.0})
    eng.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
    root = eng.save(tmp / "flip")
    want = _fingerprint(eng, r.trace_id)
    files = [p for p in root.rglob("*") if p.is_file() and p.name != ".lock"]
    tried = survived = crashes = lost = 0
    for path in files:
        data = path.read_bytes()
        for i in range(len(data)):
            tried += 1
            path.write_bytes(data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1 :])
            try:
                got = _fingerprint(ReMindRAG.load(root, embeddings=HashEmbedder(DIM)), r.trace_id)
                survived += got == want
                lost += got != want
            except ReMindError:
                survived += 1
            except Exception as exc:  # noqa: BLE001
                crashes += 1
                print("crash:", path.name, i, type(exc).__name__, exc, file=sys.stderr)
        path.write_bytes(data)
    out = row("every byte of every store file flipped", tried, survived, crashes, lost)
    out["files"] = sorted(str(p.relative_to(root)) for p in files)
    return out


# --- 4. two concurrent savers ---------------------------------------------------------------


def savers_threads(rounds: int, tmp: Path) -> dict:
    eng, root = engine(), tmp / "threads"
    survived = crashes = lost = 0
    for r in range(rounds):
        memorize(eng, QUERIES[r % len(QUERIES)])
        errors: list[BaseException] = []

        def save(errors: list[BaseException] = errors) -> None:
            try:
                eng.save(root)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=save) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        crashes += sum(not isinstance(e, ReMindError) for e in errors)
        try:
            ok = InMemoryGraphStore.load(root).export_memory() == eng.store.export_memory()
        except StoreCorruptError:
            ok = False
        survived += ok and not errors
        lost += not ok
    return row("two savers, one engine, threads", rounds, survived, crashes, lost)


def _process_saver(root: str, query: str, barrier: Any, out: Any) -> None:
    eng = ReMindRAG.load(root, embeddings=HashEmbedder(DIM))  # a copy: saved when asked
    memorize(eng, query)
    mine = eng.store.export_memory()
    barrier.wait()
    try:
        eng.save(root)
        out.put(("saved", mine))
    except ReMindError as exc:
        out.put((type(exc).__name__, mine))
    except Exception as exc:  # noqa: BLE001
        out.put(("crash " + type(exc).__name__, mine))


def savers_processes(rounds: int, tmp: Path) -> dict:
    ctx = mp.get_context("fork")
    root = str(engine().save(tmp / "procs"))
    survived = crashes = lost = 0
    for r in range(rounds):
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [
            ctx.Process(target=_process_saver, args=(root, QUERIES[(r + i) % 3], barrier, out))
            for i in range(2)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join()
        crashes += sum(kind.startswith("crash") for kind, _ in results)
        saved = [mem for kind, mem in results if kind == "saved"]
        try:
            final = InMemoryGraphStore.load(root).export_memory()
            ok = len(saved) == 1 and final == saved[0]  # one wins, the other is told
        except StoreCorruptError:
            ok = False
        survived += ok
        lost += not ok
    return row("two savers, two processes (load, memorize, save)", rounds, survived, crashes, lost)


# --- 5. two processes memorizing on one directory -------------------------------------------


def _locked_writer(root: str, worker: int, rounds: int, log: Any) -> None:
    rng = random.Random(worker)
    for _ in range(rounds):
        store = InMemoryGraphStore.open(root, wait=None)  # as the CLI does: lock, load
        eng = ReMindRAG.load(root, embeddings=HashEmbedder(DIM), store=store)
        q = rng.choice(QUERIES)
        r = eng.retrieve(q, navigator={"min_similarity": -1.0})
        sup = [c.chunk.id for c in r.chunks]
        eng.memorize(r.trace_id, supporting=sup)
        eng.save(root)
        log.put((time.monotonic_ns(), q, sup))  # still under the lock: the order of writes
        store.close()


def two_processes_memorizing(rounds: int, tmp: Path) -> dict:
    ctx = mp.get_context("fork")
    base = engine()
    root = str(base.save(tmp / "two"))
    log = ctx.Queue()
    procs = [ctx.Process(target=_locked_writer, args=(root, w, rounds, log)) for w in range(2)]
    for p in procs:
        p.start()
    writes = sorted(log.get(timeout=300) for _ in range(2 * rounds))
    for p in procs:
        p.join()
    crashes = sum(p.exitcode != 0 for p in procs)
    ref = engine()  # replay every write in lock order on one engine
    for _, q, sup in writes:
        r = ref.retrieve(q, navigator={"min_similarity": -1.0})
        ref.memorize(r.trace_id, supporting=sup)
    final = InMemoryGraphStore.load(root).export_memory()
    expected = ref.store.export_memory()
    same = sorted(final) == sorted(expected) and all(
        np.allclose(final[k], expected[k], atol=1e-6) for k in final
    )
    lost = 0 if same else 2 * rounds
    return row("two processes memorizing on one directory", 2 * rounds, len(writes), crashes, lost)


# --- 6. readers during a writer -----------------------------------------------------------


def readers_during_updates(updates: int, readers: int = 8) -> dict:
    eng = engine()
    stop = threading.Event()
    counts = {"ok": 0, "typed": 0, "crash": 0}
    lock = threading.Lock()

    def read() -> None:
        while not stop.is_set():
            try:
                r = eng.retrieve(random.choice(QUERIES), navigator={"min_similarity": -1.0})
                eng.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
                key = "ok"
            except ReMindError:
                key = "typed"
            except Exception as exc:  # noqa: BLE001
                key = "crash"
                print("crash:", type(exc).__name__, exc, file=sys.stderr)
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=read) for _ in range(readers)]
    for t in threads:
        t.start()
    for i in range(updates):
        eng.insert([Document("d1", f"Scott Derrickson directed film number {i} in Texas.")])
        eng.delete(["d3"])
        eng.insert([Document("d3", TEXTS[2][1])])
    stop.set()
    for t in threads:
        t.join()
    s = eng.store
    edges_ok = all(
        s.get_node(e.u) and s.get_node(e.v)
        for n, _ in s.search(np.ones(DIM, np.float32), 10**6, ("entity", "anchor"))
        for e in s.neighbors(n)
    )
    tried = sum(counts.values())
    out = row(
        f"{readers} threads retrieve+memorize while one updates",
        tried,
        counts["ok"] + counts["typed"],
        counts["crash"],
        0 if edges_ok else 1,
    )
    out["typed_errors"] = counts["typed"]
    return out


# --- 7. hostile store directories (issue 26) ---------------------------------------------------


def _gen(root: Path) -> Path:
    return root / (root / "CURRENT").read_text().split("\n")[0]


def _resign(root: Path, edit: Callable[[dict], None]) -> None:
    """Edit the manifest and recompute its checksum in CURRENT, as whoever can write does."""
    gen = _gen(root)
    manifest = json.loads((gen / "manifest.json").read_bytes())
    edit(manifest)
    raw = json.dumps(manifest).encode()
    (gen / "manifest.json").write_bytes(raw)
    (root / "CURRENT").write_text(f"{gen.name}\n{hashlib.sha256(raw).hexdigest()}\n")


def _attacks(tmp: Path, outside: Path, other: Path) -> dict[str, Callable[[Path], None]]:
    secret = outside.read_bytes()
    digest = hashlib.sha256(secret).hexdigest()

    def name(entry: str) -> Callable[[Path], None]:
        return lambda root: _resign(root, lambda m: m["sha256"].__setitem__(entry, digest))

    def current(text: str) -> Callable[[Path], None]:
        """CURRENT naming ``text`` with the checksum of the other store's manifest."""

        def go(root: Path) -> None:
            d = hashlib.sha256((_gen(other) / "manifest.json").read_bytes()).hexdigest()
            name = text.format(gen=_gen(root).name, other=_gen(other).name)
            (root / "CURRENT").write_text(f"{name}\n{d}\n")

        return go

    def replace(rel: str, make: Callable[[Path, bytes], None]) -> Callable[[Path], None]:
        def go(root: Path) -> None:
            path = (_gen(root) if rel != "CURRENT" else root) / rel
            data = path.read_bytes()
            path.unlink()
            make(path, data)

        return go

    def link_copy(path: Path, data: bytes) -> None:
        copy = tmp / f"copy-{path.name}-{random.random()}"
        copy.write_bytes(data)
        path.symlink_to(copy)

    def fifo_named(root: Path) -> None:
        os.mkfifo(_gen(root) / "pipe.json")
        _resign(root, lambda m: m["sha256"].__setitem__("pipe.json", digest))

    def gen_link(root: Path) -> None:
        (root / "gen-elsewhere").symlink_to(_gen(other))
        d = hashlib.sha256((_gen(other) / "manifest.json").read_bytes()).hexdigest()
        (root / "CURRENT").write_text(f"gen-elsewhere\n{d}\n")

    up = "../" * (len(outside.parts) + 2)
    return {
        "manifest entry ../../../..": name(up + str(outside).lstrip("/")),
        "manifest entry absolute path": name(str(outside)),
        "manifest entry a/../b": name("a/../" + outside.name),
        "manifest entry with NUL": name("nodes.json\x00x"),
        "CURRENT gen-x/../../elsewhere": current("{gen}/../../other/s/{other}"),
        "CURRENT absolute path": current(str(_gen(other))),
        "CURRENT ..": current(".."),
        "generation folder is a link": gen_link,
        "data file is a link (same bytes)": replace("nodes.json", link_copy),
        "manifest is a link (same bytes)": replace("manifest.json", link_copy),
        "CURRENT is a link (same bytes)": replace("CURRENT", link_copy),
        "data file is a FIFO": replace("nodes.json", lambda p, d: os.mkfifo(p)),
        "manifest is a FIFO": replace("manifest.json", lambda p, d: os.mkfifo(p)),
        "CURRENT is a FIFO": replace("CURRENT", lambda p, d: os.mkfifo(p)),
        "manifest names a FIFO": fifo_named,
        "data file links to /dev/zero": replace(
            "nodes.json", lambda p, d: p.symlink_to("/dev/zero")
        ),
    }


def _load_within(root: Path, seconds: float) -> tuple[str, Any]:
    """('loaded' | 'typed' | 'crash' | 'hang', detail) of loading ``root`` in a thread."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["v"] = ("loaded", ReMindRAG.load(root, embeddings=HashEmbedder(DIM)))
        except ReMindError as exc:
            box["v"] = ("typed", exc)
        except Exception as exc:  # noqa: BLE001 - what this row counts
            box["v"] = ("crash", exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return box.get("v", ("hang", None))


def hostile_directories(tmp: Path) -> dict:
    outside = tmp / "outside" / "passwd"
    outside.parent.mkdir()
    outside.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    other = engine().save(tmp / "other" / "s")
    base = tmp / "hostile-base"
    engine().save(base)
    survived = crashes = lost = 0
    results = {}
    for i, (label, attack) in enumerate(_attacks(tmp, outside, other).items()):
        root = tmp / f"hostile-{i}"
        shutil.copytree(base, root, symlinks=True)
        attack(root)
        kind, detail = _load_within(root, 10.0)
        results[label] = kind if kind != "typed" else type(detail).__name__
        survived += kind == "typed"
        crashes += kind in ("crash", "hang")
        lost += kind == "loaded"  # it read what is not the store's
        for f in root.rglob("*"):  # unblock a FIFO a hung load may still wait on
            if f.is_fifo():
                f.unlink()
    out = row(
        "hostile store directories (outside paths, links, FIFOs)",
        len(results),
        survived,
        crashes,
        lost,
    )
    out["attacks"] = results
    return out


# --- 8. retrieves while documents change (issue 26) --------------------------------------------


def retrieves_during_updates(updates: int, readers: int = 3) -> dict:
    eng = engine()
    stop = threading.Event()
    counts = {"ok": 0, "typed": 0, "crash": 0}
    lock = threading.Lock()

    def read() -> None:
        while not stop.is_set():
            try:
                eng.retrieve(random.choice(QUERIES), navigator={"min_similarity": -1.0})
                key = "ok"
            except ReMindError:
                key = "typed"
            except Exception as exc:  # noqa: BLE001
                key = "crash"
                print("crash:", type(exc).__name__, exc, file=sys.stderr)
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=read) for _ in range(readers)]
    for t in threads:
        t.start()
    for i in range(updates):
        eng.insert([Document("d1", f"Scott Derrickson directed film number {i} in Texas.")])
        eng.delete(["d3"])
        eng.insert([Document("d3", TEXTS[2][1])])
    stop.set()
    for t in threads:
        t.join()
    name = f"{readers} threads retrieve while one updates and deletes (lost: a failed retrieve)"
    return row(name, sum(counts.values()), counts["ok"], counts["crash"], counts["typed"])


# --- 9. the public API with wrong types and failing parts (issue 26) ----------------------------


class _DownEmbedder(HashEmbedder):
    down = False

    def embed(self, texts: Any) -> np.ndarray:
        if self.down:
            raise ConnectionError("connection refused")
        return super().embed(texts)


def _api_cases(eng: ReMindRAG, tmp: Path) -> dict[str, Callable[[], Any]]:
    r = eng.retrieve(QUERIES[0])
    afile = tmp / "a-file"
    afile.write_text("x")
    cases: dict[str, Callable[[], Any]] = {
        "insert(None)": lambda: eng.insert(None),  # type: ignore[arg-type]
        "save(<a regular file>)": lambda: eng.save(afile),
        "decay_memory(2)": lambda: eng.decay_memory(2),
        "decay_memory(nan)": lambda: eng.decay_memory(float("nan")),
        "decay_memory('0.5')": lambda: eng.decay_memory("0.5"),  # type: ignore[arg-type]
    }
    for arg in ("k", "seeds", "max_hops", "memory", "pre_query", "llm_timeout", "prior"):
        flag = arg in ("pre_query", "prior")
        for bad in (1 if flag else True, "3", None, [1]):
            if arg == "llm_timeout" and bad is None:
                continue  # None: no timeout, a valid value
            cases[f"retrieve({arg}={bad!r})"] = lambda a=arg, b=bad: eng.retrieve(
                QUERIES[0], **{a: b}
            )
    for name, fn in {
        "delete": eng.delete,
        "teach": eng.teach,
        "estimate_insert": eng.estimate_insert,
        "insert": eng.insert,
    }.items():
        for bad in (None, 3, "d1"):
            cases[f"{name}({bad!r})"] = lambda f=fn, b=bad: f(b)
    for bad in (None, 3, b"x", ""):
        cases[f"save({bad!r})"] = lambda b=bad: eng.save(b)
        cases[f"export_memory({bad!r})"] = lambda b=bad: eng.export_memory(b)
        cases[f"import_memory({bad!r})"] = lambda b=bad: eng.import_memory(b)
    cases["memorize(supporting=3)"] = lambda: eng.memorize(r.trace_id, supporting=3)  # type: ignore[arg-type]
    cases["feedback(helpful='no')"] = lambda: eng.feedback(r.trace_id, "no")  # type: ignore[arg-type]
    cases["inspect_memory(k=True)"] = lambda: eng.inspect_memory(k=True)
    return cases


def api_sweep(tmp: Path) -> dict:
    emb = _DownEmbedder(DIM)
    eng = ReMindRAG(embeddings=emb)
    eng.insert([Document(i, t) for i, t in TEXTS])
    cases = _api_cases(eng, tmp)
    survived = crashes = lost = 0
    raw = {}
    for label, call in cases.items():
        try:
            call()
            lost += 1  # ran with a coerced or wrong value instead of refusing it
            raw[label] = "ran"
        except ReMindError:
            survived += 1
        except Exception as exc:  # noqa: BLE001
            crashes += 1
            raw[label] = type(exc).__name__
    emb.down = True  # an embedder whose server is down
    for label, call in {
        "retrieve, embedder raises ConnectionError": lambda: eng.retrieve(QUERIES[0]),
        "aretrieve, embedder raises ConnectionError": lambda: asyncio.run(
            eng.aretrieve(QUERIES[0])
        ),
        "insert, embedder raises ConnectionError": lambda: eng.insert([Document("n", "Bob.")]),
    }.items():
        try:
            call()
            lost += 1
        except ReMindError:
            survived += 1
        except Exception as exc:  # noqa: BLE001
            crashes += 1
            raw[label] = type(exc).__name__
    lock_root = eng.save(tmp / "lock-link")
    (lock_root / ".lock").unlink(missing_ok=True)
    (lock_root / ".lock").symlink_to(tmp / "nowhere")
    try:
        eng.save(lock_root)
        lost += 1
    except ReMindError:
        survived += 1
    except Exception as exc:  # noqa: BLE001
        crashes += 1
        raw[".lock is a link"] = type(exc).__name__
    out = row(
        "public API: wrong types, failing embedder, .lock link",
        survived + crashes + lost,
        survived,
        crashes,
        lost,
    )
    out["not_typed"] = raw
    return out


# --- 10. disk full / read-only during save (issue 26) ------------------------------------------


def failing_saves(tmp: Path) -> dict:
    eng = engine()
    root = eng.save(tmp / "full")
    memorize(eng, QUERIES[0])  # a change the failed saves would write
    want = InMemoryGraphStore.load(root).export_memory()
    real_write, real_replace = generations._write_synced, generations.os.replace
    survived = crashes = lost = 0
    n_files = len(list(_gen(root).iterdir()))
    for err in (errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO):
        for at in range(n_files + 2):  # every file of the generation, then the CURRENT switch
            calls = [0]

            def write(
                path: Path, data: bytes, at: int = at, err: int = err, calls: list = calls
            ) -> None:
                calls[0] += 1
                if calls[0] == at + 1:
                    raise OSError(err, os.strerror(err), str(path))
                real_write(path, data)

            def replace(src: Any, dst: Any, at: int = at, err: int = err) -> None:
                if at == n_files + 1 and str(dst).endswith("CURRENT"):
                    raise OSError(err, os.strerror(err), str(dst))
                real_replace(src, dst)

            generations._write_synced = write  # type: ignore[assignment]
            generations.os.replace = replace  # type: ignore[assignment]
            try:
                eng.save(root)
                kind = "saved"
            except StoreError:
                kind = "typed"
            except Exception:  # noqa: BLE001
                kind = "crash"
            finally:
                generations._write_synced = real_write
                generations.os.replace = real_replace
            try:
                intact = InMemoryGraphStore.load(root).export_memory() == want
            except StoreCorruptError:
                intact = False
            survived += kind == "typed" and intact
            crashes += kind == "crash"
            lost += kind != "crash" and not (kind == "typed" and intact)
    eng.save(root)  # keeps the new generation and the one before (for readers still on it)
    left = len([p for p in root.iterdir() if p.name.startswith((".gen", "gen"))])
    out = row(
        "disk full / read-only / I/O error at each step of a save",
        survived + crashes + lost,
        survived,
        crashes,
        lost + (left > 2),
    )
    out["generations_left_after_next_save"] = left
    return out


# --- 11. the exit after an LLM timeout (issue 26) ----------------------------------------------

_TIMEOUT_EXIT = """
import asyncio, sys, time
from pathlib import Path
from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.testing import HashEmbedder

def slow(prompt):
    time.sleep(float(sys.argv[2]))
    Path(sys.argv[1]).write_text("finished")
    return "{}"

eng = ReMindRAG(llm=slow, embeddings=HashEmbedder(32))
try:
    asyncio.run(eng.aretrieve("Who directed Sinister?", llm_timeout=0.5, pre_query=True))
except Exception:
    pass
print("returned", flush=True)
"""


def timeout_exit(rounds: int, tmp: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    survived = crashes = 0
    took = []
    for i in range(rounds):
        done = tmp / f"llm-done-{i}"
        t = time.perf_counter()
        try:
            p = subprocess.run(
                [sys.executable, "-c", _TIMEOUT_EXIT, str(done), "30"],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            ok = p.returncode == 0 and "returned" in p.stdout and not done.exists()
        except subprocess.TimeoutExpired:
            ok = False
        took.append(time.perf_counter() - t)
        survived += ok
        crashes += not ok
    out = row(
        "asyncio.run(aretrieve(llm_timeout=0.5)) then exit, LLM hangs 30 s",
        rounds,
        survived,
        crashes,
        0,
    )
    out["exit_seconds"] = [round(x, 2) for x in took]
    return out


def _race_round(i: int) -> list[str]:
    """One round of :func:`memory_writes_during_deletes`: each call's outcome, one of
    ``survived`` / ``crash`` / ``lost``."""
    eng = engine()
    x = "d1"
    cx = eng.store.document_chunks(x)[0].id
    r1, r2 = eng.retrieve(QUERIES[0]), eng.retrieve(QUERIES[2])
    updates = [0]
    real_update = eng.store.update_memory

    def counted(*args: Any, **kwargs: Any) -> Any:
        out = real_update(*args, **kwargs)
        updates[0] += 1
        return out

    def churn() -> None:
        time.sleep(random.Random(i).random() * 0.015)
        eng.delete([x])
        eng.insert([Document(x, TEXTS[0][1] + f" Edit {i}.")])

    eng.store.update_memory = counted  # type: ignore[method-assign]
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("memorize", lambda: eng.memorize(r1.trace_id, supporting=[cx])),
        ("feedback", lambda: eng.feedback(r2.trace_id, True, [cx])),
        ("teach", lambda: eng.teach([{"question": QUERIES[1], "chunk_ids": [cx]}])),
    ]
    out = []
    for kind, call in calls:
        updates[0] = 0
        result, error, crash = None, False, False
        t = threading.Thread(target=churn)
        t.start()
        try:
            result = call()
        except ReMindError:
            error = True
        except Exception:  # noqa: BLE001 - counted
            crash = True
        t.join()
        if crash:
            out.append("crash")
        elif error and updates[0]:
            out.append("lost")  # raised with memory written: unreported, a retry applies again
        elif kind == "memorize" and result is not None and result.applied:
            again = eng.memorize(r1.trace_id, supporting=[cx])
            out.append("lost" if again.applied else "survived")
        else:
            out.append("survived")
    return out


def memory_writes_during_deletes(rounds: int) -> dict:
    """Issue 34: ``memorize(supporting=...)``, a thumbs-up on chunk ids and ``teach`` in one
    thread while another deletes and re-adds the named document. The store's memory updates
    are counted. Survived: the call returns, or raises a typed error having written nothing.
    Lost: a call that raises after its memory was written (a ``memorize`` retry then applies
    it twice, and ``teach`` reports nothing of what it wrote), or a retry of an applied
    ``memorize`` that applies again."""
    outcomes = [o for i in range(rounds) for o in _race_round(i)]
    return row(
        "memory writes during deletes (issue 34)",
        len(outcomes),
        outcomes.count("survived"),
        outcomes.count("crash"),
        outcomes.count("lost"),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replies", type=int, default=1000)
    ap.add_argument("--kills", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=50, help="per saver kind (threads, processes)")
    ap.add_argument("--memorize-rounds", type=int, default=10)
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--timeout-rounds", type=int, default=5)
    ap.add_argument("--race-rounds", type=int, default=100, help="memory writes vs deletes")
    ap.add_argument("--only", help="run only the rows whose function name contains this")
    ap.add_argument("--out", default="benchmarks/results/faults.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        suite: dict[str, Callable[[], dict]] = {
            "fuzz_replies": lambda: fuzz_replies(args.replies),
            "kill_during_save": lambda: kill_during_save(args.kills, tmp),
            "kill_every_step": lambda: kill_every_step(tmp),
            "flip_every_byte": lambda: flip_every_byte(tmp),
            "savers_threads": lambda: savers_threads(args.rounds, tmp),
            "savers_processes": lambda: savers_processes(args.rounds, tmp),
            "two_processes_memorizing": lambda: two_processes_memorizing(args.memorize_rounds, tmp),
            "readers_during_updates": lambda: readers_during_updates(args.updates),
            "hostile_directories": lambda: hostile_directories(tmp),
            "retrieves_during_updates": lambda: retrieves_during_updates(args.updates),
            "api_sweep": lambda: api_sweep(tmp),
            "failing_saves": lambda: failing_saves(tmp),
            "timeout_exit": lambda: timeout_exit(args.timeout_rounds, tmp),
            "memory_writes_during_deletes": lambda: memory_writes_during_deletes(args.race_rounds),
        }
        for name, fn in suite.items():
            if args.only and args.only not in name:
                continue
            t = time.perf_counter()
            rows.append({**fn(), "seconds": round(time.perf_counter() - t, 1)})
            print(json.dumps(rows[-1]), file=sys.stderr)
    print("| case | tried | survived | crashes | lost |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {r['tried']} | {r['survived']} | {r['crashes']} | {r['lost']} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows, "args": vars(args)}, indent=1))


if __name__ == "__main__":
    main()
