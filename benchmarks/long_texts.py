"""What reading long chunks whole costs at indexing: the packaged MiniLM reads 256 word
pieces, so a longer chunk is embedded either as the mean of its windows (``long_texts``
"windows", the default) or by its first window ("truncate", sentence-transformers' way).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/long_texts.py --data ../shared/datasets \\
        --sets loogle_longdep_dev,loogle_shortdep_dev,hotpotqa_train100 --rounds 3 \\
        --out benchmarks/results/long_texts.json

Per corpus: the chunks the library makes (zero-token, default index settings), how many are
past the window and the word pieces each way; then a zero-token ``insert`` of the whole
corpus into a fresh engine per mode, rounds alternating, each mode on its own warm embedder:
median wall and CPU seconds. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from indexing import table  # benchmarks/indexing.py, next to this script

from remindrag_integrations import ReMindRAG
from remindrag_integrations.adapters.embeddings import default_embedder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import load_dataset  # noqa: E402

MODES = ("truncate", "windows")


def corpus(data: Path, name: str) -> list[tuple[str, str]]:
    """The set's passages as (id, text): the raw corpus rows, no title line added."""
    return [(pid, row["text"]) for pid, row in load_dataset(name, data).corpus.items()]


def pieces(embedder: Any, texts: list[str]) -> tuple[int, int, int]:
    """(texts past the window, word pieces read truncated, word pieces read in windows)."""
    _, tok = embedder._load()
    enc = tok.encode_batch(texts)
    past = sum(1 for e in enc if e.overflowing)
    first = sum(len(e.ids) for e in enc)
    return past, first, first + sum(len(w.ids) for e in enc for w in e.overflowing)


def insert_once(embedder: Any, docs: list[tuple[str, str]]) -> tuple[float, float, int]:
    rag = ReMindRAG(embeddings=embedder)
    wall, cpu = time.perf_counter(), time.process_time()
    report = rag.insert(docs)
    return time.perf_counter() - wall, time.process_time() - cpu, report.chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/datasets"))
    ap.add_argument("--sets", default="loogle_longdep_dev,loogle_shortdep_dev,hotpotqa_train100")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    embedders = {m: default_embedder(m) for m in MODES}
    for e in embedders.values():
        e.embed(["warm up"])
    out: dict[str, Any] = {"load": [os.getloadavg()], "sets": {}}
    rows = []
    for name in args.sets.split(","):
        docs = corpus(args.data, name)
        probe = ReMindRAG(embeddings=embedders["windows"])
        probe.insert(docs)
        texts = [c.text for doc_id, _ in docs for c in probe.store.document_chunks(doc_id)]
        past, cut_pieces, win_pieces = pieces(embedders["windows"], texts)
        times: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
        for _ in range(args.rounds):
            for m in MODES:
                wall, cpu, _n = insert_once(embedders[m], docs)
                times[m].append((wall, cpu))
        med = {
            m: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
            for m, t in times.items()
        }
        out["sets"][name] = {
            "chunks": len(texts),
            "past_window": past,
            "pieces_truncate": cut_pieces,
            "pieces_windows": win_pieces,
            "seconds": times,
        }
        rows.append(
            [
                name,
                len(texts),
                past,
                f"{cut_pieces:,} / {win_pieces:,}",
                f"{med['truncate'][0]:.1f} / {med['windows'][0]:.1f}",
                f"{med['truncate'][1]:.1f} / {med['windows'][1]:.1f}",
                round(med["windows"][1] / med["truncate"][1], 2),
            ]
        )
    out["load"].append(os.getloadavg())
    table(
        f"Zero-token insert, truncate vs windows (median of {args.rounds} rounds each)",
        [
            "corpus",
            "chunks",
            "past 256 pieces",
            "pieces read (truncate / windows)",
            "wall s",
            "CPU s",
            "CPU windows / truncate",
        ],
        rows,
    )
    print(f"load average {out['load'][0][0]:.1f} -> {out['load'][1][0]:.1f}")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
