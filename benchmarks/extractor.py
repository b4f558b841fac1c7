"""The offline entity extractor, old vs new, side by side in one process (issue #14).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/extractor.py --data ../shared/datasets \\
        --sets hotpotqa_train100 --settings per-question --sections stats,index,recall \\
        --out benchmarks/results/extractor-hotpotqa_train100-per-question.json

Sections: ``stats`` (each extractor over every corpus passage and question: entities, the
share that are bare numbers / "X and Y" pairs / lone nationality adjectives, the biggest hubs,
extraction ms per passage, examples where the two differ), ``index`` (zero-token ``insert`` of
the corpus with the hash embedder, so the time is extraction + graph building, the two
extractors interleaved, median of ``--repeats``), ``recall`` (the bench harness's ``ppr`` and
``remindrag`` rows, LLM ``none``, packaged MiniLM, once per extractor, with the paired
per-question difference new - old and its bootstrap interval). Prints tables, writes JSON;
``python benchmarks/extractor.py --markdown FILE.json`` prints a result file's tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from indexing import table  # benchmarks/indexing.py, next to this script (a table printer)
from legacy_extractor import legacy_extraction  # benchmarks/, next to this script

from remindrag_integrations.core import extract_rules, indexing
from remindrag_integrations.core.extract_rules import rule_based_extraction
from remindrag_integrations.core.prompts import Extraction

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness

Extractor = Callable[..., Extraction]
EXTRACTORS: dict[str, Extractor] = {"old": legacy_extraction, "new": rule_based_extraction}
_SWAP_LOCK = threading.Lock()
_NUMERIC = re.compile(r"^[\d\s,.\-–/]+(?:\s*(?:and|&)\s*[\d\s,.\-–/]+)*$")
_DEMONYM = re.compile(r"^(?:\d+\s+)?(?:American|British|English|French|German|Australian)$")


def spacy_extractor(model_path: str) -> Extractor:
    """spaCy NER as an extractor (measured, not adopted): named entities except numbers, dates
    and nationalities (NORP), a leading "the" and a final possessive dropped; one relation per
    adjacent pair in a sentence of the model's sentence splitter."""
    import spacy

    nlp = spacy.load(model_path, exclude=["lemmatizer", "tagger", "attribute_ruler", "parser"])
    nlp.enable_pipe("senter")
    skip = {"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY", "NORP"}

    def extract(text: str, max_entities: int = 40) -> Extraction:
        entities: dict[str, str] = {}
        triples = []
        for sent in nlp(text).sents:
            names = []
            for e in sent.ents:
                name = re.sub(r"^(?:the|The)\s+|['’]s?$", "", e.text.strip()).strip()
                if e.label_ not in skip and len(name) >= 2:
                    names.append(name)
                    entities.setdefault(name.lower(), name)
            rel = " ".join(sent.text.split())[:300]
            triples += [(a, rel, b) for a, b in zip(names, names[1:]) if a.lower() != b.lower()]
        kept = list(entities.values())[:max_entities]
        keep = {k.lower() for k in kept}
        triples = [t for t in triples if t[0].lower() in keep and t[2].lower() in keep]
        return Extraction(title=text.split("\n", 1)[0][:120], entities=kept, triples=triples)

    return extract


def with_demonyms(text: str, max_entities: int = 40) -> Extraction:
    """The new extractor with lone nationality adjectives kept ("1994 American" -> "American"):
    the ablation behind dropping them."""
    with _SWAP_LOCK:  # indexing extracts on worker threads
        saved = extract_rules.DEMONYMS
        extract_rules.DEMONYMS = frozenset()
        try:
            return rule_based_extraction(text, max_entities)
        finally:
            extract_rules.DEMONYMS = saved


@contextlib.contextmanager
def use(extractor: Extractor) -> Iterator[None]:
    """Make ``extractor`` the one indexing and the PPR baseline call."""
    saved = indexing.rule_based_extraction, extract_rules.rule_based_extraction
    indexing.rule_based_extraction = extractor  # type: ignore[assignment]
    extract_rules.rule_based_extraction = extractor  # type: ignore[assignment]
    try:
        yield
    finally:
        indexing.rule_based_extraction, extract_rules.rule_based_extraction = saved


