"""Which ANN library for the embedded store's seed search (issue 16): usearch, faiss, hnswlib
side by side on the vectors of the 1 M-edge scale point (≈ 200 K entity + anchor rows,
384-dimensional random unit vectors, queries near a random row as in ``bench scale``).

For each library and setting: build seconds, bytes the index adds to the process (RSS delta),
top-2 query latency p50 / p95 (one query at a time, as a retrieval does) and recall of the
exact float32 top-2. Prints a table and writes JSON.

``--source real`` takes real MiniLM vectors instead (an ``.npz`` of ``vecs``, e.g. the bench's
embedding cache of passages, entity names and questions): ``--queries`` random rows are held out
as queries and the rest are indexed, so the structure of real embeddings is measured at the
same row count as random ones.

    PYTHONPATH=. python benchmarks/ann_choice.py --rows 200000 \
        --out benchmarks/results/ann_choice.json
    PYTHONPATH=. python benchmarks/ann_choice.py --source real --rows 27000 \
        --real-npz ~/.cache/remindrag-bench/minilm-onnx-int8.npz --out benchmarks/results/ann_real.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.metrics import percentile  # noqa: E402

K = 2


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _real(path: str, rows: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    with np.load(os.path.expanduser(path), allow_pickle=False) as z:
        vecs = np.asarray(z["vecs"], dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    order = np.random.default_rng(0).permutation(len(vecs))
    return vecs[order[queries : queries + rows]], vecs[order[:queries]]


def _data(rows: int, queries: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((rows, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    noise = rng.standard_normal((queries, dim)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    qs = vecs[rng.integers(rows, size=queries)] + 0.3 * noise
    return vecs, qs / np.linalg.norm(qs, axis=1, keepdims=True)


Searcher = Callable[[np.ndarray, int], np.ndarray]  # (query, ef) -> row ids of its top K


def _usearch(vecs: np.ndarray, dtype: str) -> Searcher:
    from usearch.index import Index

    index = Index(ndim=vecs.shape[1], metric="ip", dtype=dtype)
    index.add(np.arange(len(vecs)), vecs, threads=2)

    def search(q: np.ndarray, ef: int) -> np.ndarray:
        index.expansion_search = ef
        return np.asarray(index.search(q, K).keys)

    return search


def _faiss(vecs: np.ndarray, fp16: bool) -> Searcher:
    import faiss

    dim, ip = vecs.shape[1], faiss.METRIC_INNER_PRODUCT
    if fp16:
        index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_fp16, 16, ip)
        index.train(vecs[:1000])
    else:
        index = faiss.IndexHNSWFlat(dim, 16, ip)
    faiss.omp_set_num_threads(2)
    index.add(vecs)
    faiss.omp_set_num_threads(1)

    def search(q: np.ndarray, ef: int) -> np.ndarray:
        index.hnsw.efSearch = ef
        return index.search(q[None, :], K)[1][0]

    return search


def _hnswlib(vecs: np.ndarray) -> Searcher:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=vecs.shape[1])
    index.init_index(max_elements=len(vecs), ef_construction=128, M=16)
    index.add_items(vecs, np.arange(len(vecs)), num_threads=2)
    index.set_num_threads(1)

    def search(q: np.ndarray, ef: int) -> np.ndarray:
        index.set_ef(ef)
        return index.knn_query(q, K)[0][0]

    return search


def _exact(vecs: np.ndarray) -> Searcher:
    def search(q: np.ndarray, ef: int) -> np.ndarray:
        sims = vecs @ q
        top = np.argpartition(-sims, K - 1)[:K]
        return top[np.argsort(-sims[top])]

    return search


def _measure(
    name: str, make: Callable[[], Searcher], qs: np.ndarray, truth: list, efs: list[int]
) -> list[dict]:
    gc.collect()
    rss0, t0 = _rss_mb(), time.perf_counter()
    try:
        search = make()
    except ImportError as exc:
        return [{"index": name, "error": f"not installed: {exc}"}]
    build = time.perf_counter() - t0
    added = _rss_mb() - rss0
    rows = []
    for ef in efs:
        ms, hit = [], 0
        for q, want in zip(qs, truth):
            t = time.perf_counter()
            got = search(q, ef)
            ms.append((time.perf_counter() - t) * 1e3)
            hit += len(set(map(int, got)) & want)
        rows.append(
            {
                "index": name,
                "ef": ef,
                "build_s": build,
                "rss_added_mb": added,
                "query_ms_p50": percentile(ms, 50),
                "query_ms_p95": percentile(ms, 95),
                "recall_at_2": hit / (K * len(qs)),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--efs", default="64,256,512", help="search beam widths to try")
    ap.add_argument("--out", default="benchmarks/results/ann_choice.json")
    ap.add_argument("--source", choices=("random", "real"), default="random")
    ap.add_argument(
        "--real-npz",
        default="~/.cache/remindrag-bench/minilm-onnx-int8.npz",
        help="the bench's embedding cache of the default embedder (minilm.npz: the torch one)",
    )
    args = ap.parse_args()
    if args.source == "real":
        vecs, qs = _real(args.real_npz, args.rows, args.queries)
    else:
        vecs, qs = _data(args.rows, args.queries, args.dim)
    truth = [set(map(int, np.argsort(-(vecs @ q))[:K])) for q in qs]
    load = [os.getloadavg()]
    candidates: list[tuple[str, Callable[[], Searcher]]] = [
        ("exact float32 (numpy BLAS)", lambda: _exact(vecs)),
        ("usearch f16 M16", lambda: _usearch(vecs, "f16")),
        ("faiss HNSW16 fp16", lambda: _faiss(vecs, True)),
        ("hnswlib M16 f32", lambda: _hnswlib(vecs)),
    ]
    efs = [int(x) for x in args.efs.split(",")]
    rows = []
    for name, make in candidates:
        rows += _measure(name, make, qs, truth, efs[:1] if name.startswith("exact") else efs)
        gc.collect()
    load.append(os.getloadavg())
    print(f"\n{args.source}: {len(vecs):,} rows, {len(qs)} queries, top-{K}; load {load}")
    print("| index | ef | build s | RSS added MB | query ms p50 / p95 | recall@2 vs exact f32 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['index']} | {r['error']} | | | | |")
            continue
        print(
            f"| {r['index']} | {r['ef']} | {r['build_s']:.1f} | {r['rss_added_mb']:.0f} | "
            f"{r['query_ms_p50']:.3f} / {r['query_ms_p95']:.3f} | {r['recall_at_2']:.3f} |"
        )
    out: dict[str, Any] = {"source": args.source, "rows": len(vecs), "queries": len(qs)}
    out.update(k=K, loadavg_before_after=load, results=rows)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
