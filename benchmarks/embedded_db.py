"""The embedded store is a database (issue 44): what a write costs, many writers, kills, scale.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/embedded_db.py \
        [--sections memorize,workers,kills,scale] [--passages 8000] [--memorize 60] \
        [--workers 4 --rounds 50] [--kills 200] [--edges 1000000] [--out FILE]

- ``memorize``: ``--passages`` passages recombined from the dev corpora
  (``big_corpus.build``: real sentences, titles and names) are inserted with a 384-dim test
  embedder (``HashEmbedder(384)``) into ``ReMindRAG(store=DIR)``; then ``--memorize`` rounds of
  (retrieve, ``memorize(trace, supporting=[top chunk])``) on that live store and on an
  in-memory copy of it (``engine.copy()``), alternating: p50 / p95 ms of the memorize call
  and the bytes the process wrote during it (``/proc/self/io`` ``wchar``). Also the insert of
  one more batch of 200 passages at that size (wall s, and the database part: rows + commit).
- ``workers``: 4 worker processes × ``--rounds`` (retrieve, memorize) and one process inserting
  and deleting, one folder store; errors, memory writes acknowledged vs marked on disk.
- ``kills``: ``--kills`` runs of a child process inserting, memorizing and deleting on one
  store, ``kill -9`` at a random moment; reopen, check every acknowledged write is there and
  nothing is half-applied (every chunk's document, every edge's ends, every memory row's
  edge; the cache rebuilt from the database equals a fresh open).
- ``scale``: the corpus-shaped synthetic graph of ``store_latency.py`` (384-d) written into a
  folder store batch by batch up to ``--edges`` (each batch one transaction, timed, with its
  database part); a fresh process opens it and answers a zero-token query (open → first
  answer), then 30 more (p50 / p95).

Load average (``uptime``) before and after each section. Writes a JSON summary (default
``benchmarks/results/embedded_db.json``)."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from remindrag_integrations import ReMindRAG  # noqa: E402
from remindrag_integrations.core.types import Document  # noqa: E402
from remindrag_integrations.stores import SQLiteGraphStore  # noqa: E402
from remindrag_integrations.testing import HashEmbedder  # noqa: E402

DIM = 384


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def pcts(xs: list[float]) -> dict[str, float]:
    return {
        "p50": round(float(np.percentile(xs, 50)), 2),
        "p95": round(float(np.percentile(xs, 95)), 2),
        "n": len(xs),
    }


def wchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


class Timed(SQLiteGraphStore):
    """The store, timing the database part of each graph write: its rows, change record and
    commit (from the rows' first statement to the call's return)."""

    db_s: list[float]
    _t_start: float | None = None

    def _persist(self, con: sqlite3.Connection) -> None:
        self._t_start = time.perf_counter()
        super()._persist(con)

    def add_graph(self, **kw: Any) -> dict[str, int]:  # type: ignore[override]
        self._t_start = None
        out = super().add_graph(**kw)
        if self._t_start is not None:
            self.db_s.append(time.perf_counter() - self._t_start)
        return out


def corpus(n: int, tmp: Path) -> list[Document]:
    import big_corpus

    path = tmp / "corpus.jsonl"
    big_corpus.build(path, n)
    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            docs.append(Document(row["id"], row["text"], {"title": row.get("title", "")}))
    return docs


def questions() -> list[str]:
    import big_corpus

    return big_corpus.questions()


def section_memorize(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"load_avg_before": load_avg()}
    docs = corpus(args.passages + 200, tmp)
    extra, docs = docs[args.passages :], docs[: args.passages]
    engine = ReMindRAG(embeddings=HashEmbedder(DIM), store=str(tmp / "store"))
    engine.store.__class__ = Timed  # time the database part of the next writes
    engine.store.db_s = []  # type: ignore[attr-defined]
    t = time.perf_counter()
    engine.insert(docs)
    out["insert_s"] = round(time.perf_counter() - t, 1)
    out["counts"] = engine.store.counts()
    out["db_bytes"] = sum(p.stat().st_size for p in (tmp / "store").glob("store.db*"))
    copy = engine.copy()
    qs = questions()
    ms: dict[str, list[float]] = {"folder": [], "memory": []}
    written: dict[str, list[int]] = {"folder": [], "memory": []}
    for i in range(args.memorize):
        for name, e in (
            (("folder", engine), ("memory", copy))
            if i % 2
            else (("memory", copy), ("folder", engine))
        ):
            r = e.retrieve(qs[i % len(qs)])
            if not r.trace.chunk_ids:
                continue
            w0, t0 = wchar(), time.perf_counter()
            e.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]])
            ms[name].append((time.perf_counter() - t0) * 1e3)
            written[name].append(wchar() - w0)
    out["memorize_ms"] = {k: pcts(v) for k, v in ms.items()}
    out["memorize_bytes_written"] = {
        k: {"p50": int(np.percentile(v, 50)), "p95": int(np.percentile(v, 95)), "max": max(v)}
        for k, v in written.items()
    }
    engine.store.db_s = []  # type: ignore[attr-defined]
    t = time.perf_counter()
    engine.insert(extra)
    out["insert_200_more_s"] = round(time.perf_counter() - t, 2)
    out["insert_200_more_db_s"] = round(sum(engine.store.db_s), 3)  # type: ignore[attr-defined]
    out["load_avg_after"] = load_avg()
    engine.close()
    return out


_WORKER = """
import sys, json
from remindrag_integrations import ReMindRAG, ReMindError
from remindrag_integrations.testing import HashEmbedder
qs = json.loads(sys.argv[3])
e = ReMindRAG(embeddings=HashEmbedder(384), store=sys.argv[1])
ok = errors = 0
for i in range(int(sys.argv[2])):
    try:
        r = e.retrieve(qs[i % len(qs)])
        if r.trace.chunk_ids:
            ok += e.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]]).applied
    except ReMindError as exc:
        errors += 1
        print(repr(exc), file=sys.stderr)
