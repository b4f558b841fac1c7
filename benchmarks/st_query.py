"""The whole zero-token query with a sentence-transformers embedder on CPU against the ONNX
default (issue 35): where the time goes, and what running a small batch on one torch thread
(``adapters/embeddings.py::SMALL_BATCH_TOKENS``) changes.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/st_query.py \\
        --data ../shared/datasets/hotpotqa_train100 --passages 200 --questions 40 --rounds 3 \\
        --out benchmarks/results/st_query.json

Three engines index the same pooled passages: the packaged MiniLM on ONNX (the default), on
sentence-transformers (``SentenceTransformerEmbedder``, CPU) and on sentence-transformers
with every batch on torch's threads (``st-all-threads``: the adapter before this change).
Then each question is asked of each engine in turn (rounds alternate the engines question by
question): the milliseconds of the whole ``retrieve`` and of its one embedder call (the
question and its names), medians per round, and each arm's ratio to ONNX.
``--torch-threads`` sets torch's thread count first (default: torch's own, the cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


class Timed:
    """An embedder that adds the seconds of each call to ``spent``."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.spent = inner, 0.0
        self.identity = getattr(inner, "identity", None)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        t = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.spent += time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/datasets/hotpotqa_train100")
    ap.add_argument("--passages", type=int, default=200)
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--torch-threads", type=int)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/st_query.json"))
    args = ap.parse_args()

    import torch

    from remindrag_integrations import ReMindRAG
    from remindrag_integrations.adapters import embeddings
    from remindrag_integrations.adapters.embeddings import SentenceTransformerEmbedder

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    lines = Path(f"{args.data}.corpus.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [(f"p{i}", json.loads(r)["text"]) for i, r in enumerate(lines[: args.passages])]
    lines = Path(f"{args.data}.questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(r)["question"] for r in lines[: args.questions]]
    small = embeddings.SMALL_BATCH_TOKENS
    arms: dict[str, tuple[Timed, int]] = {
        "onnx": (Timed(embeddings.default_embedder()), small),
        "st": (Timed(SentenceTransformerEmbedder()), small),
        "st-all-threads": (Timed(SentenceTransformerEmbedder()), 0),
    }
    engines = {}
    for name, (emb, rule) in arms.items():
        embeddings.SMALL_BATCH_TOKENS = rule
        engines[name] = ReMindRAG(embeddings=emb)
        engines[name].insert(docs)
        engines[name].retrieve("a warm-up question about Paris")
    embeddings.SMALL_BATCH_TOKENS = small
    load = [os.getloadavg()[0]]
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        whole: dict[str, list[float]] = {a: [] for a in arms}
        embed: dict[str, list[float]] = {a: [] for a in arms}
        for q in questions:
            for name, (emb, rule) in arms.items():
                embeddings.SMALL_BATCH_TOKENS = rule
                before = emb.spent
                t = time.perf_counter()
                engines[name].retrieve(q)
                whole[name].append((time.perf_counter() - t) * 1000)
                embed[name].append((emb.spent - before) * 1000)
        embeddings.SMALL_BATCH_TOKENS = small
        load.append(os.getloadavg()[0])
        rounds.append(
            {
                "round": r + 1,
                **{f"{a}/query_ms": statistics.median(whole[a]) for a in arms},
                **{f"{a}/embed_ms": statistics.median(embed[a]) for a in arms},
                "load": load[-2:],
            }
        )
    print(
        f"torch threads {torch.get_num_threads()}, {len(docs)} passages, "
        f"{len(questions)} questions, medians per round (ms)"
    )
    head = ["round", *[f"{a} query" for a in arms], *[f"{a} embed" for a in arms], "load"]
    print("  ".join(head))
    for x in rounds:
        cells = [str(x["round"])] + [f"{x[f'{a}/query_ms']:.1f}" for a in arms]
        cells += [f"{x[f'{a}/embed_ms']:.1f}" for a in arms]
        print("  ".join(cells + [f"{x['load'][0]:.1f}-{x['load'][1]:.1f}"]))
    summary = {
        f"{a}/{m}": statistics.median(x[f"{a}/{m}"] for x in rounds)
        for a in arms
        for m in ("query_ms", "embed_ms")
    }
    for a in ("st", "st-all-threads"):
        summary[f"{a}/query_vs_onnx"] = summary[f"{a}/query_ms"] / summary["onnx/query_ms"]
        print(f"{a}: whole query {summary[f'{a}/query_vs_onnx']:.2f}x ONNX (medians)")
    result = {
        "torch_threads": torch.get_num_threads(),
        "nproc": os.cpu_count(),
        "passages": len(docs),
        "questions": len(questions),
        "rounds": rounds,
        "summary": summary,
        "load": load,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
