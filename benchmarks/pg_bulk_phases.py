"""Where a PostgreSQL bulk load spends its time, statement by statement (issue 25 item 3).

    python benchmarks/pg_bulk_phases.py --edges 1000000 [--tag _after]

Builds the corpus-shaped synthetic graph of ``store_latency.py`` (dim 128) and loads it into a
fresh namespace in one ``add_graph`` batch on the bulk path, timing every SQL statement and
COPY of that transaction on the cursor (so it times any version of the store the same way:
run it with an older checkout on ``PYTHONPATH`` for a "before"), and, where the store reports
them, its ``BulkOptions.progress`` phases. ``--stop-after PHASE`` abandons the load once that
phase is done (the transaction rolls back): the phases before the HNSW build of a large graph
without waiting for it. Prints the statements over 50 ms and writes
``benchmarks/results/pg_bulk_phases_<edges><tag>.json`` with the load average.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from pg_scale import one_batch  # noqa: E402
from store_latency import pg_dsn  # noqa: E402

from remindrag_integrations.stores.postgres import BulkOptions, PostgresGraphStore  # noqa: E402

OUT = ROOT / "results"


class Stopped(Exception):
    """Raised by the progress callback after ``--stop-after``'s phase."""


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed_statements(log: list[tuple[float, float, str]]) -> None:
    """Record (start, end, statement) of every ``execute`` and ``copy`` of any cursor."""
    execute, copy = psycopg.Cursor.execute, psycopg.Cursor.copy

    def timed_execute(self: psycopg.Cursor, query: Any, *a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return execute(self, query, *a, **k)
        finally:
            log.append((t, time.perf_counter(), " ".join(str(query).split())))

    @contextmanager
    def timed_copy(self: psycopg.Cursor, statement: Any, *a: Any, **k: Any) -> Iterator[Any]:
        t = time.perf_counter()
        with copy(self, statement, *a, **k) as c:
            yield c
        log.append((t, time.perf_counter(), " ".join(str(statement).split())))

    psycopg.Cursor.execute = timed_execute  # type: ignore[method-assign]
    psycopg.Cursor.copy = timed_copy  # type: ignore[method-assign,assignment]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--dsn", default=None, help="PostgreSQL DSN (default: embedded server)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--stop-after", default=None, help="a phase name, e.g. 'index rr_edges_v'")
    args = ap.parse_args()
    t = time.perf_counter()
    batch = one_batch(args.edges, args.dim)
    built = time.perf_counter() - t
    dsn = pg_dsn(args.dsn)
    phases: list[tuple[str, float]] = []
    opts: dict[str, Any] = {"rows": 1}
    if "progress" in inspect.signature(BulkOptions).parameters:  # older stores: statements only

        def progress(phase: str, secs: float) -> None:
            phases.append((phase, round(secs, 2)))
            print(f"  {phase}: {secs:.1f} s, load {load_avg()}", flush=True)
            if phase == args.stop_after:
                raise Stopped

        opts["progress"] = progress
    store = PostgresGraphStore(dsn, namespace=f"phases-{args.edges}", bulk=BulkOptions(**opts))
    store.drop_namespace()
    log: list[tuple[float, float, str]] = []
    timed_statements(log)
    before = load_avg()
    t0 = time.perf_counter()
    try:
        store.add_graph(**batch)
    except Stopped:
        print(f"stopped after {args.stop_after!r}, rolled back")
    total = time.perf_counter() - t0
    after = load_avg()
    counts = store.counts()  # zero after --stop-after
    store.close()
    statements = [
        {"at_s": round(a - t0, 2), "s": round(b - a, 2), "sql": q[:120]}
        for a, b, q in log
        if b - a >= 0.05
    ]
    print(
        f"{args.edges:,} edges ({len(batch['nodes']):,} nodes): add_graph {total:.1f} s, "
        f"load average {before} -> {after}"
    )
    for s in statements:
        print(f"{s['at_s']:8.1f} {s['s']:8.2f} s  {s['sql'][:90]}")
    for p, s in phases:
        print(f"phase {p}: {s} s")
    row = {
        "edges": args.edges,
        "counts": counts,
        "batch_build_s": round(built, 1),
        "add_graph_s": round(total, 1),
        "stopped_after": args.stop_after,
        "statements_over_50ms": statements,
        "phases": phases,
        "load_avg_before": before,
        "load_avg_after": after,
        "args": vars(args),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"pg_bulk_phases_{args.edges}{args.tag}.json").write_text(json.dumps(row, indent=2))


if __name__ == "__main__":
    main()
