"""The long part of the fault suite (issue 13): hostile but realistic use, counted.

Rows: fuzzed LLM replies across every stage; ``kill -9`` during save; every byte of every
store file flipped; two concurrent savers (threads, then processes); two processes
memorizing on one directory; threads reading while one updates. Each row counts what was
tried, what survived (a correct result or a typed ``ReMindError``), crashes (any other
exception) and lost (data missing or silently wrong). Prints a table and writes JSON.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/faults.py --out benchmarks/results/faults.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
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

from remindrag_integrations import Document, ReMindError, ReMindRAG, StoreCorruptError
from remindrag_integrations.core.config import IndexConfig
from remindrag_integrations.core.ids import chunk_of
from remindrag_integrations.stores import InMemoryGraphStore
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
    r = eng.retrieve(query, nav_min_similarity=-1.0)
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
    r = eng.retrieve(QUERIES[0], nav_min_similarity=-1.0)
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
    eng = ReMindRAG(embeddings=HashEmbedder(DIM), store=root)
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
        r = eng.retrieve(q, nav_min_similarity=-1.0)
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
        r = ref.retrieve(q, nav_min_similarity=-1.0)
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
                r = eng.retrieve(random.choice(QUERIES), nav_min_similarity=-1.0)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replies", type=int, default=1000)
    ap.add_argument("--kills", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=50, help="per saver kind (threads, processes)")
    ap.add_argument("--memorize-rounds", type=int, default=10)
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--out", default="benchmarks/results/faults.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for fn in (
            lambda: fuzz_replies(args.replies),
            lambda: kill_during_save(args.kills, tmp),
            lambda: flip_every_byte(tmp),
            lambda: savers_threads(args.rounds, tmp),
            lambda: savers_processes(args.rounds, tmp),
            lambda: two_processes_memorizing(args.memorize_rounds, tmp),
            lambda: readers_during_updates(args.updates),
        ):
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
