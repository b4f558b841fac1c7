"""Which settings for the embedded store's HNSW index (issue 16): usearch through the store's
own ``stores.ann.AnnIndex``, vector type (float16 / int8) × links per node (16 / 32) × search
beam ``ef``, on the entity rows of the 1 M-edge scale graph (140 K), and the recall of the
exact top-2 once the index's candidates (``k × 8``, as the store asks) are re-scored from the
float16 table, as the store does. Vectors: ``--embeddings minilm`` (two Gaussians with real
MiniLM statistics, ``bench scale``'s generator; ``--corpus`` fits them) or ``random``.
Queries: a random row plus noise (cosine ≈ 0.96 to it), as ``bench scale`` makes them. Each
index is built once and searched at every ``ef``; one query at a time. Prints a table and
writes JSON.

    PYTHONPATH=. python benchmarks/ann_settings.py --rows 140000 --embeddings minilm \
        --corpus ../shared/datasets/hotpotqa_train100.corpus.jsonl \
        --out benchmarks/results/ann_settings.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from remindrag_integrations.stores.ann import AnnIndex

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.scale_vectors import minilm_moments, synthetic_embeddings  # noqa: E402

K, FETCH = 2, 16


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=140_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--embeddings", choices=("minilm", "random"), default="minilm")
    ap.add_argument("--corpus", default="../shared/datasets/hotpotqa_train100.corpus.jsonl")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "remindrag-bench"))
    ap.add_argument("--settings", default="f16:16,i8:16,f16:32,i8:32", help="dtype:links,...")
    ap.add_argument("--efs", default="256,512,1024")
    ap.add_argument("--out", default="benchmarks/results/ann_settings.json")
    args = ap.parse_args()
    moments = None
    if args.embeddings == "minilm":
        moments = str(minilm_moments(args.corpus, args.cache))
    n = args.rows
    vecs = synthetic_embeddings(n, 384, 0, moments, n)  # all entity-like rows
    table16 = vecs.astype(np.float16)
    rng = np.random.default_rng(1)
    noise = rng.standard_normal((args.queries, 384)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    qs = vecs[rng.integers(n, size=args.queries)] + 0.3 * noise
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    exact = [set(np.argsort(-(vecs @ q))[:K].tolist()) for q in qs]
    load = [round(x, 2) for x in os.getloadavg()]
    rows = []
    for setting in args.settings.split(","):
        dtype, links = setting.split(":")
        index = AnnIndex(384, 256, connectivity=int(links), dtype=dtype)
        t = time.perf_counter()
        for start in range(0, n, 16_384):
            stop = min(n, start + 16_384)
            index.add(np.arange(start, stop), vecs[start:stop])
        build = time.perf_counter() - t
        size_mb = len(index.to_bytes()) / 2**20
        for ef in (int(e) for e in args.efs.split(",")):
            index._index.expansion_search = ef
            found, ms = 0, []
            for q, want in zip(qs, exact):
                t = time.perf_counter()
                cand = index.search(q[None, :], FETCH)[0]
                top = cand[np.argsort(-(table16[cand].astype(np.float32) @ q))[:K]]
                ms.append((time.perf_counter() - t) * 1e3)
                found += len(want & set(top.tolist()))
            rows.append(
                {
                    "dtype": dtype,
                    "links": int(links),
                    "ef": ef,
                    "build_s": build,
                    "index_mb": size_mb,
                    "recall_at_2": found / (K * len(qs)),
                    "ms_p50": float(np.median(ms)),
                    "ms_p95": float(np.percentile(ms, 95)),
                }
            )
            r = rows[-1]
            print(
                f"{dtype:>4} links {links:>2} ef {ef:>5}: build {build:6.1f} s, index "
                f"{size_mb:6.1f} MB, recall@2 {r['recall_at_2']:.3f}, "
                f"{r['ms_p50']:.2f} / {r['ms_p95']:.2f} ms",
                flush=True,
            )
    load_after = [round(x, 2) for x in os.getloadavg()]
    print(f"\n{args.embeddings}: {n:,} rows, {len(qs)} queries; load {load} -> {load_after}")
    print("| index | links | ef | build s | index MB | recall@2 (re-scored) | ms p50 / p95 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['dtype']} | {r['links']} | {r['ef']} | {r['build_s']:.1f} | "
            f"{r['index_mb']:.0f} | {r['recall_at_2']:.3f} | {r['ms_p50']:.2f} / {r['ms_p95']:.2f} |"
        )
    out = {"embeddings": args.embeddings, "rows": n, "queries": len(qs), "load": [load, load_after]}
    Path(args.out).write_text(json.dumps({**out, "results": rows}, indent=1), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