print(json.dumps({"applied": ok, "errors": errors}))
"""

_WRITER = """
import sys, json
from remindrag_integrations import ReMindRAG, ReMindError
from remindrag_integrations.core.types import Document
from remindrag_integrations.testing import HashEmbedder
e = ReMindRAG(embeddings=HashEmbedder(384), store=sys.argv[1])
errors = 0
for i in range(int(sys.argv[2])):
    try:
        e.insert([Document(f"w-{i}", f"Worker note {i}: the Kiel harbour opens at {i % 12} am.")])
        if i % 2:
            e.delete([f"w-{i - 1}"])
    except ReMindError as exc:
        errors += 1
        print(repr(exc), file=sys.stderr)
print(json.dumps({"applied": 0, "errors": errors}))
"""


def section_workers(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"load_avg_before": load_avg()}
    store = tmp / "workers"
    e = ReMindRAG(embeddings=HashEmbedder(DIM), store=str(store))
    e.insert(corpus(1000, tmp))
    e.close()
    qs = json.dumps(questions()[:200])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(store), str(args.rounds), qs],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(args.workers)
    ] + [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(store), str(args.rounds)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    ]
    applied = errors = crashed = 0
    for p in procs:
        so, se = p.communicate(timeout=3600)
        if p.returncode:
            crashed += 1
            print(se[-2000:], file=sys.stderr)
            continue
        row = json.loads(so.strip().splitlines()[-1])
        applied, errors = applied + row["applied"], errors + row["errors"]
    out["wall_s"] = round(time.perf_counter() - t, 1)
    con = sqlite3.connect(store / "store.db")
    marked = con.execute(
        "SELECT count(*) FROM traces WHERE json_extract(body, '$.memorized')"
    ).fetchone()[0]
    docs = {r[0] for r in con.execute("SELECT id FROM documents")}
    con.close()
    want = {f"w-{i}" for i in range(1, args.rounds, 2)}
    gone = {f"w-{i}" for i in range(0, args.rounds - 1, 2)}
    out.update(
        workers=args.workers,
        rounds=args.rounds,
        memory_writes_applied=applied,
        memorized_traces_on_disk=marked,
        errors=errors,
        crashed=crashed,
        lost_inserts=len(want - docs),
        deleted_still_there=len(gone & docs),
        load_avg_after=load_avg(),
    )
    return out


_KILLED = """
import sys, json, os, random
from remindrag_integrations import ReMindRAG
from remindrag_integrations.core.types import Document
from remindrag_integrations.testing import HashEmbedder
e = ReMindRAG(embeddings=HashEmbedder(64), store=sys.argv[1])
log = open(sys.argv[2], "a")
rng = random.Random(int(sys.argv[3]))
def ack(kind, key, state="ack"):  # "try" before a write, "ack" once it returned
    log.write(json.dumps([kind, key, state]) + "\\n"); log.flush(); os.fsync(log.fileno())
