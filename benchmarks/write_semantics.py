"""Issue 48 (items 5, 6): the cost of the store writes decided once (``stores/writes.py``) and
of the single insert loop, before and after, side by side in one run.

    PYTHONPATH=. python benchmarks/write_semantics.py --before DIR [--after .] [--repeats 5]

``DIR`` is a checkout of the code before the change (``git archive BASE | tar -x -C DIR``).
Each repeat runs one child process per side (the order alternating), each on the same small
corpus: the 240 passages of ``tests/data/{hotpotqa,musique}_train100_sample.corpus.jsonl``,
a 384-dim test embedder (``HashEmbedder``), zero-token mode; per store (in memory; a folder,
SQLite):

- ``insert``: all passages, one ``insert`` call (wall s);
- ``memorize``: 24 rounds of ``retrieve(q, k=3)`` then ``memorize(trace, supporting=[top
  chunk])``, the memorize call timed (median ms);
- ``update``: 40 passages re-inserted with edited text (each replaces its old version, memory
  carried), one call (wall s);
- ``delete``: those 40 documents deleted, one call (wall s).

- ``update_memory_us``: the store's ``update_memory`` alone, 300 calls on 5 edges (median µs).

With ``--postgres`` also a PostgreSQL store (the tests' embedded server, a new namespace per
run).

Per side the minimum over the repeats (the run least disturbed by other jobs on a shared
machine) and the median; the load average before and after. Writes
``benchmarks/results/write_semantics.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
SETS = ("hotpotqa_train100_sample", "musique_train100_sample")


def _corpus() -> tuple[list[tuple[str, str]], list[str]]:
    docs, questions = [], []
    for name in SETS:
        for line in (DATA / f"{name}.corpus.jsonl").read_text().splitlines():
            row = json.loads(line)
            docs.append((row["pid"], f"{row['title']}. {row['text']}"))
        for line in (DATA / f"{name}.questions.jsonl").read_text().splitlines():
            questions.append(json.loads(line)["question"])
    return docs, questions


def child() -> dict:
    """One side's measurements (the code on ``PYTHONPATH``)."""
    from remindrag_integrations import Document, ReMindRAG
    from remindrag_integrations.testing import HashEmbedder

    docs, questions = _corpus()
    out: dict[str, dict[str, float]] = {}
    dsn = os.environ.get("WRITE_SEMANTICS_DSN")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("memory", "folder", *(["postgres"] if dsn else [])):
            store: Any = {"memory": None, "folder": Path(tmp) / "kb", "postgres": dsn}[kind]
            namespace = os.environ.get("WRITE_SEMANTICS_NS", "default")
            rag = ReMindRAG(embeddings=HashEmbedder(384), store=store, namespace=namespace)
            t = time.perf_counter()
            rag.insert([Document(i, text) for i, text in docs])
            insert = time.perf_counter() - t
            times = []
            for q in (questions * 2)[:24]:
                r = rag.retrieve(q, k=3)
                if not r.chunks:
                    continue
                t = time.perf_counter()
                rag.memorize(r.trace_id, supporting=[r.chunks[0].chunk.id])
                times.append(time.perf_counter() - t)
            graph = rag.store  # the store's memory write alone: 300 calls on 5 edges
            edges = [e.id for e in graph.whole_graph()[1][:5]]
            calls = []
            for _ in range(300):
                t = time.perf_counter()
                graph.update_memory(edges, lambda cur: cur * 0.5 + 0.01)
                calls.append(time.perf_counter() - t)
            edited = [Document(i, text + " Edited later.") for i, text in docs[:40]]
            t = time.perf_counter()
            rag.insert(edited)
            update = time.perf_counter() - t
            t = time.perf_counter()
            rag.delete([d.id for d in edited])
            delete = time.perf_counter() - t
            out[kind] = {
                "insert_s": insert,
                "memorize_ms": 1000 * statistics.median(times),
                "update_memory_us": 1e6 * statistics.median(calls),
                "memorized": len(times),
                "update_s": update,
                "delete_s": delete,
                "touched_edges": rag.store.touched_edges(),
                "documents": len(rag.document_ids()),
            }
            close = getattr(rag, "close", None)
            if callable(close):
                close()
    return out


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=False)
    ap.add_argument("--after", default=".")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/write_semantics.json")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--postgres", action="store_true", help="also an embedded PostgreSQL")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child()))
        return
    if not args.before:
        ap.error("--before DIR is required")
    sides = {"before": str(Path(args.before).resolve()), "after": str(Path(args.after).resolve())}
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    extra: dict[str, str] = {}
    if args.postgres:  # the tests' embedded server (PostgreSQL 18 + pgvector)
        sys.path.insert(0, str(DATA.parent))
        import pg_fixture

        extra["WRITE_SEMANTICS_DSN"] = pg_fixture.start_embedded_postgres()
    load_before = _load()
    for i in range(args.repeats):
        order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
        for side in order:
            env = {**os.environ, **extra, "PYTHONPATH": sides[side], "HF_HUB_OFFLINE": "1"}
            env["WRITE_SEMANTICS_NS"] = f"bench-{side}-{i}"  # a fresh tenant per run
            res = subprocess.run(
                [sys.executable, __file__, "--child"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                cwd=sides[side],
            )
            runs[side].append(json.loads(res.stdout.strip().splitlines()[-1]))
    summary: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for side, rows in runs.items():
        summary[side] = {
            kind: {
                m: {
                    "median": statistics.median(r[kind][m] for r in rows),
                    "min": min(r[kind][m] for r in rows),
                }
                for m in rows[0][kind]
            }
            for kind in rows[0]
        }
    head = f"{'store':7} {'measure':16} {'min before':>11} {'min after':>10} {'ratio':>6}"
    print(head + f" {'median before':>14} {'median after':>13} {'ratio':>6}")
    for kind in summary["before"]:
        for m, b in summary["before"][kind].items():
            a = summary["after"][kind][m]
            cols = []
            for stat in ("min", "median"):
                ratio = f"{a[stat] / b[stat]:.2f}" if b[stat] else "-"
                cols.append(f"{b[stat]:11.3f} {a[stat]:10.3f} {ratio:>6}")
            print(f"{kind:7} {m:16} {cols[0]} {cols[1].replace(' ', ' ', 1):>35}")
    result = {
        "command": "PYTHONPATH=. python benchmarks/write_semantics.py " + " ".join(sys.argv[1:]),
        "repeats": args.repeats,
        "load_before": load_before,
        "load_after": _load(),
        "summary": summary,
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print("load before", load_before, "after", result["load_after"])


if __name__ == "__main__":
    main()
