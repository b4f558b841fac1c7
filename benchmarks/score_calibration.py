"""Scores with a meaning: where one relevance cutoff separates on-topic from off-topic
passages, on the dev sets, at several corpus sizes; and what ``min_score`` (abstain below
it) costs and gains.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/score_calibration.py \\
        --data ../shared/datasets --out benchmarks/results/score_calibration.json

Zero-token retrieval at the library's defaults (packaged MiniLM, k=5) over each set's corpus
at up to three sizes: ``per-question`` (the question's own 10-20 passages; multi-hop sets),
``pooled`` (the set's whole corpus) and ``all`` (every corpus below in one store, 3.5 k
passages and the long documents' chunks). Questions:

- in-corpus: the set's own; its gold passages are the returned chunks that contain a gold
  passage (or, for the long documents, a gold sentence);
- off-corpus: ``--off`` questions of each OTHER dev set run against this set's corpus (its
  knowledge bases in turn, per question); a question whose gold passage's title is in this
  corpus is left out (it is answerable here). For ``all``, QuALITY's questions (stories no
  corpus here holds), the question line alone.

Reported per set and size: the relevance (``metadata["remindrag"]["score"]``) of the gold
passages in the top 5, of the top passage in-corpus and off-corpus; at each cutoff the share
of off-corpus questions whose best passage is below it (``min_score`` then returns nothing),
the share of in-corpus questions that would abstain and the recall@5 drop that costs, and
per passage (``SimilarityPostprocessor`` / ``score_threshold``) the share of top-5 gold
passages kept. At ``--cutoff`` every question is retrieved again with ``min_score`` set, and
the recall@5 and the off-corpus abstentions are those of these real runs. For comparison,
the top passage's old score (``rank_score``, scaled to the best hit) and its cosine alone.

``--remember N`` (issue 46): on each pooled corpus, after the read-only runs, every off-corpus
question goes through N remember turns, as an app whose model answers from its own knowledge
and cites the top passage: retrieve (no cutoff set), ``memorize(trace, answer="<its gold
answer> [<top chunk id>]")``. Reported: the memory writes, and the top passage's relevance
before the first turn and after the last, with the questions that started below the cutoff
and ended above it (memory may never lift an off-topic question over the cutoff).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from indexing import table  # benchmarks/indexing.py, next to this script

from remindrag_integrations.core.config import RECOMMENDED_MIN_SCORE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness import metrics as M  # noqa: E402
from benchmarks.harness.data import Dataset, load_dataset  # noqa: E402
from benchmarks.harness.resources import make_embedder  # noqa: E402
from benchmarks.harness.runner import KnowledgeBase, build_kb  # noqa: E402

SETS = (
    "hotpotqa_train100",
    "musique_train100",
    "2wiki_dev64",
    "loogle_shortdep_dev",
    "loogle_longdep_dev",
    "loogle_shortdep_qa",
)
SAME_CORPUS = {"loogle_shortdep_qa": "loogle_longdep_qa"}  # a second question set, one document
CUTOFFS = (0.4, 0.45, 0.5, 0.525, 0.55)
K = 5


def questions(data: Path, name: str) -> list[dict[str, Any]]:
    """The set's questions (with those of a set over the same corpus), tagged with it."""
    qs = [dict(q, _set=name) for q in load_dataset(name, data).questions]
    if name in SAME_CORPUS:
        qs += [dict(q, _set=name) for q in load_dataset(SAME_CORPUS[name], data).questions]
    return qs


def off_questions(data: Path, name: str, n: int, corpus_titles: set[str]) -> tuple[list, int]:
    """``n`` questions of each other set, shuffled with a fixed seed; those whose gold
    passage's title this corpus holds are left out (counted)."""
    rng = random.Random(0)
    out, left = [], 0
    for other in SETS:
        if other == name:
            continue
        qs = questions(data, other)
        rng.shuffle(qs)
        for q in qs[:n]:
            if any(p.split("#")[0] in corpus_titles for p in q["gold_pids"]):
                left += 1
            else:
                out.append(q)
    return out, left


