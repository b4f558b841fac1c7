"""Memory users can count on (issue 21), zero-token, pooled graphs of the dev sets:
teach half of the first N questions their gold documents, then ask the taught questions,
their paraphrases and the untaught half; then re-insert every taught document with one
sentence appended and count the remembered edges kept. Prints a table, writes JSON.

    python benchmarks/memory_trust.py --set hotpotqa_train100 --n 60
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import load_dataset  # noqa: E402
from benchmarks.harness.resources import machine, make_embedder  # noqa: E402
from benchmarks.harness.trust import run_long_edit, run_trust, table  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=os.environ.get("REMINDRAG_BENCH_DATA", "../shared/datasets"))
    p.add_argument("--set", dest="set_name", action="append", default=[])
    p.add_argument("--n", type=int, default=60, help="questions in the pooled graph")
    p.add_argument("--long", action="append", default=[], help="a long-document set (edits)")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--embed-cache", default=".remindrag-cache/bench")
    p.add_argument("--out", default="benchmarks/results/memory_trust.json")
    args = p.parse_args()
    embedder = make_embedder(args.embedder, args.embed_cache or None)
    log = lambda s: print(f"[{time.strftime('%H:%M:%S')}] {s}", file=sys.stderr, flush=True)  # noqa: E731
    out = {"machine": machine(), "load": os.getloadavg(), "runs": []}
    for name in args.set_name:
        result = run_trust(load_dataset(name, args.data), embedder, args.n, progress=log)
        print(table(result), flush=True)
        out["runs"].append(result)
    for name in args.long:
        result = run_long_edit(load_dataset(name, args.data), embedder, progress=log)
        ev, mem = result["evidence@5"], result["index_report_memory"]
        print(
            f"{name}: {result['documents']} documents, {result['chunks']} chunks; taught "
            f"{result['taught_pairs']}/{result['pairs']}; evidence@5 {ev['before']:.3f} -> "
            f"{ev['taught']:.3f} -> {ev['after_edit']:.3f} after the edit; remembered edges "
            f"{result['remembered_edges_before']} -> {result['remembered_edges_after']} "
            f"(kept {mem.get('kept', 0)}, moved {mem.get('moved', 0)}, "
            f"dropped {mem.get('dropped', 0)})",
            flush=True,
        )
        out["runs"].append(result)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
