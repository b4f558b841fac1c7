"""What PostgreSQL's neighbourhood cap costs and buys (issue 25): the same zero-token queries
with ``prior.max_nodes`` from 5,000 (the default) down to 200; whole-query and prior p50, and
how far the top-k moves (against 5,000 and against the embedded store's whole-graph prior).

    python benchmarks/prior_cap.py --edges 100000 [--queries 20]

Writes ``benchmarks/results/prior_cap_<edges>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from pg_scale import load_avg, make_queries, one_batch, query, warm  # noqa: E402
from store_latency import pg_dsn  # noqa: E402
from whole_query import CountingPg  # noqa: E402

from remindrag_integrations.core.config import RetrievalConfig  # noqa: E402
from remindrag_integrations.stores import InMemoryGraphStore  # noqa: E402
from remindrag_integrations.stores.postgres import BulkOptions, PostgresGraphStore  # noqa: E402

CAPS = (5000, 2000, 1000, 500, 200)


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    return round(float(np.mean([len(set(x) & set(y)) / max(len(x), 1) for x, y in zip(a, b)])), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()
    dsn = pg_dsn(args.dsn)
    batch = one_batch(args.edges, 128)
    qs, _ = make_queries(batch, args.queries, 128)
    emb = InMemoryGraphStore()
    emb.add_graph(**batch)
    loader = PostgresGraphStore(dsn, namespace="prior-cap", bulk=BulkOptions(rows=1))
    loader.drop_namespace()
    loader.add_graph(**batch)
    loader.close()
    del batch
    pg = CountingPg(dsn, namespace="prior-cap")
    warm(emb, qs)
    warm(pg, qs)
    out: dict = {"edges": args.edges, "queries": args.queries, "load_avg_before": load_avg()}
    ref = [[c.chunk.id for c in query(emb, q).chunks] for q in qs]
    base: list[list[str]] = []
    print(
        "| prior.max_nodes | whole p50 ms | prior p50 ms | same as 5000 | overlap | same as embedded |"
    )
    for cap in CAPS:
        ids, ms, prior = [], [], []
        for q in qs:
            t = time.perf_counter()
            r = query(pg, q, RetrievalConfig(prior={"max_nodes": cap}))
            ms.append((time.perf_counter() - t) * 1e3)
            prior.append(r.trace.timings_ms["prior"])
            ids.append([c.chunk.id for c in r.chunks])
        base = base or ids
        row = {
            "whole_p50_ms": round(float(np.median(ms)), 1),
            "prior_p50_ms": round(float(np.median(prior)), 1),
            "same_as_5000": float(np.mean([a == b for a, b in zip(ids, base)])),
            "overlap_5000": overlap(ids, base),
            "same_as_embedded": float(np.mean([a == b for a, b in zip(ids, ref)])),
            "overlap_embedded": overlap(ids, ref),
        }
        out[str(cap)] = row
        print(f"| {cap} | " + " | ".join(str(v) for v in row.values()) + " |", flush=True)
    out["load_avg_after"] = load_avg()
    pg.close()
    (ROOT / "results" / f"prior_cap_{args.edges}.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
