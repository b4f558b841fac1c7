"""PostgreSQL at scale (issue #16): bulk load, one-round-trip replay, HNSW recall, concurrency.

    python benchmarks/pg_scale.py --edges 1000 10000 100000 1000000 [--dim 128]

Per size, smallest first (each size's JSON is written as soon as it is done, to
``benchmarks/results/pg_scale_<edges>.json``): the synthetic corpus-shaped graph of
``store_latency.py`` is loaded in one ``add_graph`` batch (the bulk path) and, up to
``--row-max`` edges, also row by row (bulk off) for a side-by-side ratio and a same-graph
check. Memory is warmed as memorization does it; then seed search (top-2 entity/anchor) is
timed and its recall against exact top-2 (numpy over the same embeddings) measured for each
``--ef-search``; replay is timed with the one-statement frontier read and with plain per-node
reads. At the largest size, zero-token queries (the whole pipeline: seeds, replay, zero-token
walk, rank) run from 1, 2, 4, 8 clients as threads and as processes; QPS is reported. The
scale curve is written to ``pg_scale.json`` / ``pg_scale.png``. Load average (``uptime``) is
recorded before and after every measured phase.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from store_latency import pg_dsn, synthetic_batches, warm_paths  # noqa: E402

from remindrag_integrations.core.config import RetrievalConfig  # noqa: E402
from remindrag_integrations.core.frontier import Follow, Neighborhood, read_neighborhoods  # noqa: E402
from remindrag_integrations.core.memory import math as mem  # noqa: E402
from remindrag_integrations.core.memory.replay import replay  # noqa: E402
from remindrag_integrations.core.memory.write import update  # noqa: E402
from remindrag_integrations.core.navigate.zero_token import ZeroTokenNavigator  # noqa: E402
from remindrag_integrations.core.pipeline import retrieve  # noqa: E402
from remindrag_integrations.core.store import reading  # noqa: E402
from remindrag_integrations.core.types import CostLedger, Retrieval  # noqa: E402
from remindrag_integrations.core.walk import Walk, find_seeds  # noqa: E402
from remindrag_integrations.stores.postgres import BulkOptions, PostgresGraphStore  # noqa: E402

OUT = ROOT / "results"


class Counting(PostgresGraphStore):
    """The store, counting its connection uses (one per store call: a round trip or two)."""

    calls = 0

    def _cursor(self):  # type: ignore[no-untyped-def]
        self.calls += 1
        return super()._cursor()

    def _tx(self, fn, retries=8):  # type: ignore[no-untyped-def]
        self.calls += 1
        return super()._tx(fn, retries)


class PlainReads(Counting):
    """The store with its one-statement frontier read replaced by per-node plain reads."""

    def neighborhoods(
        self, node_ids: Sequence[str], follow: Follow | None = None
    ) -> dict[str, Neighborhood]:
        return read_neighborhoods(self, node_ids, follow)


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def one_batch(n_edges: int, dim: int) -> dict:
    """The whole graph as one ``add_graph`` batch."""
    return next(synthetic_batches(n_edges, dim, batch_chunks=10**9))


def timed_load(dsn: str, ns: str, batch: dict, bulk_rows: int | None) -> tuple[float, dict]:
    store = PostgresGraphStore(dsn, namespace=ns, bulk=BulkOptions(rows=bulk_rows))
    store.drop_namespace()
    t = time.perf_counter()
    store.add_graph(**batch)
    secs = time.perf_counter() - t
    counts = store.counts()
    store.close()
    return secs, counts


def make_queries(batch: dict, n: int, dim: int) -> tuple[list[np.ndarray], list[list[str]]]:
    """Queries near random anchors, and the exact top-2 entity/anchor nodes of each."""
    rng = np.random.default_rng(1)
    nodes, emb = batch["nodes"], batch["embeddings"]
    pool = [i for i, nd in enumerate(nodes) if nd.kind in ("entity", "anchor")]
    anchors = [i for i in pool if nodes[i].kind == "anchor"]
    mat = emb[pool]
    qs, exact = [], []
    for i in rng.choice(anchors, size=min(n, len(anchors)), replace=False):
        noise = 0.3 * rng.normal(size=dim).astype(np.float32) / np.sqrt(dim)
        q = mem.unit(emb[i] + noise)
        top = np.argsort(-(mat @ q), kind="stable")[:2]
        qs.append(q)
        exact.append([nodes[pool[j]].id for j in top])
    return qs, exact


def warm(store: PostgresGraphStore, qs: list[np.ndarray], budget: int = 16) -> None:
    """Enhance (twice) the edges of a short DFS from each query's seeds."""
    for q in qs:
        out = warm_paths(store, q, budget)
        update(store, out, [], q)
        update(store, out, [], q)


