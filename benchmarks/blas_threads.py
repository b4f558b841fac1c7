"""One BLAS thread for a query's own work, or numpy's default: the whole zero-token query
side by side in one process (core/blas.py).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/blas_threads.py --data ../shared/datasets \\
        --sets musique_train100 hotpotqa_train100 2wiki_dev64 --embed-cache .bench-cache \\
        --out benchmarks/results/blas_threads.json

Per dev set, pooled: the corpus indexed once (zero-token, the packaged MiniLM; with
``--embed-cache`` the vectors come from the bench's cache, so the query's embedding is a
lookup and what is timed is the engine's own work), then every question, in a fresh process
per arm and round, the arms alternating: ``one`` (the library's default: the steps run under
``core.blas.one_blas_thread``) and ``default`` (that context replaced by a no-op, so OpenBLAS
uses its own thread count). Reported per arm: wall and CPU p50 / p95 ms (CPU:
this process, BLAS threads included) and whether both arms returned the same chunk ids for
every question. Load average before and after. Prints a table and writes a JSON summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_info

from remindrag_integrations.core import steps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import load_dataset  # noqa: E402
from benchmarks.harness.resources import make_embedder  # noqa: E402
from benchmarks.harness.runner import build_kb  # noqa: E402

ARMS = ("one", "default")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def run_arm(name: str, data: str, cache: str | None, arm: str) -> dict[str, Any]:
    """One arm in this process: the set indexed, every question once (after 3 to warm)."""
    if arm == "default":  # the steps' BLAS left as numpy has it
        steps.one_blas_thread = contextlib.nullcontext  # type: ignore[attr-defined]
    ds = load_dataset(name, data)
    kb = build_kb(ds.documents(), "none", make_embedder("minilm", cache))
    questions = [q["question"] for q in ds.questions]
    for q in questions[:3]:  # the lexical index and the matrices are built on first use
        kb.engine.retrieve(q)
    wall, cpu, found = [], [], []
    for q in questions:
        w, c = time.perf_counter(), time.process_time()
        got = kb.engine.retrieve(q)
        cpu.append((time.process_time() - c) * 1e3)
        wall.append((time.perf_counter() - w) * 1e3)
        found.append([rc.chunk.id for rc in got.chunks])
    return {"wall": wall, "cpu": cpu, "found": found, "chunks": len(kb.chunks)}


def run_set(name: str, data: str, cache: str | None, rounds: int) -> dict[str, Any]:
    """Each arm in a fresh process (OpenBLAS's threads, once woken, spin for a while and would
    take CPU from the other arm), alternating arm order round by round."""
    times: dict[str, dict[str, list[float]]] = {a: {"wall": [], "cpu": []} for a in ARMS}
    found: dict[str, list] = {}
    chunks = 0
    for r in range(rounds):
        for arm in ARMS if r % 2 == 0 else tuple(reversed(ARMS)):
            cmd = [sys.executable, __file__, "--arm", arm, "--sets", name, "--data", data]
            cmd += ["--embed-cache", cache] if cache else []
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            times[arm]["wall"] += got["wall"]
            times[arm]["cpu"] += got["cpu"]
            found.setdefault(arm, got["found"])
            chunks = got["chunks"]
    out: dict[str, Any] = {"questions": len(found["one"]), "chunks": chunks, "rounds": rounds}
    for arm, t in times.items():
        out[arm] = {
            f"{k}_{p}": round(statistics.median(v) if p == "p50" else pct(v, 95), 2)
            for k, v in t.items()
            for p in ("p50", "p95")
        }
    out["same_chunks"] = found["one"] == found["default"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/datasets")
    ap.add_argument("--sets", nargs="+", default=["musique_train100"])
    ap.add_argument("--embed-cache", default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # a child: one arm
    args = ap.parse_args()
    if args.arm:
        print(json.dumps(run_arm(args.sets[0], args.data, args.embed_cache, args.arm)))
        return
    blas = [(lib["internal_api"], lib["num_threads"]) for lib in threadpool_info()]
    load = [os.getloadavg()]
    results = {s: run_set(s, args.data, args.embed_cache, args.rounds) for s in args.sets}
    load.append(os.getloadavg())
    print("| set (pooled) | chunks | arm | wall p50 / p95 ms | CPU p50 / p95 ms | same chunks |")
    print("|---|---:|---|---:|---:|---|")
    for name, r in results.items():
        for arm in ("one", "default"):
            a = r[arm]
            print(
                f"| {name} | {r['chunks']} | {arm} | {a['wall_p50']} / {a['wall_p95']} "
                f"| {a['cpu_p50']} / {a['cpu_p95']} | {r['same_chunks']} |"
            )
    print(f"BLAS libraries (threads): {blas}; CPUs {os.cpu_count()}; load {load}")
    if args.out:
        summary = {"results": results, "blas": blas, "cpus": os.cpu_count(), "load": load}
        args.out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
