"""Readers during a writer (issue 26): retrieves per second and their p95 latency, with and
without one thread updating and deleting documents at the same time. Every retrieve reads
one snapshot of the store; the row also counts failed retrieves (there should be none).
``--write-cost EDGES``: what copy-on-write costs a writer on a synthetic store of that many
edges: a document delete and a memory write, with no snapshot alive and right after one.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/snapshot_reads.py --out benchmarks/results/snapshot_reads.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.testing import HashEmbedder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness

WORDS = "Alice Bob Carol Paris Rome Berlin river bridge museum film director actor".split()


def _doc(i: int, rng: random.Random) -> Document:
    text = " ".join(
        f"{rng.choice(WORDS)} met {rng.choice(WORDS)} in {rng.choice(WORDS)} on day {i}."
        for _ in range(6)
    )
    return Document(f"d{i}", text)


def run(docs: int, readers: int, seconds: float, writer: bool, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    eng = ReMindRAG(embeddings=HashEmbedder(64))
    eng.insert([_doc(i, rng) for i in range(docs)])
    stop = threading.Event()
    lat: list[float] = []
    failed = [0]
    writes = [0]
    lock = threading.Lock()

    def read(r: int) -> None:
        local = random.Random(r)
        while not stop.is_set():
            q = f"Where did {local.choice(WORDS)} meet {local.choice(WORDS)}?"
            t = time.perf_counter()
            try:
                eng.retrieve(q, navigator={"min_similarity": -1.0})
            except Exception:  # noqa: BLE001 - counted
                with lock:
                    failed[0] += 1
                continue
            with lock:
                lat.append(time.perf_counter() - t)

    def write() -> None:
        w = random.Random(seed + 1)
        while not stop.is_set():
            i = w.randrange(docs)
            eng.delete([f"d{i}"])
            eng.insert([_doc(i, w)])  # a new version of the document
            writes[0] += 2

    threads = [threading.Thread(target=read, args=(r,)) for r in range(readers)]
    if writer:
        threads.append(threading.Thread(target=write))
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    ms = np.asarray(lat) * 1000
    return {
        "writer": writer,
        "readers": readers,
        "documents": docs,
        "seconds": seconds,
        "retrieves": len(lat),
        "failed": failed[0],
        "retrieves_per_s": round(len(lat) / seconds, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p95_ms": round(float(np.percentile(ms, 95)), 2),
        "writes": writes[0],
    }


def write_cost(n_edges: int, rounds: int = 5) -> list[dict[str, Any]]:
    """Milliseconds of a delete of one document and of a memory write on 10 edges, with no
    snapshot taken since the last write (in place) and right after a snapshot (copies)."""
    from benchmarks.harness.scale import synthetic_graph

    store = synthetic_graph(n_edges, dim=64)
    _, edges = store.whole_graph()
    rng = np.random.default_rng(0)
    touched = [e.id for e in edges[: min(len(edges), 20_000)]]
    store.update_memory(touched, lambda cur: cur + 0.01)  # 20 K edges hold memory
    docs = store.document_ids()
    out = []
    for pinned in (False, True):
        dels, mems = [], []
        for r in range(rounds):
            view = store.pin() if pinned else None
            t = time.perf_counter()
            store.delete_documents([docs[r + (rounds if pinned else 0)]])
            dels.append(time.perf_counter() - t)
            view = store.pin() if pinned else None
            some = [touched[i] for i in rng.choice(len(touched), 10, replace=False)]
            t = time.perf_counter()
            store.update_memory([e for e in some if e in store._edges], lambda cur: cur * 0.9)
            mems.append(time.perf_counter() - t)
            del view
        out.append(
            {
                "edges": len(edges),
                "snapshot_before_write": pinned,
                "delete_ms": round(1000 * float(np.median(dels)), 1),
                "memory_write_ms": round(1000 * float(np.median(mems)), 2),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--readers", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--out", default="benchmarks/results/snapshot_reads.json")
    ap.add_argument("--write-cost", type=int, default=0, metavar="EDGES")
    args = ap.parse_args()
    if args.write_cost:
        rows = write_cost(args.write_cost)
        print("| edges | snapshot taken before the write | delete 1 doc ms | memory write ms |")
        print("|---:|---|---:|---:|")
        for r in rows:
            print(
                f"| {r['edges']:,} | {'yes' if r['snapshot_before_write'] else 'no'} | "
                f"{r['delete_ms']} | {r['memory_write_ms']} |"
            )
        out = Path(args.out).with_name(f"snapshot_write_cost_{args.write_cost}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"rows": rows, "load": os.getloadavg()}, indent=1))
        return
    rows = [run(args.docs, args.readers, args.seconds, w) for w in (False, True)]
    print("| writer | readers | retrieves/s | p50 ms | p95 ms | failed | writes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {'1 thread (delete + insert)' if r['writer'] else 'none'} | {r['readers']} | "
            f"{r['retrieves_per_s']} | {r['p50_ms']} | {r['p95_ms']} | {r['failed']} | "
            f"{r['writes']} |"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    Path(args.out).write_text(
        json.dumps({"rows": rows, "args": vars(args), "load": load}, indent=1)
    )


if __name__ == "__main__":
    main()
