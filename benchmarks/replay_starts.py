"""What replay's extra starts cost (`replay_starts`, issue 21): the same zero-token queries
side by side with replay_starts=2 (the seeds only: before) and 10 (the default), interleaved
query by query, on a fresh pooled graph and after teaching half of the questions. Prints a
table (p50 / p95 of the non-LLM query time, recall@5) and writes JSON.

    python benchmarks/replay_starts.py --set hotpotqa_train100
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from statistics import mean

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import load_dataset  # noqa: E402
from benchmarks.harness.memory_bench import teach_pairs  # noqa: E402
from benchmarks.harness.resources import machine, make_embedder  # noqa: E402
from benchmarks.harness.runner import Bench, score  # noqa: E402

SETTINGS = (2, 10)


def run(bench: Bench, items: list[dict], rounds: int) -> dict[int, dict]:
    engine = bench.unique_kbs()[0].engine
    times: dict[int, list[float]] = {s: [] for s in SETTINGS}
    recall: dict[int, list[float]] = {s: [] for s in SETTINGS}
    for _ in range(rounds):
        for it in items:
            for s in SETTINGS:
                r = engine.retrieve(it["question"], k=10, memory={"replay_starts": s})
                times[s].append(sum(r.trace.timings_ms.values()))
                recall[s].append(score(bench, it, [rc.chunk for rc in r.chunks])["recall@5"])
    return {
        s: {
            "p50_ms": float(np.percentile(times[s], 50)),
            "p95_ms": float(np.percentile(times[s], 95)),
            "recall@5": mean(recall[s]) if recall[s] else float("nan"),
        }
        for s in SETTINGS
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=os.environ.get("REMINDRAG_BENCH_DATA", "../shared/datasets"))
    p.add_argument("--set", dest="set_name", default="hotpotqa_train100")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--embed-cache", default=".remindrag-cache/bench")
    p.add_argument("--out", default="benchmarks/results/replay_starts.json")
    args = p.parse_args()
    ds = load_dataset(args.set_name, args.data)
    bench = Bench(ds, "pooled", "none", make_embedder("minilm", args.embed_cache or None))
    load0 = os.getloadavg()
    fresh = run(bench, ds.questions, args.rounds)
    half = ds.questions[: len(ds.questions) // 2]
    bench.unique_kbs()[0].engine.teach(teach_pairs(half))
    taught = run(bench, ds.questions, args.rounds)
    out = {
        "machine": machine(),
        "load": [load0, os.getloadavg()],
        "set": ds.name,
        "questions": len(ds.questions),
        "fresh": fresh,
        "half_taught": taught,
    }
    print(
        f"{ds.name}, pooled, zero-token, {len(ds.questions)} questions x {args.rounds} rounds, "
        f"load {load0[0]:.1f}"
    )
    print("| graph | replay_starts | p50 ms | p95 ms | recall@5 (all questions) |")
    print("|---|---|---|---|---|")
    for name, res in (("fresh", fresh), ("half taught", taught)):
        for s in SETTINGS:
            r = res[s]
            print(f"| {name} | {s} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | {r['recall@5']:.3f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