def gold_texts(ds: dict[str, Dataset], q: dict[str, Any]) -> dict[str, str]:
    corpus = ds[q["_set"]].corpus
    return {p: corpus[p]["text"] for p in q["gold_pids"] if p in corpus}


def run_one(kb: KnowledgeBase, q: dict[str, Any], ds: dict[str, Dataset] | None, **kw: Any) -> dict:
    """One retrieval: per returned passage its relevance, rank score, cosine and the gold
    passages it counts for (in-corpus questions only)."""
    text = q["question"].split("\n")[0].strip() if q.get("gold_option") else q["question"]
    r = kb.engine.retrieve(text, k=K, **kw)
    gold = gold_texts(ds, q) if ds is not None else {}
    sents = q.get("gold_sentences", ()) if ds is not None else ()
    rows = []
    for rc in r.chunks:
        ev = r.trace.rank_evidence.get(rc.chunk.id, {})
        match = sorted(M.gold_matches(rc.chunk.text, gold, sents)) if gold else []
        rows.append([rc.score, rc.rank_score, ev.get("cosine", 0.0), match])
    return {"rows": rows, "n_gold": len(q["gold_pids"]), "abstained": r.trace.abstained}


def remember_turns(kb: KnowledgeBase, offs: list[dict], cutoff: float, turns: int) -> dict:
    """N cited remember turns per off-corpus question (module doc); the engine is written."""
    before, after, writes = [], [], 0
    for q in offs:
        first = None
        for _ in range(turns):
            r = kb.engine.retrieve(q["question"], k=K)
            if not r.chunks:
                break
            first = r.chunks[0].score if first is None else first
            answer = f"{(q.get('answers') or ['unknown'])[0]} [{r.chunks[0].chunk.id}]"
            writes += bool(kb.engine.memorize(r.trace_id, answer=answer).applied)
        last = kb.engine.retrieve(q["question"], k=K)
        if first is not None and last.chunks:
            before.append(first)
            after.append(last.chunks[0].score)
    lifted = sum(b < cutoff <= a for b, a in zip(before, after))
    return {
        "questions": len(before),
        "turns": turns,
        "writes": writes,
        "below_before": sum(b < cutoff for b in before),
        "lifted_over_cutoff": lifted,
        "top_before": {f"p{q}": pct(before, q) for q in (50, 95)} if before else None,
        "top_after": {f"p{q}": pct(after, q) for q in (50, 95)} if after else None,
        "max_rise": max((a - b for b, a in zip(before, after)), default=0.0),
    }


def recall(rec: dict) -> float:
    """recall@5: the share of the question's gold passages the top 5 cover."""
    covered = {g for r in rec["rows"][:K] for g in r[3]}
    return len(covered) / rec["n_gold"] if rec["n_gold"] else 0.0


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def summarise(
    ins: list[dict], offs: list[dict], cut_ins: list[dict], cut_offs: list[dict], cutoff: float
) -> dict[str, Any]:
    gold = [r[0] for rec in ins for r in rec["rows"][:K] if r[3]]
    top_in = [rec["rows"][0][0] for rec in ins if rec["rows"]]
    top_off = [rec["rows"][0][0] if rec["rows"] else 0.0 for rec in offs]
    off_passages = [r[0] for rec in offs for r in rec["rows"][:K]]
    base = statistics.mean(recall(rec) for rec in ins)
    out: dict[str, Any] = {
        "in_questions": len(ins),
        "off_questions": len(offs),
        "gold_top5": {f"p{q}": pct(gold, q) for q in (1, 5, 10, 25, 50)},
        "top_in": {f"p{q}": pct(top_in, q) for q in (1, 5, 10, 50)},
        "top_off": {f"p{q}": pct(top_off, q) for q in (50, 80, 90, 95, 99)},
        "old_top_score": {
            "in_min": min((rec["rows"][0][1] for rec in ins if rec["rows"]), default=None),
            "off_max": max((rec["rows"][0][1] for rec in offs if rec["rows"]), default=None),
        },
        "cosine_top": {
            "in_p5": pct([max(r[2] for r in rec["rows"]) for rec in ins if rec["rows"]], 5),
            "off_p80": pct([max(r[2] for r in rec["rows"]) for rec in offs if rec["rows"]], 80),
        },
        "recall@5": base,
        "cutoffs": {},
    }
    for c in sorted({*CUTOFFS, cutoff}):
        kept = [rec for rec in ins if rec["rows"] and rec["rows"][0][0] >= c]
        out["cutoffs"][str(c)] = {
            "off_abstain": statistics.mean(t < c for t in top_off),
            "in_abstain": 1 - len(kept) / len(ins),
            "recall_drop": base - sum(recall(rec) for rec in kept) / len(ins),
            "gold_passages_kept": statistics.mean(g >= c for g in gold) if gold else None,
            "off_passages_dropped": (
                statistics.mean(p < c for p in off_passages) if off_passages else 1.0
            ),
        }
    real_recall = statistics.mean(recall(rec) for rec in cut_ins)
    out["min_score_run"] = {
        "min_score": cutoff,
        "recall@5": real_recall,
        "recall_drop": base - real_recall,
        "off_abstain": statistics.mean(not rec["rows"] for rec in cut_offs),
        "in_abstain": statistics.mean(not rec["rows"] for rec in cut_ins),
        "abstained_flag_matches": all(rec["abstained"] == (not rec["rows"]) for rec in cut_offs),
    }
    return out


