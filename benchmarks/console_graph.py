"""The console's graph page at scale (issue 47): how long the neighbourhood endpoint takes on
a folder store of about ``--edges`` edges, and how long the pages take to load.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/console_graph.py [--edges 100000] \
        [--requests 300] [--remembered 2000] [--out FILE]

The store: the corpus-shaped synthetic graph of ``store_latency.py`` (384-d) written into a
folder store (``SQLiteGraphStore``), ``--remembered`` random edges given memory. The console
(``build_app`` over ``ReMindRAG(store=DIR, embeddings=HashEmbedder(384))``) is called in
process through Starlette's TestClient (the ASGI app and the JSON, no socket):
``GET /api/graph/node/{id}`` for ``--requests`` random entity / chunk / anchor nodes (p50 /
p95 / max ms, the degree and edges returned), ``/api/graph/search`` (entity) and
``/api/overview``. Then, where Playwright and a system Chromium are found, the console on a socket and
the browser: each page from navigation to its data drawn
(ms; the graph page with one neighbourhood opened and laid out by cytoscape.js), served by
uvicorn in this process (the store's test embedder has no CLI name).

Load average (``uptime``) before and after. Prints a table; writes a JSON summary (default
``benchmarks/results/console_graph.json``)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
DIM = 384


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def pcts(xs: list[float]) -> dict[str, float]:
    return {
        "p50": round(float(np.percentile(xs, 50)), 2),
        "p95": round(float(np.percentile(xs, 95)), 2),
        "max": round(float(np.max(xs)), 2),
    }


def build(root: Path, edges: int, remembered: int) -> dict[str, Any]:
    from store_latency import synthetic_batches

    from remindrag_integrations.core.memory import math as mem
    from remindrag_integrations.stores import SQLiteGraphStore

    t = time.perf_counter()
    store = SQLiteGraphStore.open(root, create=True)
    for batch in synthetic_batches(edges, DIM, batch_chunks=5000):
        store.add_graph(**batch)
    _, all_edges = store.whole_graph()
    rng = np.random.default_rng(1)
    picked = [all_edges[i].id for i in rng.choice(len(all_edges), remembered, replace=False)]
    rows = 0.5 * mem.unit_rows(rng.normal(size=(remembered, DIM)).astype(np.float32))
    store.update_memory(picked, lambda _cur: rows)
    counts = store.counts()
    store.close()
    return {"build_s": round(time.perf_counter() - t, 1), "counts": counts}


def api_latency(root: Path, requests: int) -> dict[str, Any]:
    from starlette.testclient import TestClient

    from remindrag_integrations import ReMindRAG
    from remindrag_integrations.app.console.server import build_app
    from remindrag_integrations.testing import HashEmbedder

    engine = ReMindRAG(store=root, embeddings=HashEmbedder(DIM))
    client = TestClient(build_app(engine))
    nodes, _ = engine.store.whole_graph()
    rng = np.random.default_rng(2)
    out: dict[str, Any] = {}
    for kind in ("entity", "chunk", "anchor"):
        ids = [n.id for n in nodes if n.kind == kind]
        sample = [ids[i] for i in rng.choice(len(ids), requests, replace=False)]
        client.get(f"/api/graph/node/{sample[0]}")  # warm
        ms, degree, shown = [], [], []
        for nid in sample:
            t = time.perf_counter()
            r = client.get(f"/api/graph/node/{nid}")
            ms.append((time.perf_counter() - t) * 1e3)
            body = r.json()
            degree.append(body["degree"])
            shown.append(len(body["edges"]))
        out[f"neighbourhood_{kind}"] = {
            **pcts(ms),
            "degree_p50": float(np.median(degree)),
            "degree_max": int(max(degree)),
            "edges_returned_max": int(max(shown)),
        }
    ms = []
    for j in range(50):
        t = time.perf_counter()
        client.get("/api/graph/search", params={"q": f"entity {j * 7}", "kind": "entity"})
        ms.append((time.perf_counter() - t) * 1e3)
    out["search_entity"] = pcts(ms)
    ms = []
    for _ in range(10):
        t = time.perf_counter()
        client.get("/api/overview")
        ms.append((time.perf_counter() - t) * 1e3)
    out["overview"] = pcts(ms)
    engine.close()
    return out


def page_loads(root: Path) -> dict[str, Any]:
    """Each page from navigation to its data drawn, in headless Chromium."""
    chromium = os.environ.get("REMINDRAG_CHROMIUM") or shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"skipped": "playwright is not installed"}
    if not chromium:
        return {"skipped": "no chromium found"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    import threading

    import uvicorn

    from remindrag_integrations import ReMindRAG
    from remindrag_integrations.app.console.server import build_app
    from remindrag_integrations.testing import HashEmbedder

    engine = ReMindRAG(store=root, embeddings=HashEmbedder(DIM))
    server = uvicorn.Server(
        uvicorn.Config(build_app(engine), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)  # the served app, no CLI:
    thread.start()  # the CLI cannot name the test embedder this store was built with
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {}
    try:
        while not server.started:
            time.sleep(0.05)
        waits = {
            "/": "#counts .card",
            "/queries": "#traces",
            "/correct": "#actions tr",
            "/documents": "#docs tr",
            "/graph?node=e-00000000": "#gside h3",
        }
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page()
            for path, selector in waits.items():
                ms = []
                for _ in range(5):
                    t = time.perf_counter()
                    page.goto(base + path)
                    page.wait_for_selector(selector)
                    ms.append((time.perf_counter() - t) * 1e3)
                out[path] = pcts(ms)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        engine.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--remembered", type=int, default=2000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/console_graph.json"))
    args = ap.parse_args()
    summary: dict[str, Any] = {"edges_asked": args.edges, "load_avg_before": load_avg()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        summary["store"] = build(root, args.edges, args.remembered)
        summary["api_ms"] = api_latency(root, args.requests)
        summary["page_load_ms"] = page_loads(root)
    summary["load_avg_after"] = load_avg()
    summary["commit"] = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    print(f"store: {summary['store']['counts']} (built in {summary['store']['build_s']} s)")
    print(f"{'request':34} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  notes")
    for name, v in summary["api_ms"].items():
        note = (
            f"degree p50 {v['degree_p50']:.0f}, max {v['degree_max']}; "
            f"<= {v['edges_returned_max']} edges returned"
            if "degree_max" in v
            else ""
        )
        print(f"{name:34} {v['p50']:8.2f} {v['p95']:8.2f} {v['max']:8.2f}  {note}")
    for name, v in summary["page_load_ms"].items():
        if isinstance(v, dict):
            print(f"{'page ' + name:34} {v['p50']:8.1f} {v['p95']:8.1f} {v['max']:8.1f}")
        else:
            print(f"{name}: {v}")
    print(f"load average before {summary['load_avg_before']}, after {summary['load_avg_after']}")
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
