"""PostgreSQL and the embedded store: the same passages? (issue 49, third round).

    PYTHONPATH=. python benchmarks/pg_vs_embedded.py [--passages 3000] [--queries 60]
        [--keep DIR] [--dsn DSN] [--tag TAG]

The same corpus and questions as ``pg_real_text.py`` (the embedded store indexed with the
packaged MiniLM, or loaded from ``--keep``; the same graph copied into PostgreSQL, the
tests' embedded server unless ``--dsn``). Each question is asked of five engines:
``embedded``; ``postgres`` (the defaults: its lexical half BM25 over the graph cache's chunk
texts); ``postgres-ts-rank`` (the same store with its lexical search answered by full-text
``ts_rank``, as without the graph cache's texts, all else the same); and both stores with
``prior.lexical_weight = 0`` (no lexical half). Per engine: recall@5 over the questions'
gold passages (the first five chunks' documents); per pair: how often the whole ranked chunk
list is the same and the top five's overlap; and how PostgreSQL's lexical searches (its
default, and ``ts_rank``) agree with the embedded store's BM25 (top 5, top 50 = the prior's
candidates, best hit). Writes ``benchmarks/results/pg_vs_embedded_<passages><tag>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
OUT = ROOT / "benchmarks" / "results"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=3000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--keep", help="the embedded store kept in this folder between runs")
    ap.add_argument("--dsn", default="")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("REMINDRAG_PG_SERVER_OPTIONS", "-c shared_buffers=1GB")
    import pg_real_text as prt

    from benchmarks.harness.resources import make_embedder
    from remindrag_integrations import Document, ReMindRAG
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    docs = prt.corpus(args.passages)
    qs = prt.questions(args.queries, {d for d, _ in docs})
    emb = make_embedder("minilm", cache_dir=Path(tempfile.gettempdir()) / "rr-bench-embed")
    if args.keep and Path(args.keep).exists():
        embedded = ReMindRAG.load(args.keep, embeddings=emb).copy()
    else:
        embedded = ReMindRAG(embeddings=emb)
        embedded.insert([Document(d, text) for d, text in docs])
        if args.keep:
            embedded.save(args.keep)
    mem: Any = embedded.store  # the in-memory store: its BM25 lexical search
    if args.dsn:
        dsn = args.dsn
    else:
        sys.path.insert(0, str(ROOT / "tests"))
        from pg_fixture import pg_server_dsn  # started here, stopped at exit

        dsn = pg_server_dsn()
    pg = PostgresGraphStore(dsn, namespace=f"vs-embedded-{args.passages}")
    pg.drop_namespace()
    prt.copy_graph(mem, pg)
    postgres = ReMindRAG(embeddings=emb, store=pg)

    own = PostgresGraphStore.lexical_search
    # the same rows without the graph cache: its lexical search is full-text ts_rank
    sql = PostgresGraphStore(dsn, namespace=pg.namespace, graph_cache=False)
    ts_rank = [False]

    def lexical(self: Any, text: str, k: int, where: Any = None) -> list[tuple[str, float]]:
        return own(sql, text, k, where) if ts_rank[0] else own(self, text, k, where)

    PostgresGraphStore.lexical_search = lexical  # type: ignore[method-assign]
    no_lex: dict[str, Any] = {
        "prior": embedded.retrieval_config.prior.model_copy(update={"lexical_weight": 0})
    }
    n_cand = embedded.retrieval_config.prior.candidates

    def ask(eng: Any, q: str, swap: bool = False, **kw: Any) -> list[Any]:
        ts_rank[0] = swap
        try:
            return [(c.chunk.id, c.chunk.doc_id) for c in eng.retrieve(q, **kw).chunks]
        finally:
            ts_rank[0] = False

    got: dict[str, list[list[Any]]] = {k: [] for k in ENGINES}
    lex: dict[str, list[tuple[float, float, bool]]] = {"postgres": [], "ts_rank": []}
    examples: list[dict[str, Any]] = []
    for q, gold in qs:
        got["embedded"].append(ask(embedded, q))
        got["postgres"].append(ask(postgres, q))
        got["postgres-ts-rank"].append(ask(postgres, q, swap=True))
        got["embedded-no-lexical"].append(ask(embedded, q, **no_lex))
        got["postgres-no-lexical"].append(ask(postgres, q, **no_lex))
        a = [c for c, _ in mem.lexical_search(q, n_cand)]
        for name, store in (("postgres", pg), ("ts_rank", sql)):
            b = [c for c, _ in own(store, q, n_cand)]
            lex[name].append(
                (
                    len(set(a[:5]) & set(b[:5])) / 5,
                    len(set(a) & set(b)) / max(1, len(a)),
                    a[:1] == b[:1],
                )
            )
        if len(examples) < 3 and got["postgres"][-1] != got["embedded"][-1]:
            examples.append(
                {
                    "question": q,
                    "gold": gold,
                    "bm25_top5": a[:5],
                    "postgres_lexical_top5": [c for c, _ in own(pg, q, 5)],
                    "embedded_top5": [d for _, d in got["embedded"][-1][:5]],
                    "postgres_top5": [d for _, d in got["postgres"][-1][:5]],
                }
            )

    def recall(runs: list[list[Any]], gold: list[Any] | None = None) -> float:
        return float(
            np.mean(
                [
                    len({d for _, d in r[:5]} & set(g)) / len(g)
                    for r, (_, g) in zip(runs, gold or qs)
                ]
            )
        )

    out: dict[str, Any] = {
        "args": vars(args),
        "questions": len(qs),
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
    }
    out["recall_at_5"] = {k: round(recall(v), 3) for k, v in got.items()}
    out["pairs"] = {}
    for a_, b_ in PAIRS:
        same = np.mean([x == y for x, y in zip(got[a_], got[b_])])
        top5 = np.mean(
            [
                len({c for c, _ in x[:5]} & {c for c, _ in y[:5]}) / max(1, len(y[:5]))
                for x, y in zip(got[a_], got[b_])
            ]
        )
        ra, rb = ([recall([x], [g]) for x, g in zip(got[k], qs)] for k in (a_, b_))
        better = sum(x > y for x, y in zip(ra, rb))
        worse = sum(x < y for x, y in zip(ra, rb))
        out["pairs"][f"{a_} vs {b_}"] = {
            "recall_at_5_better_worse": [better, worse],
            "same_ranked_list": round(float(same), 3),
            "top5_overlap": round(float(top5), 3),
        }
    out["lexical_agreement"] = {  # with the embedded store's BM25
        name: {
            "top5_overlap": round(float(np.mean([x[0] for x in got_])), 3),
            f"top{n_cand}_overlap": round(float(np.mean([x[1] for x in got_])), 3),
            "same_best_hit": round(float(np.mean([x[2] for x in got_])), 3),
        }
        for name, got_ in lex.items()
    }
    out["examples"] = examples
    sql.close()
    pg.drop_namespace()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"pg_vs_embedded_{args.passages}{args.tag}.json").write_text(json.dumps(out, indent=2))
    print(json.dumps({k: v for k, v in out.items() if k != "examples"}, indent=1))
    return 0


ENGINES = (
    "embedded",
    "postgres",
    "postgres-ts-rank",
    "embedded-no-lexical",
    "postgres-no-lexical",
)
PAIRS = (
    ("postgres", "embedded"),
    ("postgres-ts-rank", "embedded"),
    ("postgres-no-lexical", "embedded-no-lexical"),
)

if __name__ == "__main__":
    raise SystemExit(main())