def entity_stats(texts: list[str], questions: list[str], repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    times: dict[str, list[float]] = {k: [] for k in EXTRACTORS}
    for _ in range(repeats):  # interleaved, so both see the same machine load
        for name, fn in EXTRACTORS.items():
            t0 = time.perf_counter()
            for t in texts:
                fn(t)
            times[name].append((time.perf_counter() - t0) * 1e3 / len(texts))
    for name, fn in EXTRACTORS.items():
        xs = [fn(t) for t in texts]
        chunks_of = Counter(e.lower() for x in xs for e in {n.lower() for n in x.entities})
        q_ents = [fn(q).entities for q in questions]
        out[name] = {
            "ms_per_passage": statistics.median(times[name]),
            "mentions": sum(len(x.entities) for x in xs),
            "distinct": len(chunks_of),
            "triples": sum(len(x.triples) for x in xs),
            "numeric": sum(1 for e in chunks_of if _NUMERIC.match(e)),
            "and_pairs": sum(1 for e in chunks_of if " and " in e),
            "lone_demonym": sum(1 for e in chunks_of if _DEMONYM.match(e.title())),
            "top_hubs": chunks_of.most_common(8),
            "question_entities_mean": statistics.mean(len(q) for q in q_ents),
            "questions_without_entity": sum(1 for q in q_ents if not q),
        }
    out["examples"] = differing_examples(texts)
    return out


def differing_examples(texts: list[str], n: int = 6) -> list[dict[str, Any]]:
    """The first ``n`` sentences (by passage order) where the extractors disagree."""
    found = []
    for text in texts:
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text.split("\n", 1)[-1]):
            old = legacy_extraction(sentence).entities
            new = rule_based_extraction(sentence).entities
            if old != new and len(sentence) < 220:
                found.append({"sentence": sentence, "old": old, "new": new})
                break
        if len(found) >= n:
            break
    return found


def index_cost(docs: list[Any], repeats: int) -> dict[str, Any]:
    from remindrag_integrations import ReMindRAG
    from remindrag_integrations.testing import HashEmbedder

    secs: dict[str, list[float]] = {k: [] for k in EXTRACTORS}
    counts: dict[str, dict[str, int]] = {}
    for _ in range(repeats):
        for name, fn in EXTRACTORS.items():
            with use(fn):
                engine = ReMindRAG(embeddings=HashEmbedder(64))
                t0 = time.perf_counter()
                engine.insert(docs)
                secs[name].append(time.perf_counter() - t0)
                counts[name] = dict(engine.store.counts())
    return {k: {"seconds_median": statistics.median(v), **counts[k]} for k, v in secs.items()}


def recall(ds: Any, setting: str, cache: Path) -> dict[str, Any]:
    from benchmarks.harness import metrics as M
    from benchmarks.harness.resources import make_embedder
    from benchmarks.harness.runner import run_retrieval

    runs: dict[str, Any] = {}
    for name, fn in EXTRACTORS.items():
        embedder = make_embedder("minilm", cache)
        t0 = time.perf_counter()
        with use(fn):
            res = run_retrieval(ds, setting, ["ppr", "remindrag"], "none", embedder, 10)
        res["wall_seconds"] = time.perf_counter() - t0
        runs[name] = res
    paired: dict[str, Any] = {}
    first, *others = runs
    for method in ("ppr", "remindrag"):
        by = {
            name: {r["qid"]: r for r in res["records"] if r["method"] == method}
            for name, res in runs.items()
        }
        for other in others:
            for key in ("recall@2", "recall@5", "recall@10"):
                diffs = [by[other][q][key] - by[first][q][key] for q in by[first]]
                paired[f"{other} - {first}, {method} {key}"] = {
                    "mean": M.mean(diffs),
                    "ci": M.bootstrap_ci(diffs),
                }
    return {"runs": runs, "paired": paired}


def print_recall(label: str, rec: dict[str, Any]) -> None:
    rows = []
    for name, res in rec["runs"].items():
        for method in ("ppr", "remindrag"):
            s = res["summary"][method]
            lat = s["latency_ms"]["non_llm_total"]
            rows.append(
                [f"{method} ({name})", s["recall@2"], s["recall@5"], s["recall@10"],
                 s["allgold@5"], f"{lat['p50']:.1f}", f"{res['indexing']['seconds']:.1f}",
                 res["indexing"]["edges"]]
            )  # fmt: skip
    table(label, ["method", "R@2", "R@5", "R@10", "AG@5", "p50 ms", "index s", "edges"], rows)
    for key, d in rec["paired"].items():
        print(f"  {key}: {d['mean']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]")