i = int(sys.argv[3]) * 1000
while True:
    i += 1
    op = rng.random()
    if op < 0.45:
        doc = f"k-{i}"
        ack("insert", doc, "try")
        e.insert([Document(doc, f"Kill note {i}: ferry {i % 7} leaves Kiel at {i % 12}. " * 3)])
        ack("insert", doc)
    elif op < 0.85:
        r = e.retrieve("ferry leaves Kiel")
        if r.trace.chunk_ids and e.memorize(r.trace.trace_id, supporting=[r.trace.chunk_ids[0]]).applied:
            ack("memorize", r.trace.trace_id)
    else:
        ids = [d for d in e.store.document_ids() if d.startswith("k-")]
        if ids:
            d = rng.choice(ids)
            ack("delete", d, "try")
            e.delete([d])
            ack("delete", d)
"""


def consistent(root: Path) -> list[str]:
    """What is half-applied in the database (empty: nothing)."""
    con = sqlite3.connect(root / "store.db")
    bad = []
    q = {
        "chunk without document": "SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)",
        "document without chunk": "SELECT count(*) FROM documents WHERE id NOT IN (SELECT doc_id FROM chunks)",
        "edge without an end": "SELECT count(*) FROM edges WHERE u NOT IN (SELECT id FROM nodes) OR v NOT IN (SELECT id FROM nodes)",
        "memory without edge": "SELECT count(*) FROM memory WHERE edge_id NOT IN (SELECT id FROM edges)",
        "node of a gone document": "SELECT count(*) FROM nodes WHERE doc_id IS NOT NULL AND doc_id NOT IN (SELECT id FROM documents)",
    }
    for name, sql in q.items():
        n = con.execute(sql).fetchone()[0]
        if n:
            bad.append(f"{name}: {n}")
    con.close()
    return bad


def section_kills(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"load_avg_before": load_avg()}
    store = tmp / "kills"
    e = ReMindRAG(embeddings=HashEmbedder(64), store=str(store))
    e.insert([Document("base", "The Nordwind ferry leaves Kiel at nine every night.")])
    e.close()
    log = tmp / "acks.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rng = random.Random(44)
    lost = half = opened = 0
    for n in range(args.kills):
        p = subprocess.Popen(
            [sys.executable, "-c", _KILLED, str(store), str(log), str(n + 1)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(rng.uniform(1.5, 3.5))  # the import and open take ~1.3 s: kill while writing
        p.send_signal(signal.SIGKILL)
        p.wait()
        try:
            again = ReMindRAG(embeddings=HashEmbedder(64), store=str(store))
            opened += 1
        except Exception as exc:  # noqa: BLE001 - counted: a store that does not open
            print(f"kill {n}: does not open: {exc!r}", file=sys.stderr)
            continue
        ids = set(again.store.document_ids())
        entries = [json.loads(line) for line in log.read_text().splitlines()]
        acks = [(kind, key) for kind, key, state in entries if state == "ack"]
        present: dict[str, bool | None] = {}  # None: a write the kill cut (either is right)
        for kind, key, state in entries:
            if kind in ("insert", "delete"):
                done = kind == "insert"
                present[key] = done if state == "ack" else None
        lost_now = sum(
            1 for d, there in present.items() if there is not None and there != (d in ids)
        )
        for d, there in present.items():
            if there is not None and there != (d in ids):
                print(f"kill {n}: {d} should be {'there' if there else 'gone'}", file=sys.stderr)
        con = sqlite3.connect(store / "store.db")
        marked = {
            r[0]
            for r in con.execute("SELECT id FROM traces WHERE json_extract(body, '$.memorized')")
        }
        con.close()
        lost_now += sum(1 for kind, key in acks if kind == "memorize" and key not in marked)
        half_now = consistent(store)
        lost += lost_now
        half += bool(half_now)
        if lost_now or half_now:
            print(f"kill {n}: lost {lost_now}, half-applied {half_now}", file=sys.stderr)
        again.close()
        if (n + 1) % 20 == 0:
            print(f"  {n + 1} kills: lost {lost}, half-applied {half}", flush=True)
    acks = log.read_text().splitlines()
    out.update(
        kills=args.kills,
        opened=opened,
        acknowledged_writes=len(acks),
        lost=lost,
        half_applied=half,
        load_avg_after=load_avg(),
    )
    return out


_OPEN = """
import json, sys, time
t = time.perf_counter()
sys.path.insert(0, sys.argv[2])
from remindrag_integrations.stores import SQLiteGraphStore
from pg_scale import query
import numpy as np
imported = time.perf_counter() - t
t = time.perf_counter()
store = SQLiteGraphStore.open(sys.argv[1])
opened = time.perf_counter() - t
qs = np.load(sys.argv[3])
t1 = time.perf_counter(); query(store, qs[0]); first = time.perf_counter() - t1
mem = store.copy()  # the same graph in an in-memory store: the queries alternate
query(mem, qs[0])
ms, ms_mem = [], []
for q in qs[1:]:
    t1 = time.perf_counter(); query(store, q); ms.append((time.perf_counter() - t1) * 1e3)
    t1 = time.perf_counter(); query(mem, q); ms_mem.append((time.perf_counter() - t1) * 1e3)
