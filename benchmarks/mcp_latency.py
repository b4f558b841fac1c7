"""``search`` latency through ``remindrag mcp`` over stdio, next to the same call in-process.

    python benchmarks/mcp_latency.py [--edges 100000] [--calls 60] [--warmup 5]

Two stores: the demo store (the 50 packaged HotpotQA passages of ``remindrag demo``, zero-token,
the packaged embedder) and a synthetic store of ``--edges`` edges (``bench.scale``'s generator:
the proportions of the pooled HotpotQA graph, i.i.d. random unit vectors, saved with the
packaged embedder's record so the server embeds questions with it). Per store, the same
questions (the five demo questions, or made-up questions over the synthetic vocabulary, round
robin) are asked ``--calls`` times after ``--warmup`` unmeasured calls, each call twice in
turn (so both see the same machine load):
- in-process: ``StoreService.search``, the function the ``search`` tool runs;
- stdio: the MCP SDK's client calling the ``search`` tool of a ``remindrag mcp`` subprocess
  (client-side wall time from request to result).
Then ``--writes`` searches are each followed by ``remember`` (in-process and over stdio), timed:
on a store directory a memory write loads the newest generation under the lock and saves.
Prints a table and writes ``benchmarks/results/mcp_latency.json`` with the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))


def demo_store(root: Path) -> tuple[Path, list[str]]:
    from remindrag_integrations import ReMindRAG
    from remindrag_integrations.app.demo import load_demo_data

    docs, questions = load_demo_data()
    engine = ReMindRAG()
    engine.insert(docs)
    engine.save(root)
    return root, [q["question"] for q in questions]


def synthetic_store(root: Path, edges: int) -> tuple[Path, list[str]]:
    from benchmarks.harness.scale import synthetic_graph
    from remindrag_integrations import ReMindRAG

    store = synthetic_graph(edges)
    ReMindRAG(store=store).save(root)  # records the packaged embedder (dimension 384)
    questions = [f"Which chunk links entity {i} and w{i * 7}?" for i in range(1, 11)]
    return root, questions


def percentiles(ms: list[float]) -> dict[str, float]:
    from benchmarks.harness.metrics import percentile

    return {
        "p50": round(percentile(ms, 50), 2),
        "p95": round(percentile(ms, 95), 2),
        "mean": round(sum(ms) / len(ms), 2),
    }


async def measure(
    store: Path, questions: list[str], calls: int, warmup: int, writes: int
) -> dict[str, list[float]]:
    """Milliseconds per call of ``search`` and ``remember``, in-process and over stdio: the two
    calls alternate, so both see the same machine load."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from remindrag_integrations.app.mcp_service import StoreService

    args = argparse.Namespace(
        store=str(store), namespace="default", llm="none", cache=None, no_cache=True
    )
    service = StoreService(args)
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "remindrag_integrations.app.cli", "mcp", "--store", str(store), "--no-cache"],
        env={**os.environ, "PYTHONPATH": str(ROOT.parent)},
    )
    ms: dict[str, list[float]] = {
        k: [] for k in ("search", "search_stdio", "remember", "remember_stdio")
    }
    async with stdio_client(server) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        for i in range(warmup + calls + writes):
            q = questions[i % len(questions)]
            t = time.perf_counter()
            mine = service.search(q)
            t1 = time.perf_counter()
            result = await s.call_tool("search", {"query": q})
            t2 = time.perf_counter()
            theirs = json.loads(result.content[0].text)
            assert not result.isError and theirs["passages"]
            if warmup <= i < warmup + calls:
                ms["search"].append((t1 - t) * 1000)
                ms["search_stdio"].append((t2 - t1) * 1000)
            elif i >= warmup + calls:  # a memory write: load, memorize, save under the lock
                t = time.perf_counter()
                assert service.remember(mine["trace_id"])["applied"]
                t1 = time.perf_counter()
                result = await s.call_tool("remember", {"trace_id": theirs["trace_id"]})
                t2 = time.perf_counter()
                assert json.loads(result.content[0].text)["applied"]
                ms["remember"].append((t1 - t) * 1000)
                ms["remember_stdio"].append((t2 - t1) * 1000)
    return ms


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edges", type=int, default=100_000)
    p.add_argument("--calls", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--writes", type=int, default=5, help="remember calls timed after them")
    p.add_argument("--out", default=str(ROOT / "results" / "mcp_latency.json"))
    a = p.parse_args()
    rows: list[dict[str, Any]] = []
    load_before = load()
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (
            ("demo (50 passages)", lambda d: demo_store(d)),
            (f"synthetic ({a.edges:,} edges)", lambda d: synthetic_store(d, a.edges)),
        ):
            store, questions = make(Path(tmp) / f"store{len(rows)}")
            from remindrag_integrations.stores import InMemoryGraphStore

            counts = InMemoryGraphStore.load(store).counts()
            ms = asyncio.run(measure(store, questions, a.calls, a.warmup, a.writes))
            rows.append(
                {
                    "store": name,
                    "edges": counts["edges"],
                    "chunks": counts["chunks"],
                    **{f"{k}_ms": percentiles(v) for k, v in ms.items()},
                    "load_after": load(),
                }
            )
    print(
        f"ms per call, p50 / p95: search {a.calls} calls after {a.warmup} warm-up, "
        f"remember {a.writes} calls; load before {load_before}"
    )
    cols = ("search", "search_stdio", "remember", "remember_stdio")
    print(f"{'store':<26} {'edges':>8} " + " ".join(f"{c:>17}" for c in cols))
    for r in rows:
        cells = [f"{r[c + '_ms']['p50']:.1f} / {r[c + '_ms']['p95']:.1f}" for c in cols]
        print(f"{r['store']:<26} {r['edges']:>8,} " + " ".join(f"{c:>17}" for c in cells))
    result = {
        "command": "python " + " ".join(sys.argv),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_before": load_before,
        },
        "calls": a.calls,
        "warmup": a.warmup,
        "rows": rows,
    }
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
