"""First-pass settings side by side (issue 25 item 1): one setting of one dev set is indexed
once (zero-token, the packaged MiniLM), BM25 / dense / PPR run on the same chunks, then
ReMindRAG with each named set of retrieval overrides, question by question.

    python benchmarks/first_pass_configs.py --set musique_train100 --setting per-question \\
        --configs '{"one round": {"prior": {"feedback_rounds": 1, "feedback_by_links": false}},
                    "default": {}}' --out /tmp/fp-musique-pq.json

Prints recall@5 (evidence@5 on long documents) per configuration with the best baseline, the
margin and the non-LLM p95; ``--out`` keeps the per-question scores (a dev dump: do not
commit it). Sets joined by ``+`` are pooled into one corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from remindrag_integrations.adapters.windows import LONG_TEXTS
from remindrag_integrations.core.config import RetrievalConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness import metrics as M  # noqa: E402
from benchmarks.harness.data import Dataset, load_dataset  # noqa: E402
from benchmarks.harness.resources import make_embedder  # noqa: E402
from benchmarks.harness.runner import Bench, baseline_query, remindrag_query  # noqa: E402

BASELINES = ("bm25", "dense", "ppr")
SCORES = ("recall", "allgold", "evidence")


def load(names: str, data: str) -> Dataset:
    sets = [load_dataset(s, data) for s in names.split("+")]
    questions = [q for d in sets for q in d.questions]
    return Dataset(names, questions, {p: r for d in sets for p, r in d.corpus.items()})


def scores(rec: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in rec.items() if k.startswith(SCORES)}


def run(
    ds: Dataset, setting: str, configs: dict[str, dict[str, Any]], long_texts: str = "windows"
) -> dict[str, Any]:
    bench = Bench(ds, setting, "none", make_embedder("minilm", long_texts=long_texts))
    key = "evidence@5" if ds.long_document else "recall@5"
    out: dict[str, Any] = {"set": ds.name, "setting": setting, "key": key}
    out["load"] = os.getloadavg()
    for m in BASELINES:
        out[m] = {q["qid"]: scores(baseline_query(bench, q, m, 10)) for q in ds.questions}
    for name, overrides in configs.items():
        for kb in bench.unique_kbs():
            kb.engine.retrieval_config = RetrievalConfig.build(**overrides)
        recs = [remindrag_query(bench, q, 10) for q in ds.questions]
        out[name] = {r["qid"]: {**scores(r), "ms": sum(r["timings_ms"].values())} for r in recs}
    return out


def report(res: dict[str, Any], configs: dict[str, Any]) -> None:
    key, qids = res["key"], list(res["bm25"])

    def mean(m: str) -> float:
        return sum(res[m][q][key] for q in qids) / len(qids)

    best = max(BASELINES, key=mean)
    print(f"{res['set']} {res['setting']} ({len(qids)} q): best baseline {best} {mean(best):.3f}")
    for name in configs:
        p95 = M.percentile([res[name][q]["ms"] for q in qids], 95)
        margin = mean(name) - mean(best)
        print(f"  {name}: {key} {mean(name):.3f} ({margin:+.3f}), non-LLM p95 {p95:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/datasets")
    ap.add_argument("--set", required=True, dest="set_name")
    ap.add_argument("--setting", choices=("pooled", "per-question"), default="pooled")
    ap.add_argument("--configs", default='{"default": {}}', help="JSON: name -> overrides")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--long-texts",
        choices=LONG_TEXTS,
        default="windows",
        help="how the packaged embedder reads chunks past its 256 word pieces",
    )
    args = ap.parse_args()
    configs = json.loads(args.configs)
    t0 = time.perf_counter()
    res = run(load(args.set_name, args.data), args.setting, configs, args.long_texts)
    report(res, configs)
    print(f"({time.perf_counter() - t0:.0f} s, load {res['load'][0]:.1f})")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
