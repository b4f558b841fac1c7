"""A whole zero-token query at scale, embedded store and PostgreSQL side by side (issue 25).

    python benchmarks/whole_query.py --edges 100000 1000000 [--queries 30] [--first-query]
        [--configs '{"power": {"prior": {"push_epsilon": 0}}}'] [--pg-only] [--pg-ef-search 200]

Per size, the corpus-shaped synthetic graph of ``store_latency.py`` (dim 128) is loaded into
the embedded store (not with ``--pg-only``) and (one bulk ``add_graph``) into PostgreSQL;
memory is warmed as ``pg_scale.py`` does it, each memory write timed. Then the same queries
(near random anchors; the text "q", so the lexical half finds nothing and the question names
no entity) run through the whole pipeline (prior, seeds, replay, zero-token walk, rank),
alternating the stores (and the ``--configs``, retrieval overrides timed beside the default)
query by query: p50 / p95 ms of the whole ``retrieve`` and of each stage
(``trace.timings_ms``), SQL statements and rows per query on PostgreSQL, and PostgreSQL
queries per second from one client (``--qps-seconds``). ``--first-query``: the embedded store
is saved, then a fresh process loads it (each load step timed) and times its first and second
query. Load average (``uptime``) before and after. Writes ``benchmarks/results/whole_query_<edges><tag>.json``
(summary only)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from pg_scale import load_avg, make_queries, one_batch, qps, query  # noqa: E402
from store_latency import pg_dsn, warm_paths  # noqa: E402

from remindrag_integrations.core.config import RetrievalConfig  # noqa: E402
from remindrag_integrations.core.memory.write import update  # noqa: E402
from remindrag_integrations.stores import InMemoryGraphStore  # noqa: E402
from remindrag_integrations.stores.postgres import BulkOptions, PostgresGraphStore  # noqa: E402

OUT = ROOT / "results"
STAGES = ("prior", "seed_search", "replay", "navigate", "bookkeeping")


class _Counted:
    """A cursor that counts the statements it executes and the rows it returns."""

    def __init__(self, cur: Any, tally: list[int]) -> None:
        self._cur, self._tally = cur, tally

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._tally[0] += 1
        self._cur.execute(*args, **kwargs)
        return self

    def fetchall(self) -> list:
        rows = self._cur.fetchall()
        self._tally[1] += len(rows)
        return rows

    def fetchone(self) -> Any:
        row = self._cur.fetchone()
        self._tally[1] += row is not None
        return row

    def __iter__(self) -> Iterator[Any]:
        for row in self._cur:
            self._tally[1] += 1
            yield row

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


class CountingPg(PostgresGraphStore):
    """PostgreSQL, counting SQL statements and rows read (``tally``)."""

    tally = [0, 0]

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        with super()._cursor() as cur:
            yield _Counted(cur, self.tally)

    def _tx(self, fn: Any, retries: int = 8) -> Any:
        return super()._tx(lambda cur: fn(_Counted(cur, self.tally)), retries)


def pcts(xs: list[float]) -> dict[str, float]:
    return {
        "p50": round(float(np.percentile(xs, 50)), 2),
        "p95": round(float(np.percentile(xs, 95)), 2),
    }


def time_queries(
    stores: dict[str, Any], qs: list[np.ndarray], passes: int, configs: dict[str, dict]
) -> dict:
    """Whole-query and stage ms per store and config (``<store>`` for the default config,
    ``<store>:<label>`` for the others), the stores and configs alternating query by query
    (pass 0 warms caches and is not counted); statements and rows per query where counted."""
    cfgs = {label: RetrievalConfig(**over) for label, over in configs.items()}
    runs = {
        (name if not label else f"{name}:{label}"): (store, cfg)
        for label, cfg in cfgs.items()
        for name, store in stores.items()
    }
    total: dict[str, list[float]] = {s: [] for s in runs}
    stage: dict[str, dict[str, list[float]]] = {s: {k: [] for k in STAGES} for s in runs}
    counted: dict[str, list[tuple[int, int]]] = {s: [] for s in runs}
    chunks: dict[str, list[list[str]]] = {s: [] for s in runs}
    for p in range(passes + 1):
        for q in qs:
            for name, (store, cfg) in runs.items():
                before = list(getattr(store, "tally", (0, 0)))
                t = time.perf_counter()
                r = query(store, q, cfg)
                ms = (time.perf_counter() - t) * 1e3
                if not p:
                    continue
                total[name].append(ms)
                for k in STAGES:
                    stage[name][k].append(r.trace.timings_ms[k])
                if hasattr(store, "tally"):
                    counted[name].append((store.tally[0] - before[0], store.tally[1] - before[1]))
                if p == 1:
                    chunks[name].append([c.chunk.id for c in r.chunks])
    out: dict = {}
    for name in runs:
        out[name] = {
            "whole_ms": pcts(total[name]),
            "stage_p50_ms": {k: pcts(v)["p50"] for k, v in stage[name].items()},
            "prior_ms": pcts(stage[name]["prior"]),
        }
        if counted[name]:
            out[name]["statements_per_query"] = round(
                float(np.mean([c for c, _ in counted[name]])), 1
            )
            out[name]["rows_per_query"] = round(float(np.mean([r for _, r in counted[name]])), 1)
    out["chunks"] = chunks
    return out


_FIRST = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
t = time.perf_counter()
from remindrag_integrations.stores import InMemoryGraphStore
from remindrag_integrations.stores.snapshot import LOAD_STEPS
from pg_scale import query
import numpy as np
ends = [t]
store = InMemoryGraphStore.load(sys.argv[1], progress=lambda done, total: ends.append(time.perf_counter()))
load_s = time.perf_counter() - t
steps = {s: round(b - a, 3) for s, a, b in zip(LOAD_STEPS, ends, ends[1:])}
qs = np.load(sys.argv[3])
t = time.perf_counter(); r = query(store, qs[0]); first = time.perf_counter() - t
t = time.perf_counter(); query(store, qs[1]); second = time.perf_counter() - t
print(json.dumps({"load_s": load_s, "load_steps_s": steps, "first_query_s": first,
                  "second_query_s": second, "first_stages_ms": r.trace.timings_ms}))
"""


