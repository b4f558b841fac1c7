"""Two checkouts side by side on one PostgreSQL graph: the whole zero-token query (issue 25).

    python benchmarks/pg_query_ab.py --code before=/tmp/main after=. --edges 1000000
    python benchmarks/pg_query_ab.py --code before=/tmp/main after=. --set hotpotqa_train100

Each ``--code`` label names a checkout (its directory goes first on the child's
``PYTHONPATH``); one child process per checkout queries the same namespace, the children
taking turns block by block (``--blocks`` rounds of every query, the first one a warm-up
not counted), so both see the same machine load. Per checkout: p50 / p95 ms of the whole
``retrieve`` and of its stages (``trace.timings_ms``), SQL statements and rows read per query
(counted on the cursor), queries per second from one client (``--qps-seconds``, also taking
turns) and whether every query returned the same chunks as the first checkout.

``--edges N``: the corpus-shaped synthetic graph of ``pg_scale.py`` (dim 128), bulk-loaded
into namespace ``ab-<N>`` unless it holds that graph already, memory warmed as ``pg_scale.py``
does; the queries are vectors near random anchors (the text "q"). ``--set NAME``: a dev set's
pooled corpus (``--data``) indexed zero-token with the packaged MiniLM into ``ab-<NAME>``,
its questions asked as text. Load average before and after. Writes
``benchmarks/results/pg_query_ab_<edges or set><tag>.json`` (summary only).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results"
STAGES = ("prior", "seed_search", "replay", "navigate", "bookkeeping")

# ---- the child: one checkout's code, queries in blocks on stdin, results on stdout ----------


PER_STATEMENT: dict[str, list[float]] = {}  # caller -> [statements, ms, rows] (--per-statement)
_WATCH: list[bool] = [False]


def _caller() -> str:
    """Where in the method a statement comes from: the last two frames in ``core/``."""
    frames = [f for f in traceback.extract_stack() if "/core/" in f.filename]
    return " < ".join(f"{Path(f.filename).stem}.{f.name}" for f in reversed(frames[-2:]))


def _counting_store(dsn: str, ns: str) -> Any:
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    class Cursor:
        def __init__(self, cur: Any, tally: list[int]) -> None:
            self._cur, self._tally = cur, tally
            self._mine: list[float] = [0, 0.0, 0]

        def execute(self, *args: Any, **kwargs: Any) -> Any:
            self._tally[0] += 1
            t = time.perf_counter()
            self._cur.execute(*args, **kwargs)
            if _WATCH[0]:
                self._mine = PER_STATEMENT.setdefault(_caller(), [0, 0.0, 0])
                self._mine[0] += 1
                self._mine[1] += (time.perf_counter() - t) * 1e3
            return self

        def fetchall(self) -> list:
            t = time.perf_counter()
            rows = self._cur.fetchall()
            self._tally[1] += len(rows)
            self._mine[1] += (time.perf_counter() - t) * 1e3 if _WATCH[0] else 0.0
            self._mine[2] += len(rows) if _WATCH[0] else 0
            return rows  # type: ignore[no-any-return]

        def fetchone(self) -> Any:
            row = self._cur.fetchone()
            self._tally[1] += row is not None
            self._mine[2] += row is not None and _WATCH[0]
            return row

        def __iter__(self) -> Iterator[Any]:
            for row in self._cur:
                self._tally[1] += 1
                self._mine[2] += _WATCH[0]
                yield row

        def __getattr__(self, name: str) -> Any:
            return getattr(self._cur, name)

    class Counting(PostgresGraphStore):  # type: ignore[misc]
        tally = [0, 0]  # shared with the snapshot views (shallow copies)

        @contextlib.contextmanager
        def _cursor(self) -> Iterator[Any]:
            with super()._cursor() as cur:
                yield Cursor(cur, self.tally)

        def _tx(self, fn: Any, retries: int = 8) -> Any:
            return super()._tx(lambda cur: fn(Cursor(cur, self.tally)), retries)

    return Counting(dsn, namespace=ns)


def child(args: argparse.Namespace) -> None:
    store = _counting_store(args.dsn, args.ns)
    if args.edges:
        sys.path.insert(0, str(ROOT))
        from pg_scale import query

        qs = list(np.load(args.queries))

        def ask(i: int) -> Any:
            return query(store, qs[i])
    else:
        from benchmarks.harness.resources import make_embedder
        from remindrag_integrations import ReMindRAG

        questions = json.loads(Path(args.queries).read_text())
        eng = ReMindRAG(embeddings=make_embedder("minilm"), store=store)

        def ask(i: int) -> Any:
            return eng.retrieve(questions[i])

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if "qps" in cmd:
            n, end, i = 0, time.perf_counter() + cmd["qps"], 0
            while time.perf_counter() < end:
                ask(i % cmd["n"])
                n, i = n + 1, i + 1
            print(json.dumps({"qps": n / cmd["qps"]}), flush=True)
            continue
        _WATCH[0] = bool(cmd.get("per_statement"))
        PER_STATEMENT.clear()
        out = []
        for i in cmd["block"]:
            s0, r0 = store.tally
            t = time.perf_counter()
            r = ask(i)
            ms = (time.perf_counter() - t) * 1e3
            out.append(
                {
                    "i": i,
                    "ms": ms,
                    "stages": {k: r.trace.timings_ms.get(k, 0.0) for k in STAGES},
                    "statements": store.tally[0] - s0,
                    "rows": store.tally[1] - r0,
                    "chunks": [c.chunk.id for c in r.chunks],
                }
            )
        print(json.dumps({"results": out, "per_statement": PER_STATEMENT}), flush=True)


# ---- the parent: data, the children taking turns, the summary -------------------------------


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def prepare_synthetic(dsn: str, n: int, work: Path) -> tuple[str, int]:
    sys.path.insert(0, str(ROOT))
    from pg_scale import make_queries, one_batch, warm

    from remindrag_integrations.stores.postgres import BulkOptions, PostgresGraphStore

    ns = f"ab-{n}"
    batch = one_batch(n, 128)
    qs, _ = make_queries(batch, 20, 128)
    np.save(work / "qs.npy", np.asarray(qs))
    store = PostgresGraphStore(dsn, namespace=ns, bulk=BulkOptions(rows=1))
    if store.counts()["edges"] != len(batch["edges"]):
        store.drop_namespace()
        store.add_graph(**batch)
        warm(store, qs)
    store.close()
    return ns, len(qs)


def prepare_set(dsn: str, name: str, data: str, work: Path) -> tuple[str, int]:
    from benchmarks.harness.data import load_dataset
    from benchmarks.harness.resources import make_embedder
    from remindrag_integrations import Document, ReMindRAG
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    ds = load_dataset(name, data)
    ns = f"ab-{name}"
    questions = [q["question"] for q in ds.questions]
    (work / "qs.json").write_text(json.dumps(questions))
    store = PostgresGraphStore(dsn, namespace=ns)
    if store.counts()["chunks"] == 0:
        eng = ReMindRAG(embeddings=make_embedder("minilm"), store=store)
        docs = [Document(pid, f"{r['title']}. {r['text']}") for pid, r in ds.corpus.items()]
        eng.insert(docs)
    store.close()
    return ns, len(questions)


def pcts(xs: list[float]) -> dict[str, float]:
    return {
        "p50": round(float(np.percentile(xs, 50)), 2),
        "p95": round(float(np.percentile(xs, 95)), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", nargs="+", default=[], help="label=checkout directory")
    ap.add_argument("--edges", type=int, default=0)
    ap.add_argument("--set", default="")
    ap.add_argument("--data", default=str(ROOT.parent.parent / "shared" / "datasets"))
    ap.add_argument("--blocks", type=int, default=4, help="rounds of every query (first: warm)")
    ap.add_argument("--qps-seconds", type=float, default=5.0)
    ap.add_argument("--dsn", default=None, help="PostgreSQL DSN (default: embedded server)")
    ap.add_argument("--tag", default="")
    ap.add_argument(
        "--per-statement", action="store_true", help="one more round: statements by caller"
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ns", default="", help=argparse.SUPPRESS)
    ap.add_argument("--queries", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if bool(args.edges) == bool(args.set) or len(args.code) < 2:
        ap.error("give --edges or --set, and two or more --code label=dir")
    sys.path.insert(0, str(ROOT))
    from store_latency import pg_dsn

    dsn = pg_dsn(args.dsn)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"pg-query-ab-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {"load_avg_before": load_avg()}
    t = time.perf_counter()
    if args.edges:
        ns, n = prepare_synthetic(dsn, args.edges, work)
        qfile = work / "qs.npy"
    else:
        ns, n = prepare_set(dsn, args.set, args.data, work)
        qfile = work / "qs.json"
    row["prepare_s"] = round(time.perf_counter() - t, 1)
    codes = dict(c.split("=", 1) for c in args.code)
    kids = {}
    for label, src in codes.items():
        env = {**os.environ, "PYTHONPATH": str(Path(src).resolve()), "HF_HUB_OFFLINE": "1"}
        cmd = [sys.executable, __file__, "--child", "--dsn", dsn, "--ns", ns, "--queries"]
        cmd += [str(qfile), "--edges", str(args.edges)]
        kids[label] = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=src
        )
        assert json.loads(kids[label].stdout.readline())["ready"]  # type: ignore[union-attr]

    def ask(label: str, cmd: dict) -> dict:
        kid = kids[label]
        kid.stdin.write(json.dumps(cmd) + "\n")  # type: ignore[union-attr]
        kid.stdin.flush()  # type: ignore[union-attr]
        return json.loads(kid.stdout.readline())  # type: ignore[no-any-return, union-attr]

    row["load_avg_before_queries"] = load_avg()
    runs: dict[str, list[dict]] = {label: [] for label in codes}
    for b in range(args.blocks):
        for label in codes if b % 2 == 0 else reversed(list(codes)):
            got = ask(label, {"block": list(range(n))})["results"]
            if b:
                runs[label] += got
    row["load_avg_after_queries"] = load_avg()
    if args.per_statement:  # one more round, each statement timed and traced to its caller
        row["per_statement"] = {}
        for label in codes:
            got = ask(label, {"block": list(range(n)), "per_statement": True})["per_statement"]
            row["per_statement"][label] = {
                k: {"per_query": round(c / n, 2), "ms": round(ms / n, 2), "rows": round(r / n)}
                for k, (c, ms, r) in sorted(got.items(), key=lambda kv: -kv[1][1])
            }
        row["load_avg_after_per_statement"] = load_avg()
    if args.qps_seconds > 0:
        qps: dict[str, list[float]] = {label: [] for label in codes}
        for rnd in range(2):
            for label in codes if rnd == 0 else reversed(list(codes)):
                qps[label].append(ask(label, {"qps": args.qps_seconds, "n": n})["qps"])
        row["qps_1_client"] = {k: round(float(np.mean(v)), 1) for k, v in qps.items()}
        row["load_avg_after_qps"] = load_avg()
    for kid in kids.values():
        kid.stdin.close()  # type: ignore[union-attr]
        kid.wait()
    first = next(iter(codes))
    ref = {r["i"]: r["chunks"] for r in runs[first]}
    for label, rs in runs.items():
        row[label] = {
            "code": codes[label],
            "whole_ms": pcts([r["ms"] for r in rs]),
            "stage_p50_ms": {k: pcts([r["stages"][k] for r in rs])["p50"] for k in STAGES},
            "statements_per_query": round(float(np.mean([r["statements"] for r in rs])), 1),
            "rows_per_query": round(float(np.mean([r["rows"] for r in rs])), 1),
            "same_chunks_as_" + first: round(
                float(np.mean([r["chunks"] == ref[r["i"]] for r in rs])), 3
            ),
        }
    row["queries"], row["timed_rounds"] = n, args.blocks - 1
    what = str(args.edges) if args.edges else args.set
    OUT.mkdir(parents=True, exist_ok=True)
    meta = {"cpus": os.cpu_count(), "args": {k: v for k, v in vars(args).items() if k != "dsn"}}
    (OUT / f"pg_query_ab_{what}{args.tag}.json").write_text(
        json.dumps({**meta, "row": row}, indent=2)
    )
    print(
        f"| {what} | code | p50 / p95 ms | prior p50 | navigate p50 | statements | rows | q/s | same |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label in codes:
        r = row[label]
        print(
            f"| {what} | {label} | {r['whole_ms']['p50']} / {r['whole_ms']['p95']} | "
            f"{r['stage_p50_ms']['prior']} | {r['stage_p50_ms']['navigate']} | "
            f"{r['statements_per_query']} | {r['rows_per_query']} | "
            f"{row.get('qps_1_client', {}).get(label, '-')} | {r['same_chunks_as_' + first]} |"
        )
    print("load average:", row["load_avg_before_queries"], "->", row.get("load_avg_after_qps"))
    for label, per in row.get("per_statement", {}).items():
        print(f"\n{label}: statements per query by caller (count, ms, rows per query)")
        for caller, x in per.items():
            print(f"  {caller:60s} {x['per_query']:6.2f} {x['ms']:8.2f} {x['rows']:7d}")


if __name__ == "__main__":
    main()