def measure(
    kbs: list[KnowledgeBase],
    ins: list[dict],
    offs: list[dict],
    ds: dict[str, Dataset],
    cutoff: float,
) -> dict[str, Any]:
    """In-corpus question i on its knowledge base kbs[i]; off-corpus question j on kbs[j %
    len]; each twice: at the defaults and with ``min_score=cutoff``."""
    res: dict[str, list[dict]] = {"in": [], "off": [], "cut_in": [], "cut_off": []}
    for i, q in enumerate(ins):
        res["in"].append(run_one(kbs[i % len(kbs)], q, ds))
        res["cut_in"].append(run_one(kbs[i % len(kbs)], q, ds, min_score=cutoff))
    for j, q in enumerate(offs):
        res["off"].append(run_one(kbs[j % len(kbs)], q, None))
        res["cut_off"].append(run_one(kbs[j % len(kbs)], q, None, min_score=cutoff))
    return summarise(res["in"], res["off"], res["cut_in"], res["cut_off"], cutoff)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/datasets"))
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--sizes", default="per-question,pooled")
    ap.add_argument("--off", type=int, default=30, help="off-corpus questions per other set")
    ap.add_argument(
        "--cutoff", type=float, default=RECOMMENDED_MIN_SCORE, help="the documented min_score"
    )
    ap.add_argument("--cache", default=".bench-cache", help="embedding cache folder")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--remember", type=int, default=0, help="cited remember turns per off-corpus question"
    )
    args = ap.parse_args()
    emb = make_embedder("minilm", args.cache)
    sizes = args.sizes.split(",")
    names = args.sets.split(",")
    ds = {n: load_dataset(n, args.data) for n in SETS}
    out: dict[str, Any] = {"load": [os.getloadavg()], "cutoff": args.cutoff, "results": {}}
    t0 = time.perf_counter()
    for name in names:
        d = ds[name]
        titles = {r.get("title", "") for r in d.corpus.values()} - {""}
        ins = questions(args.data, name)
        offs, left = off_questions(args.data, name, args.off, titles)
        for size in sizes:
            if size == "per-question" and not d.long_document:
                kbs = [build_kb(d.documents(q["context_pids"]), "none", emb) for q in ins]
            elif size == "pooled":
                kbs = [build_kb(d.documents(), "none", emb)]
            else:
                continue
            res = measure(kbs, ins, offs, ds, args.cutoff)
            res["off_left_out"] = left
            res["passages"] = statistics.mean(len(kb.chunks) for kb in kbs)
            if args.remember and size == "pooled":
                res["remember"] = remember_turns(kbs[0], offs, args.cutoff, args.remember)
            out["results"][f"{name}/{size}"] = res
            print(f"{name}/{size}: {time.perf_counter() - t0:.0f} s", flush=True)
        emb.persist()
    if "all" in sizes:
        docs = [doc for n in SETS for doc in ds[n].documents()]
        kb = build_kb(docs, "none", emb)
        ins = [q for n in SETS for q in questions(args.data, n)]
        quality = [
            dict(q, _set="leval_quality")
            for q in load_dataset("leval_quality", args.data).questions
        ]
        res = measure([kb], ins, quality, ds, args.cutoff)
        res["off_left_out"], res["passages"] = 0, len(kb.chunks)
        out["results"]["all/all"] = res
        print(f"all: {time.perf_counter() - t0:.0f} s", flush=True)
        emb.persist()
    out["load"].append(os.getloadavg())
    report(out, args.cutoff)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1), encoding="utf-8")


