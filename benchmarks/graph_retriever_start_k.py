"""langchain-graph-retriever's ``start_k`` on the dev sets (issue 36): the ``lc_graph`` peer's
recall@5 with ``start_k`` 1..5, on the chunks and embedder ``bench run`` gives it, without
building ReMindRAG's graph (the peer needs only the chunks).

    PYTHONPATH=. python benchmarks/graph_retriever_start_k.py --data ../shared/datasets \\
        --out benchmarks/results/peers_graph_start_k.json

Prints recall@5 / recall@10 per setting and value, the mean over the settings, and how many
passages the traversal returned (it stops early when the passages it reached name nothing
new); the value with the best mean recall@5 is the peer's default
(:data:`benchmarks.harness.peers.GRAPH_START_K`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from remindrag_integrations.core.config import IndexConfig
from remindrag_integrations.core.indexing import make_chunks
from remindrag_integrations.core.types import Chunk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness import metrics as M  # noqa: E402
from benchmarks.harness.data import Dataset, load_dataset  # noqa: E402
from benchmarks.harness.peers import LangChainGraph  # noqa: E402
from benchmarks.harness.resources import make_embedder  # noqa: E402

SETTINGS = (
    "hotpotqa_train100:pooled",
    "hotpotqa_train100:per-question",
    "musique_train100:pooled",
    "2wiki_dev64:pooled",
)


def chunks_of(ds: Dataset, pids: list[str] | None) -> list[Chunk]:
    """The chunks ``bench run`` gives its baselines (``runner.build_kb``)."""
    cfg = IndexConfig()
    return [c for d in ds.documents(pids) for c in make_chunks(d, cfg)]


def sweep(ds: Dataset, setting: str, embedder: Any, values: list[int]) -> dict[str, Any]:
    if setting == "pooled":
        peer = LangChainGraph(chunks_of(ds, None), embedder)
        peers = {q["qid"]: peer for q in ds.questions}
    else:
        peers = {
            q["qid"]: LangChainGraph(chunks_of(ds, q["context_pids"]), embedder)
            for q in ds.questions
        }
    out: dict[str, Any] = {}
    for start_k in values:
        r5, r10, n, ms = [], [], [], []
        for q in ds.questions:
            peer = peers[q["qid"]]
            peer.start_k = start_k
            embedder.embed([q["question"]])  # as the bench does, before the timed call
            t0 = time.perf_counter()
            got = peer.retrieve(q["question"], None, 10)
            ms.append((time.perf_counter() - t0) * 1e3)
            gold = {p: ds.corpus[p]["text"] for p in q["gold_pids"]}
            ranked = [M.gold_matches(c.text, gold, q.get("gold_sentences", ())) for c in got]
            r5.append(M.recall_at_k(ranked, q["gold_pids"], 5))
            r10.append(M.recall_at_k(ranked, q["gold_pids"], 10))
            n.append(len(got))
        out[str(start_k)] = {
            "recall@5": M.mean(r5),
            "recall@5_ci": M.bootstrap_ci(r5),
            "recall@10": M.mean(r10),
            "returned": M.mean(n),
            "ms_p50": M.percentile(ms, 50),
            "ms_p95": M.percentile(ms, 95),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/datasets")
    ap.add_argument("--settings", default=",".join(SETTINGS), help="SET:SETTING,...")
    ap.add_argument("--values", default="1,2,3,4,5")
    ap.add_argument("--embed-cache", default=".bench-cache")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    values = [int(v) for v in args.values.split(",")]
    embedder = make_embedder("minilm", args.embed_cache or None)
    res: dict[str, Any] = {"values": values, "settings": {}, "load_before": os.getloadavg()}
    for spec in args.settings.split(","):
        name, setting = spec.split(":")
        res["settings"][spec] = sweep(load_dataset(name, args.data), setting, embedder, values)
        embedder.persist()
        row = res["settings"][spec]
        cells = "  ".join(
            f"{v}: {row[str(v)]['recall@5']:.3f} ({row[str(v)]['returned']:.1f} back)"
            for v in values
        )
        print(f"{spec}: recall@5 by start_k  {cells}", flush=True)
    means = {
        str(v): M.mean([s[str(v)]["recall@5"] for s in res["settings"].values()]) for v in values
    }
    res["mean_recall@5"] = means
    res["best"] = int(max(means, key=lambda v: (means[v], -int(v))))
    res["load_after"] = os.getloadavg()
    res["command"] = "python benchmarks/graph_retriever_start_k.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v is not None
    )
    print("mean:", "  ".join(f"{v}: {m:.3f}" for v, m in means.items()), "best:", res["best"])
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