def print_stats(label: str, st: dict[str, Any]) -> None:
    keys = ["ms_per_passage", "mentions", "distinct", "triples", "numeric", "and_pairs"]
    keys += ["lone_demonym", "question_entities_mean", "questions_without_entity"]
    table(label, ["extractor", *keys], [[n, *(st[n][k] for k in keys)] for n in EXTRACTORS])
    for n in EXTRACTORS:
        print(f"  {n} hubs:", ", ".join(f"{e} ({c})" for e, c in st[n]["top_hubs"]))


def markdown(result: dict[str, Any]) -> str:
    """RESULTS.md tables of a result file: recall rows per set and setting, entity counts."""
    out = []
    for set_name, entry in result["sets"].items():
        for key, rec in entry.items():
            if not key.startswith("recall "):
                continue
            out.append(f"\n**{set_name}**, {key[7:]}, LLM `none`\n")
            out.append("| method (extractor) | R@2 | R@5 | R@10 | AllGold@5 | p50 ms | index s |")
            out.append("|---|---|---|---|---|---|---|")
            for name, res in rec["runs"].items():
                for method in ("ppr", "remindrag"):
                    s = res["summary"][method]
                    p50 = s["latency_ms"]["non_llm_total"]["p50"]
                    cells = [s[k] for k in ("recall@2", "recall@5", "recall@10", "allgold@5")]
                    row = [f"{method} ({name})", *(f"{c:.3f}" for c in cells), f"{p50:.1f}"]
                    out.append(
                        "| " + " | ".join([*row, f"{res['indexing']['seconds']:.0f}"]) + " |"
                    )
            for k, d in rec["paired"].items():
                out.append(f"- {k}: {d['mean']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]")
        if "stats" in entry:
            st = entry["stats"]
            names = [n for n in st if n != "examples"]
            out.append(f"\n**{set_name}** entities (corpus passages; questions for the last two)\n")
            out.append("| extractor | ms/passage | mentions | distinct | relations | numeric "
                       "| 'and' | lone demonym | per question | questions without |")  # fmt: skip
            out.append("|---" * 10 + "|")
            for n in names:
                v = st[n]
                out.append(
                    f"| {n} | {v['ms_per_passage']:.3f} | {v['mentions']} | {v['distinct']} "
                    f"| {v['triples']} | {v['numeric']} | {v['and_pairs']} | {v['lone_demonym']} "
                    f"| {v['question_entities_mean']:.2f} | {v['questions_without_entity']} |"
                )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.data import load_dataset
    from benchmarks.harness.results import write_result

    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--markdown":
        print(markdown(json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--sets", default="hotpotqa_train100,musique_train100")
    p.add_argument("--settings", default="per-question")
    p.add_argument("--sections", default="stats,index,recall")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--embed-cache", default=str(Path.home() / ".cache" / "remindrag-bench"))
    p.add_argument("--out", required=True)
    p.add_argument("--extractors", default="old,new", help="old, new, new+demonyms, spacy")
    p.add_argument("--spacy-model", default=None, help="path of a spaCy pipeline (measured only)")
    args = p.parse_args(argv)
    EXTRACTORS["new+demonyms"] = with_demonyms
    if args.spacy_model:
        EXTRACTORS["spacy"] = spacy_extractor(args.spacy_model)
    for name in [n for n in EXTRACTORS if n not in args.extractors.split(",")]:
        del EXTRACTORS[name]
    sections = set(args.sections.split(","))
    result: dict[str, Any] = {"command": " ".join(sys.argv), "sets": {}}
    result["load_before"] = os.getloadavg()
    for set_name in args.sets.split(","):
        ds = load_dataset(set_name, args.data).head(args.limit)
        docs = ds.documents()
        entry: dict[str, Any] = {}
        if "stats" in sections:
            qs = [q["question"] for q in ds.questions]
            entry["stats"] = entity_stats([d.text for d in docs], qs, args.repeats)
            print_stats(f"{set_name}: entities over {len(docs)} passages", entry["stats"])
        if "index" in sections:
            entry["index"] = index_cost(docs, args.repeats)
            print(f"\n{set_name}: zero-token insert, hash embedder:", entry["index"])
        for setting in args.settings.split(",") if "recall" in sections else []:
            entry[f"recall {setting}"] = rec = recall(ds, setting, Path(args.embed_cache))
            print_recall(f"{set_name}, {setting}, LLM none (MiniLM)", rec)
        result["sets"][set_name] = entry
    result["load_after"] = os.getloadavg()
    write_result(result, Path(args.out))  # per-question records go to raw/ beside it
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