def first_query(store: InMemoryGraphStore, qs: list[np.ndarray]) -> dict:
    """Save the store; a fresh process loads it and times its first two queries."""
    tmp = Path(tempfile.mkdtemp(prefix="remindrag-wq-"))
    try:
        store.save(tmp / "store")
        np.save(tmp / "qs.npy", np.asarray(qs[:2]))
        cmd = [sys.executable, "-c", _FIRST, str(tmp / "store"), str(ROOT), str(tmp / "qs.npy")]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode:
            return {"error": done.stderr.strip().splitlines()[-1][:200]}
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def timed_warm(store: Any, qs: list[np.ndarray], budget: int = 16) -> dict[str, float]:
    """Warm memory as ``pg_scale.warm`` does (enhance, twice, the edges of a short DFS from
    each query's seeds); p50 / p95 ms of one memory write (``update``: one atomic
    ``update_memory`` of 16 edges)."""
    ms = []
    for q in qs:
        out = warm_paths(store, q, budget)
        for _ in range(2):
            t = time.perf_counter()
            update(store, out, [], q)
            ms.append((time.perf_counter() - t) * 1e3)
    return pcts(ms)


def run_size(n: int, args: argparse.Namespace, dsn: str) -> dict:
    row: dict[str, Any] = {"edges_target": n, "dim": args.dim, "load_avg_before": load_avg()}
    t = time.perf_counter()
    batch = one_batch(n, args.dim)
    row["batch_build_s"] = round(time.perf_counter() - t, 1)
    row["load_avg_after_build"] = load_avg()
    stores: dict[str, Any] = {}
    if not args.pg_only:
        t = time.perf_counter()
        emb = InMemoryGraphStore()
        emb.add_graph(**batch)
        row["embedded_load_s"] = round(time.perf_counter() - t, 1)
        stores["embedded"] = emb
    ns = f"wholeq-{n}"
    phases: dict[str, Any] = {}

    def note(phase: str, secs: float) -> None:  # BulkOptions.progress: one line per phase
        phases[phase] = {"s": round(secs, 1), "load_avg_after": load_avg()}
        print(f"  bulk load {n:,} edges: {phase} {secs:.1f} s, load {load_avg()}", flush=True)

    pg = PostgresGraphStore(dsn, namespace=ns, bulk=BulkOptions(rows=1, progress=note))
    pg.drop_namespace()
    t = time.perf_counter()
    pg.add_graph(**batch)
    row["pg_bulk_load_s"] = round(time.perf_counter() - t, 1)
    row["pg_bulk_phases"] = phases
    row["load_avg_after_pg_load"] = load_avg()
    row["counts"] = pg.counts()
    pg.close()
    qs, _ = make_queries(batch, args.queries, args.dim)
    del batch
    counting = CountingPg(dsn, namespace=ns)
    stores["postgres"] = counting
    row["memory_write_ms"] = {name: timed_warm(store, qs) for name, store in stores.items()}
    for ef in args.pg_ef_search:  # the same tenant read with another hnsw.ef_search (no writes)
        stores[f"postgres_ef{ef}"] = CountingPg(dsn, namespace=ns, ef_search=ef)
    row["load_avg_before_queries"] = load_avg()
    configs = {"": {}, **{k: v for k, v in args.configs.items()}}
    res = time_queries(stores, qs, args.passes, configs)
    chunks = res.pop("chunks")
    if not args.pg_only:
        row["same_chunks_share"] = same_share(chunks["embedded"], chunks["postgres"])
        for label in args.configs:
            e, p = chunks[f"embedded:{label}"], chunks[f"postgres:{label}"]
            row[f"same_chunks_share:{label}"] = same_share(e, p)
            row[f"same_chunks_as_default:{label}"] = {
                "embedded": same_share(e, chunks["embedded"]),
                "postgres": same_share(p, chunks["postgres"]),
            }
    for ef in args.pg_ef_search:
        other = chunks[f"postgres_ef{ef}"]
        row[f"same_chunks_as_postgres:ef{ef}"] = same_share(other, chunks["postgres"])
        stores[f"postgres_ef{ef}"].close()
    row.update(res)
    row["load_avg_after_queries"] = load_avg()
    if args.qps_seconds > 0:
        row["pg_qps_1_client"] = qps(dsn, ns, qs, 1, "threads", args.qps_seconds)
        row["load_avg_after_qps"] = load_avg()
    counting.close()
    if args.first_query and not args.pg_only:
        row["embedded_after_load"] = first_query(emb, qs)
        row["load_avg_after_first_query"] = load_avg()
    return row