def pct(xs: list[float], k: int) -> float:
    return round(float(np.percentile(xs, k)), 3)


def time_seeds(store: PostgresGraphStore, qs: list[np.ndarray], exact: list[list[str]]) -> dict:
    ms, hits = [], []
    for p in range(3):  # pass 0 warms caches
        for q, ex in zip(qs, exact):
            t = time.perf_counter()
            seeds = find_seeds(store, [q], 2)
            if p:
                ms.append((time.perf_counter() - t) * 1e3)
                hits.append(len(set(seeds) & set(ex)) / len(ex))
    return {"seed_p50_ms": pct(ms, 50), "seed_p95_ms": pct(ms, 95), "recall": float(np.mean(hits))}


def time_replay(store: Counting, qs: list[np.ndarray]) -> dict:
    cfg = RetrievalConfig()
    seeds = [find_seeds(store, [q], cfg.seeds) for q in qs]
    ms, got, calls = [], [], []
    for p in range(3):
        for q, ss in zip(qs, seeds):
            walk = Walk(store, q, cfg)
            for s in ss:
                walk.add(s, None, None, "seed")
            before, t = store.calls, time.perf_counter()
            replay(walk)
            if p:
                ms.append((time.perf_counter() - t) * 1e3)
                got.append(len(walk.replayed_edges))
                calls.append(store.calls - before)
    return {
        "replay_p50_ms": pct(ms, 50),
        "replay_p95_ms": pct(ms, 95),
        "store_calls_mean": round(float(np.mean(calls)), 2),
        "replayed_edges_mean": round(float(np.mean(got)), 2),
        "replayed": got,
    }


def query(store: Any, q: np.ndarray, cfg: RetrievalConfig | None = None) -> Retrieval:
    """One zero-token query through the whole pipeline (the text "q", the vector given, not
    embedded), on any store, read through its snapshot as the engine reads (on PostgreSQL
    the snapshot is what lets the graph cache answer: issue 49)."""
    with reading(store) as view:
        step = retrieve(view, "q", cfg or RetrievalConfig(), ZeroTokenNavigator(), CostLedger())
        next(step)  # the Embed request: answered with the precomputed vector
        try:
            step.send(q[None, :])
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
    raise RuntimeError("a zero-token query asked the LLM")


def _client(
    dsn: str, ns: str, qs: list[np.ndarray], secs: float, start: object, out: object
) -> None:
    store = PostgresGraphStore(dsn, namespace=ns, pool_size=1)
    query(store, qs[0])
    start.wait()  # type: ignore[attr-defined]
    n, end = 0, time.perf_counter() + secs
    while time.perf_counter() < end:
        query(store, qs[n % len(qs)])
        n += 1
    store.close()
    out.put(n)  # type: ignore[attr-defined]


def qps(dsn: str, ns: str, qs: list[np.ndarray], clients: int, kind: str, secs: float) -> float:
    if kind == "threads":
        import queue

        out: object = queue.Queue()
        start: object = threading.Barrier(clients + 1)
        workers = [
            threading.Thread(target=_client, args=(dsn, ns, qs[i::clients], secs, start, out))
            for i in range(clients)
        ]
    else:
        ctx = mp.get_context("spawn")
        out, start = ctx.Queue(), ctx.Barrier(clients + 1)
        workers = [
            ctx.Process(target=_client, args=(dsn, ns, qs[i::clients], secs, start, out))
            for i in range(clients)
        ]
    for w in workers:
        w.start()
    start.wait()  # type: ignore[attr-defined]
    total = sum(out.get() for _ in workers)  # type: ignore[attr-defined]
    for w in workers:
        w.join()
    return round(total / secs, 1)


def run_size(n: int, args: argparse.Namespace, dsn: str) -> dict:
    batch = one_batch(n, args.dim)
    ns = f"pgscale-{n}"
    row: dict = {"edges_target": n, "dim": args.dim, "load_avg_before": load_avg()}
    row["bulk_load_s"], counts = timed_load(dsn, ns, batch, bulk_rows=1)
    row.update(counts=counts, load_avg_after_bulk=load_avg())
    if n <= args.row_max:
        row["row_load_s"], row_counts = timed_load(dsn, ns + "-rows", batch, bulk_rows=None)
        a = PostgresGraphStore(dsn, namespace=ns).whole_graph()
        rows_store = PostgresGraphStore(dsn, namespace=ns + "-rows")
        row["same_graph_as_row_path"] = a == rows_store.whole_graph() and row_counts == counts
        rows_store.close()  # kept: the benchmark's server is thrown away at exit
        row["load_avg_after_rows"] = load_avg()
    qs, exact = make_queries(batch, args.queries, args.dim)
    del batch
    store = PostgresGraphStore(dsn, namespace=ns)
    warm(store, qs)
    row["seeds"] = {
        ef: time_seeds(PostgresGraphStore(dsn, namespace=ns, ef_search=ef), qs, exact)
        for ef in args.ef_search
    }
    one = time_replay(Counting(dsn, namespace=ns), qs)
    plain = time_replay(PlainReads(dsn, namespace=ns), qs)
    row["same_replay"] = one.pop("replayed") == plain.pop("replayed")
    row["replay_one_statement"], row["replay_plain_reads"] = one, plain
    row["load_avg_after_queries"] = load_avg()
    if n == max(args.edges) and args.qps_seconds > 0:
        row["qps"] = {
            kind: {c: qps(dsn, ns, qs, c, kind, args.qps_seconds) for c in (1, 2, 4, 8)}
            for kind in ("threads", "processes")
        }
        row["load_avg_after_qps"] = load_avg()
    store.close()
    return row


