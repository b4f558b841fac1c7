"""Batched store search (issue 16): ``InMemoryGraphStore.search_many`` against one ``search``
per query, as synonym merge at indexing asks it (the best entity for each new name), on the
synthetic scale graph, with the exact scan and with the ANN index. Prints a table and writes
JSON.

    PYTHONPATH=. python benchmarks/search_many.py --edges 100000 --queries 3200 \
        --out benchmarks/results/search_many.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.scale import synthetic_graph  # noqa: E402


def _timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=3200)
    ap.add_argument("--out", default="benchmarks/results/search_many.json")
    args = ap.parse_args()
    load = [os.getloadavg()]
    rng = np.random.default_rng(0)
    qs = rng.standard_normal((args.queries, 384)).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    rows = []
    for ann in (False, True):
        store = synthetic_graph(args.edges, 384, ann=ann)
        store.search_many(qs[:1], 1, ("entity",))  # caches / index built, not timed
        loop_s, one = _timed(lambda s=store: [s.search(q, 1, ("entity",)) for q in qs])
        batch_s, many = _timed(lambda s=store: s.search_many(qs, 1, ("entity",)))
        same = sum(a[0][0] == b[0][0] for a, b in zip(one, many)) / len(qs)
        rows.append(
            {
                "search": "ANN (usearch)" if ann else "exact scan",
                "entities": store.counts()["entities"],
                "loop_s": loop_s,
                "search_many_s": batch_s,
                "speedup": loop_s / batch_s,
                "same_best": same,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    load.append(os.getloadavg())
    print(f"\n{args.edges:,}-edge synthetic graph, {args.queries} queries, top-1; load {load}")
    print("| search | entities | one search per query s | search_many s | speedup | same best |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['search']} | {r['entities']:,} | {r['loop_s']:.2f} | "
            f"{r['search_many_s']:.2f} | {r['speedup']:.1f}× | {r['same_best']:.3f} |"
        )
    with open(args.out, "w") as f:
        json.dump({"edges": args.edges, "queries": args.queries, "load": load, "rows": rows}, f)


if __name__ == "__main__":
    main()