print(json.dumps({"import_s": imported, "open_s": opened, "ann_adopted": sorted(store._vectors._ann),
                  "first_query_s": first, "open_to_first_answer_s": opened + first,
                  "query_ms_p50": float(np.percentile(ms, 50)), "query_ms_p95": float(np.percentile(ms, 95)),
                  "in_memory_query_ms_p50": float(np.percentile(ms_mem, 50)),
                  "in_memory_query_ms_p95": float(np.percentile(ms_mem, 95)),
                  "counts": store.counts()}))
"""


def section_scale(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from pg_scale import make_queries, query
    from store_latency import synthetic_batches

    out: dict[str, Any] = {"load_avg_before": load_avg()}
    root = tmp / "scale"
    store = Timed.open(root)
    store.db_s = []
    wall: list[tuple[int, float, float]] = []
    first_batch = None
    for batch in synthetic_batches(args.edges, DIM, batch_chunks=2000):
        first_batch = first_batch or batch
        t = time.perf_counter()
        store.add_graph(**batch)
        wall.append((store.counts()["chunks"], time.perf_counter() - t, store.db_s[-1]))
    out["build_s"] = round(sum(w for _, w, _ in wall), 1)
    out["batches"] = len(wall)
    out["batch_s_at"] = {
        str(c): {"wall": round(w, 3), "db": round(d, 3)}
        for c, w, d in wall[:: max(1, len(wall) // 10)]
    }
    out["counts"] = store.counts()
    assert first_batch is not None
    qs, _ = make_queries(first_batch, 31, DIM)
    t = time.perf_counter()  # what serving it needs built (the ANN indexes, extra 'ann'),
    query(store, qs[-1])  # as an indexing run's searches build them; close() keeps them
    out["writer_first_query_s"] = round(time.perf_counter() - t, 1)
    out["ann_indexes_kept"] = sorted(store._vectors._ann)
    store.close()
    out["db_bytes"] = sum(p.stat().st_size for p in root.glob("store.db*"))
    np.save(tmp / "qs.npy", np.asarray(qs))
    done = subprocess.run(
        [sys.executable, "-c", _OPEN, str(root), str(ROOT / "benchmarks"), str(tmp / "qs.npy")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode:
        out["open_error"] = done.stderr[-2000:]
    else:
        out["fresh_process"] = json.loads(done.stdout.strip().splitlines()[-1])
    out["load_avg_after"] = load_avg()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="memorize,workers,kills,scale")
    ap.add_argument("--passages", type=int, default=8000)
    ap.add_argument("--memorize", type=int, default=60)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "embedded_db.json"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="remindrag-db-"))
    summary: dict[str, Any] = {"args": vars(args), "cpus": os.cpu_count()}
    try:
        for name in args.sections.split(","):
            print(f"== {name}", flush=True)
            summary[name] = globals()[f"section_{name}"](args, tmp)
            print(json.dumps(summary[name], indent=1), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
