"""What the embedded store's RSS at 1 M edges still spends on Python objects (issue 16): the
resident memory of N ``core.types.Edge`` objects as the store keeps them (a dict by id), against
the same frozen dataclass with ``slots=True``. Each variant runs in a fresh subprocess. Prints
a table and writes JSON.

    PYTHONPATH=. python benchmarks/edge_slots.py --edges 1000000 \
        --out benchmarks/results/edge_slots.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import dataclasses, os, sys
from remindrag_integrations.core.types import Edge

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

cls = Edge
if sys.argv[2] == "slots":
    cls = dataclasses.dataclass(frozen=True, slots=True)(
        type("Edge", (), {"__annotations__": dict(Edge.__annotations__)})
    )
n, before = int(sys.argv[1]), rss()
edges = {}
for i in range(n):
    eid = f"r-{i:010x}"
    edges[eid] = cls(eid, f"e-{i % 150000:010x}", f"e-{(i * 7) % 150000:010x}", "relation",
                     f"entity {i % 150000} relates to entity {(i * 7) % 150000} in chunk {i // 22}.")
print(rss() - before)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--out", default="benchmarks/results/edge_slots.json")
    args = ap.parse_args()
    rows = []
    for variant in ("dataclass (today)", "slots"):
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.edges), variant.split()[0]],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append({"edge_class": variant, "rss_mb": float(proc.stdout.strip())})
    print(f"\nRSS of {args.edges:,} edges kept in a dict by id (load {os.getloadavg()[0]:.1f})")
    print("| Edge class | RSS MB |\n|---|---|")
    for r in rows:
        print(f"| {r['edge_class']} | {r['rss_mb']:.0f} |")
    with open(args.out, "w") as f:
        json.dump({"edges": args.edges, "rows": rows, "load": os.getloadavg()}, f)


if __name__ == "__main__":
    main()
