"""What the peers of ``bench run`` stand on (issue 36), per pooled dev set: how many passages
name another passage's title (``lc_graph``'s edges), how many questions have a gold passage
naming another gold passage's title (the hop those edges can make), and the recall@5 of each
hybrid's BM25 half alone (LlamaIndex's ``BM25Retriever``: bm25s, stop words, stemmer;
LangChain's ``BM25Retriever``: rank-bm25 on white-space tokens).

    PYTHONPATH=. python benchmarks/peers_anatomy.py --data ../shared/datasets \\
        --out benchmarks/results/peers_anatomy.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from remindrag_integrations.core.config import IndexConfig
from remindrag_integrations.core.indexing import make_chunks
from remindrag_integrations.core.types import Chunk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness import metrics as M  # noqa: E402
from benchmarks.harness.data import Dataset, load_dataset  # noqa: E402
from benchmarks.harness.peers import ID_KEY, mentions  # noqa: E402


def recall5(ds: Dataset, retrieve: Callable[[str], list[Chunk]]) -> float:
    out = []
    for q in ds.questions:
        gold = {p: ds.corpus[p]["text"] for p in q["gold_pids"]}
        got = retrieve(q["question"])
        ranked = [M.gold_matches(c.text, gold, q.get("gold_sentences", ())) for c in got]
        out.append(M.recall_at_k(ranked, q["gold_pids"], 5))
    return M.mean(out)


def anatomy(ds: Dataset) -> dict[str, Any]:
    from langchain_community.retrievers import BM25Retriever as LangChainBM25
    from langchain_core.documents import Document
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever as LlamaIndexBM25

    chunks = [c for d in ds.documents() for c in make_chunks(d, IndexConfig())]
    named = mentions(chunks)
    by_doc: dict[str, set[str]] = {}
    for c, m in zip(chunks, named):
        by_doc.setdefault(c.doc_id, set()).update(m)
    linked = 0
    for q in ds.questions:
        titles = {p: ds.corpus[p]["title"] for p in q["gold_pids"]}
        linked += any(titles[b] in by_doc.get(a, ()) for a in titles for b in titles if a != b)
    by_id = {c.id: c for c in chunks}
    lc = LangChainBM25.from_documents(
        [Document(page_content=c.text, metadata={ID_KEY: c.id}) for c in chunks], k=5
    )
    li = LlamaIndexBM25.from_defaults(
        nodes=[TextNode(id_=c.id, text=c.text) for c in chunks], similarity_top_k=5
    )
    return {
        "passages": len(chunks),
        "passages_naming_a_title": sum(1 for m in named if m) / len(named),
        "questions": len(ds.questions),
        "questions_gold_names_gold_title": linked,
        "langchain_bm25_recall@5": recall5(
            ds, lambda q: [by_id[d.metadata[ID_KEY]] for d in lc.invoke(q)]
        ),
        "llama_index_bm25_recall@5": recall5(
            ds, lambda q: [by_id[n.node.node_id] for n in li.retrieve(q)]
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/datasets")
    ap.add_argument("--sets", default="hotpotqa_train100,musique_train100,2wiki_dev64")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    res: dict[str, Any] = {"load_before": os.getloadavg(), "sets": {}}
    for name in args.sets.split(","):
        res["sets"][name] = row = anatomy(load_dataset(name, args.data))
        print(name, json.dumps({k: round(v, 3) for k, v in row.items()}), flush=True)
    res["load_after"] = os.getloadavg()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