def report(out: dict[str, Any], cutoff: float) -> None:
    res = out["results"]
    table(
        "Relevance (metadata['remindrag']['score']) by corpus and size, k=5",
        [
            "corpus/size",
            "passages",
            "in q",
            "off q",
            "gold top-5 p1/p5/p25",
            "top in p1/p5",
            "top off p50/p80/p95",
            "old top score in min / off max",
        ],
        [
            [
                key,
                round(r["passages"]),
                r["in_questions"],
                r["off_questions"],
                "/".join(f"{r['gold_top5'][p]:.2f}" for p in ("p1", "p5", "p25")),
                "/".join(f"{r['top_in'][p]:.2f}" for p in ("p1", "p5")),
                "/".join(f"{r['top_off'][p]:.2f}" for p in ("p50", "p80", "p95")),
                f"{r['old_top_score']['in_min']:.2f} / {r['old_top_score']['off_max']:.2f}",
            ]
            for key, r in res.items()
        ],
    )
    for c in sorted({*CUTOFFS, cutoff}):
        table(
            f"Cutoff {c}: min_score abstains / per passage (SimilarityPostprocessor)",
            [
                "corpus/size",
                "off abstain",
                "in abstain",
                "recall@5 drop",
                "gold kept",
                "off passages dropped",
            ],
            [
                [
                    key,
                    *(
                        r["cutoffs"][str(c)][f]
                        for f in (
                            "off_abstain",
                            "in_abstain",
                            "recall_drop",
                            "gold_passages_kept",
                            "off_passages_dropped",
                        )
                    ),
                ]
                for key, r in res.items()
            ],
        )
    table(
        f"Real runs with min_score={cutoff} (targets: off abstain >= 0.80, recall@5 drop <= 0.01)",
        ["corpus/size", "recall@5", "with min_score", "drop", "off abstain", "in abstain"],
        [
            [
                key,
                r["recall@5"],
                r["min_score_run"]["recall@5"],
                r["min_score_run"]["recall_drop"],
                r["min_score_run"]["off_abstain"],
                r["min_score_run"]["in_abstain"],
            ]
            for key, r in res.items()
        ],
    )
    rem = {key: r["remember"] for key, r in res.items() if "remember" in r}
    if rem:
        table(
            f"Off-corpus questions through cited remember turns (cutoff {cutoff})",
            [
                "corpus/size",
                "questions",
                "turns",
                "writes",
                "below before",
                "lifted over",
                "top p50/p95 before",
                "after",
                "max rise",
            ],
            [
                [
                    key,
                    m["questions"],
                    m["turns"],
                    m["writes"],
                    m["below_before"],
                    m["lifted_over_cutoff"],
                    "/".join(f"{m['top_before'][p]:.3f}" for p in ("p50", "p95")),
                    "/".join(f"{m['top_after'][p]:.3f}" for p in ("p50", "p95")),
                    f"{m['max_rise']:.3f}",
                ]
                for key, m in rem.items()
                if m["questions"]
            ],
        )
    print(f"load average {out['load'][0][0]:.1f} -> {out['load'][1][0]:.1f}")


if __name__ == "__main__":
    main()
