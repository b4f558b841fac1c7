"""Saving the HNSW index with the embedded store (issue 16): what a load costs when it adopts
the saved index, against building it again. One synthetic scale graph with ``ann=True``:
build the index (first search), save, then load twice — ANN off (the index files are ignored)
and ANN on (adopted) — timing each load and its first seed search. Prints a table and writes
JSON.

    PYTHONPATH=. python benchmarks/ann_reload.py --edges 100000 \
        --out benchmarks/results/ann_reload.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from remindrag_integrations.stores import InMemoryGraphStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.scale import synthetic_graph  # noqa: E402

KINDS = ("entity", "anchor")


def _ms(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - t) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=100_000)
    ap.add_argument("--out", default="benchmarks/results/ann_reload.json")
    args = ap.parse_args()
    load = [os.getloadavg()]
    store = synthetic_graph(args.edges, 384, ann=True)
    q = store.node_embeddings([store.whole_graph()[0][0].id])[0]
    rows = [
        {"step": "build the index (first search)", "ms": _ms(lambda: store.search(q, 2, KINDS))}
    ]
    root = Path(tempfile.mkdtemp(prefix="remindrag-annreload-"))
    try:
        rows.append({"step": "save (index included)", "ms": _ms(lambda: store.save(root))})
        for ann in (False, True):
            t = time.perf_counter()
            loaded = InMemoryGraphStore.load(root, ann=ann)
            took = (time.perf_counter() - t) * 1e3
            how = "adopts the saved index" if ann else "ANN off, exact scan"
            rows.append({"step": f"load, {how}", "ms": took})
            first = _ms(lambda s=loaded: s.search(q, 2, KINDS))
            rows.append({"step": f"first seed search after it ({how})", "ms": first})
            assert np.isfinite(first)
        disk = sum(p.stat().st_size for p in root.rglob("ann-*")) / 2**20
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load.append(os.getloadavg())
    print(f"\n{args.edges:,}-edge graph, ann=True; index files {disk:.1f} MB; load {load}")
    print("| step | ms |\n|---|---|")
    for r in rows:
        print(f"| {r['step']} | {r['ms']:.0f} |")
    with open(args.out, "w") as f:
        json.dump({"edges": args.edges, "index_mb": disk, "rows": rows, "load": load}, f)


if __name__ == "__main__":
    main()