def same_share(a: list[list[str]], b: list[list[str]]) -> float:
    """The share of queries whose result lists are the same."""
    return round(float(np.mean([x == y for x, y in zip(a, b)])), 3)


def print_row(r: dict, label: str = "") -> None:
    tag = f":{label}" if label else ""
    none = {"whole_ms": {"p50": "-", "p95": "-"}, "prior_ms": {"p50": "-"}}
    e, p = r.get(f"embedded{tag}", none), r[f"postgres{tag}"]
    print(
        f"| {r['counts']['edges']:,} {label or 'default'} | "
        f"{e['whole_ms']['p50']} / {e['whole_ms']['p95']} | "
        f"{e['prior_ms']['p50']} | {p['whole_ms']['p50']} / {p['whole_ms']['p95']} | "
        f"{p['prior_ms']['p50']} | {p.get('statements_per_query')} | {p.get('rows_per_query')} | "
        f"{r.get('pg_qps_1_client', '-')} | {r['load_avg_before_queries']} |",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--qps-seconds", type=float, default=10.0)
    ap.add_argument("--first-query", action="store_true")
    ap.add_argument("--pg-only", action="store_true", help="PostgreSQL alone (10 M edges)")
    ap.add_argument("--dsn", default=None, help="PostgreSQL DSN (default: embedded server)")
    ap.add_argument(
        "--pg-ef-search",
        type=int,
        nargs="*",
        default=[],
        help="also time PostgreSQL with these hnsw.ef_search values (the store's default: 800)",
    )
    ap.add_argument("--tag", default="", help="suffix of the result files")
    ap.add_argument(
        "--configs",
        type=json.loads,
        default={},
        help='more retrieval configs timed beside the default, e.g. \'{"power": '
        '{"prior": {"push_epsilon": 0}}}\' (label: overrides)',
    )
    args = ap.parse_args()
    dsn = pg_dsn(args.dsn)
    OUT.mkdir(parents=True, exist_ok=True)
    print(
        "| edges | embedded p50 / p95 ms | embedded prior p50 | PostgreSQL p50 / p95 ms | "
        "PostgreSQL prior p50 | statements / query | rows / query | PG q/s (1 client) | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sorted(args.edges):
        r = run_size(n, args, dsn)
        meta = {"machine": platform.platform(), "cpus": os.cpu_count(), "args": vars(args)}
        name = f"whole_query_{n}{args.tag}.json"
        (OUT / name).write_text(json.dumps({**meta, "row": r}, indent=2))
        for label in ["", *args.configs]:
            print_row(r, label)


if __name__ == "__main__":
    main()