def print_row(r: dict) -> None:
    ef = min(r["seeds"], key=lambda e: (r["seeds"][e]["recall"] < 0.95, e))
    s = r["seeds"][ef]
    print(
        f"| {r['counts']['edges']:,} | {r['bulk_load_s']:.1f} | {r.get('row_load_s', '-')} | "
        f"{ef} | {s['recall']:.3f} | {s['seed_p50_ms']} | "
        f"{r['replay_one_statement']['replay_p50_ms']} | "
        f"{r['replay_plain_reads']['replay_p50_ms']} | {r['load_avg_before']} |",
        flush=True,
    )


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges = [r["counts"]["edges"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.loglog(edges, [r["bulk_load_s"] for r in rows], "o-", label="bulk load")
    done = [r for r in rows if "row_load_s" in r]
    a.loglog(
        [r["counts"]["edges"] for r in done],
        [r["row_load_s"] for r in done],
        "s--",
        label="row by row",
    )
    a.set(xlabel="edges", ylabel="load (s)", title="PostgreSQL load")
    a.legend()
    for ef in [e for e in rows[-1]["seeds"] if all(e in r["seeds"] for r in rows)]:
        b.loglog(
            edges,
            [r["seeds"][ef]["seed_p50_ms"] for r in rows],
            ".-",
            label=f"seed p50, ef_search {ef}",
        )
    b.loglog(
        edges,
        [r["replay_one_statement"]["replay_p50_ms"] for r in rows],
        "o-",
        label="replay p50 (frontier read)",
    )
    b.loglog(
        edges,
        [r["replay_plain_reads"]["replay_p50_ms"] for r in rows],
        "s--",
        label="replay p50 (plain reads)",
    )
    b.set(xlabel="edges", ylabel="ms", title="PostgreSQL query latency")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_curve() -> None:
    """``pg_scale.json`` and ``pg_scale.png`` from every ``pg_scale_<edges>.json`` present."""
    done = [p for p in OUT.glob("pg_scale_*.json") if p.stem[9:].isdigit()]
    done.sort(key=lambda p: int(p.stem[9:]))
    curve = [json.loads(p.read_text())["row"] for p in done]
    meta = {"benchmark": "pg_scale", "machine": platform.platform()}
    (OUT / "pg_scale.json").write_text(json.dumps({**meta, "rows": curve}, indent=2))
    plot(curve, OUT / "pg_scale.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--ef-search", type=int, nargs="+", default=[40, 100, 200, 400])
    ap.add_argument("--row-max", type=int, default=100_000, help="largest row-by-row load")
    ap.add_argument("--qps-seconds", type=float, default=5.0)
    ap.add_argument("--dsn", default=None, help="PostgreSQL DSN (default: embedded server)")
    ap.add_argument("--curve-only", action="store_true", help="only redraw the curve and plot")
    args = ap.parse_args()
    if args.curve_only:
        write_curve()
        return
    dsn = pg_dsn(args.dsn)
    OUT.mkdir(parents=True, exist_ok=True)
    print(
        "| edges | bulk load s | row load s | ef_search | recall | seed p50 ms | "
        "replay p50 ms | replay p50 ms (plain) | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for n in sorted(args.edges):
        r = run_size(n, args, dsn)
        rows.append(r)
        meta = {"machine": platform.platform(), "cpus": os.cpu_count(), "args": vars(args)}
        (OUT / f"pg_scale_{n}.json").write_text(json.dumps({**meta, "row": r}, indent=2))
        print_row(r)
        if "qps" in r:
            for kind, by in r["qps"].items():
                print(f"QPS {kind}: " + ", ".join(f"{c} clients {v}" for c, v in by.items()))
    write_curve()


if __name__ == "__main__":
    main()
