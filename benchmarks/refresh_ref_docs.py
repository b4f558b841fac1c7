"""LlamaIndex's ``refresh_ref_docs`` on the retriever (issue 45): what it costs beside
``add_documents`` of the same documents, what it embeds, and whether it answers as
LlamaIndex's own ``VectorStoreIndex`` does.

A corpus of ``--docs`` LlamaIndex ``Document`` s (ids given) is indexed twice (two retrievers,
the hash embedder: no model, zero-token mode). Each round edits ``--edited`` of them (a new
sentence) and adds ``--new``; one retriever takes the round by ``refresh_ref_docs``, the other
by ``add_documents``; wall time of each (median of the rounds, side by side, so the machine's
load touches both), texts embedded, and the flags ``refresh_ref_docs`` returned against those
of a ``VectorStoreIndex`` (``MockEmbedding``) given the same rounds. Afterwards: stale
passages (an old revision still stored) and duplicate documents, both expected 0.

    PYTHONPATH=. python benchmarks/refresh_ref_docs.py --out benchmarks/results/refresh_ref_docs.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding

from remindrag_integrations import ReMindRetriever
from remindrag_integrations.testing import HashEmbedder

WORDS = "Alice Bob Carol Paris Rome Berlin river bridge museum film director actor".split()


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.count = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.count += len(texts)
        return super().embed(texts)


def text(i: int, rev: int, rng: random.Random) -> str:
    body = " ".join(
        f"{rng.choice(WORDS)} met {rng.choice(WORDS)} in {rng.choice(WORDS)} on day {i}."
        for _ in range(5)
    )
    return f"{body} Revision r{rev}x{i} of record {i}."


def run(docs: int, edited: int, new: int, rounds: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    revs = {i: 0 for i in range(docs)}
    bodies = {i: text(i, 0, rng) for i in range(docs)}

    def corpus() -> list[Document]:
        return [Document(text=bodies[i], id_=f"d{i}") for i in sorted(revs)]

    emb_refresh, emb_add = CountingEmbedder(), CountingEmbedder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_refresh = ReMindRetriever.from_documents(corpus(), embeddings=emb_refresh)
        by_add = ReMindRetriever.from_documents(corpus(), embeddings=emb_add)
    theirs = VectorStoreIndex.from_documents(corpus(), embed_model=MockEmbedding(embed_dim=8))
    rows = []
    for r in range(1, rounds + 1):
        for i in rng.sample(sorted(revs), edited):
            revs[i] = r
            bodies[i] = text(i, r, rng)
        for _ in range(new):
            i = len(revs)
            revs[i] = r
            bodies[i] = text(i, r, rng)
        docs_r = corpus()
        emb_refresh.count = emb_add.count = 0
        t0 = time.perf_counter()
        flags = by_refresh.refresh_ref_docs(docs_r)
        t1 = time.perf_counter()
        report = by_add.add_documents(docs_r)
        t2 = time.perf_counter()
        li_flags = theirs.refresh_ref_docs(docs_r)
        t3 = time.perf_counter()
        again = by_refresh.refresh_ref_docs(docs_r)  # nothing changed since
        t4 = time.perf_counter()
        rows.append(
            {
                "round": r,
                "refresh_s": t1 - t0,
                "add_documents_s": t2 - t1,
                "llama_index_refresh_s": t3 - t2,
                "refresh_unchanged_s": t4 - t3,
                "flagged": sum(flags),
                "add_documents_indexed": report.documents,
                "same_flags_as_llama_index": flags == li_flags,
                "texts_embedded_refresh": emb_refresh.count,
                "texts_embedded_add": emb_add.count,
                "flagged_again": sum(again),
            }
        )
    stale = duplicates = 0
    for r in (by_refresh, by_add):
        info = r.ref_doc_info
        duplicates += len(info) - len(revs)
        for doc_id in info:
            i = int(doc_id[1:])
            stored = " ".join(c.text for c in r.engine.store.document_chunks(doc_id))
            stale += f"r{revs[i]}x{i} " not in stored + " "
    med = {
        k: statistics.median(row[k] for row in rows)
        for k in ("refresh_s", "add_documents_s", "llama_index_refresh_s", "refresh_unchanged_s")
    }
    return {
        "docs": docs,
        "edited": edited,
        "new": new,
        "rounds": rows,
        "median": med,
        "refresh_over_add": med["refresh_s"] / med["add_documents_s"],
        "stale_passages": stale,
        "duplicate_documents": duplicates,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--edited", type=int, default=20)
    ap.add_argument("--new", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/refresh_ref_docs.json")
    args = ap.parse_args()
    load = os.getloadavg()
    res = run(args.docs, args.edited, args.new, args.rounds)
    print(f"{args.docs} documents, {args.edited} edited + {args.new} new a round, load {load}")
    print("round  refresh_s  add_s  li_refresh_s  unchanged_s  flagged  same_as_li  embedded")
    for row in res["rounds"]:
        print(
            f"{row['round']:>5}  {row['refresh_s']:9.3f}  {row['add_documents_s']:5.3f}  "
            f"{row['llama_index_refresh_s']:12.3f}  {row['refresh_unchanged_s']:11.3f}  "
            f"{row['flagged']:>7}  {row['same_flags_as_llama_index']!s:>10}  "
            f"{row['texts_embedded_refresh']}/{row['texts_embedded_add']}"
        )
    print(
        f"median refresh / add_documents: {res['refresh_over_add']:.2f}; stale passages "
        f"{res['stale_passages']}, duplicate documents {res['duplicate_documents']}"
    )
    Path(args.out).write_text(
        json.dumps({**res, "args": vars(args), "load": load}, indent=1), encoding="utf-8"
    )


if __name__ == "__main__":
    main()
