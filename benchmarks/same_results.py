"""Same results before and after a refactor (issue 48): retrieved ids, order, scores, recall@5.

    python benchmarks/same_results.py build --out /tmp/same_kb            # once: the indexes
    python benchmarks/same_results.py run --kb /tmp/same_kb --json a.json  # one code tree
    python benchmarks/same_results.py compare --kb /tmp/same_kb \\
        --before /tmp/base_tree --after . [--rounds 3]                     # both, side by side

``build`` indexes a fixed slice of real passages per dev set (HotpotQA, MuSiQue, 2Wiki from
``../shared/datasets/``: the gold and candidate passages of the first 40 questions, up to 300
per set) with the packaged embedder and no LLM (rule-based extraction), and saves each as a
folder store. ``run`` copies each folder, opens it with the code on ``PYTHONPATH`` and asks
the 40 questions zero-token under four settings: ``defaults``; ``no_prior`` (the first pass
off: dense seeds, the read chunks first); ``min_score`` (0.75: the abstention paths, before the walk and after the rank); and
``taught`` (20 questions' gold passages taught first, then all 40 asked: memory replay and
vouching run). It dumps, per setting and question, the returned chunk ids in order, their
scores, the trace's stop reason and rank evidence, recall@5, and whole-query wall times.
``compare`` runs ``run`` for two code trees in alternating subprocesses (``--rounds``
each, each tree first every other round), checks ids and order identical, scores within 1e-9, stop reasons and recall equal,
and prints whole-query p50 / p95 of both side by side, wall clock and process CPU time (less
moved by other jobs on a shared machine), per setting and pooled; the summary goes to
``benchmarks/results/same_results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
DATA = ROOT.parent.parent / "shared" / "datasets"
SETS = ("hotpotqa_train100", "musique_train100", "2wiki_dev64")
QUESTIONS, PASSAGES, TAUGHT = 40, 300, 20
SETTINGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "no_prior": {"prior": {"enabled": False}},
    "min_score": {"min_score": 0.75},
    "taught": {},
}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def slice_of(name: str, data: Path) -> tuple[list[dict], list[dict]]:
    """The first :data:`QUESTIONS` questions and their passages (gold first, then the
    candidates, in file order, at most :data:`PASSAGES`)."""
    qs = _jsonl(data / f"{name}.questions.jsonl")[:QUESTIONS]
    rows = {r["pid"]: r for r in _jsonl(data / f"{name}.corpus.jsonl")}
    pids = list(dict.fromkeys(p for q in qs for p in q["gold_pids"]))
    pids += [p for q in qs for p in q.get("context_pids", []) if p in rows and p not in pids]
    pids = list(dict.fromkeys(pids))[:PASSAGES]
    return qs, [rows[p] for p in pids if p in rows]


def build(out: Path, data: Path) -> None:
    from remindrag_integrations import Document, ReMindRAG

    out.mkdir(parents=True, exist_ok=True)
    for name in SETS:
        qs, rows = slice_of(name, data)
        folder = out / name
        if folder.exists():
            shutil.rmtree(folder)
        t = time.perf_counter()
        rag = ReMindRAG(store=folder)
        docs = [Document(text=f"{r['title']}\n{r['text']}", id=r["pid"]) for r in rows]
        rag.insert(docs)
        rag.save(folder, overwrite=True)
        rag.close()
        (out / f"{name}.questions.json").write_text(json.dumps(qs))
        print(f"{name}: {len(rows)} passages, {len(qs)} questions, {time.perf_counter() - t:.0f}s")


def recall(ids: list[str], gold: list[str], k: int = 5) -> float:
    """The share of the ``gold`` documents among the first ``k`` returned documents."""
    got = set(ids[:k])
    return sum(1 for g in gold if g in got) / len(gold)


def run(kb: Path) -> dict:
    from remindrag_integrations import ReMindRAG

    out: dict[str, Any] = {}
    for name in SETS:
        qs = json.loads((kb / f"{name}.questions.json").read_text())
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / name
            shutil.copytree(kb / name, folder)
            rag = ReMindRAG(store=folder)
            for setting, overrides in SETTINGS.items():
                if setting == "taught":
                    pairs = [{"question": q["question"], "doc_ids": q["gold_pids"]} for q in qs]
                    rag.teach(pairs[:TAUGHT])
                rows = []
                for q in qs:
                    t, c = time.perf_counter(), time.process_time()
                    r = rag.retrieve(q["question"], **overrides)
                    ms = (time.perf_counter() - t) * 1e3
                    cpu = (time.process_time() - c) * 1e3
                    docs = [rc.chunk.doc_id for rc in r.chunks]
                    rows.append(
                        {
                            "qid": q["qid"],
                            "ids": [rc.chunk.id for rc in r.chunks],
                            "scores": [rc.score for rc in r.chunks],
                            "rank_scores": [rc.rank_score for rc in r.chunks],
                            "how": [rc.source for rc in r.chunks],
                            "stop_reason": str(r.trace.stop_reason),
                            "evidence": r.trace.rank_evidence,
                            "recall5": recall(docs, q["gold_pids"]),
                            "ms": ms,
                            "cpu_ms": cpu,
                        }
                    )
                out[f"{name}/{setting}"] = rows
            rag.close()
    return out


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def _same(a: dict, b: dict) -> list[str]:
    """What differs between two runs' results (times aside)."""
    diffs = []
    for key in a:
        for x, y in zip(a[key], b[key]):
            where = f"{key} {x['qid']}"
            if x["ids"] != y["ids"]:
                diffs.append(f"{where}: ids {x['ids']} != {y['ids']}")
            if x["how"] != y["how"] or x["stop_reason"] != y["stop_reason"]:
                diffs.append(
                    f"{where}: how/stop {x['how']} {x['stop_reason']} != "
                    f"{y['how']} {y['stop_reason']}"
                )
            for f in ("scores", "rank_scores"):
                if len(x[f]) != len(y[f]) or any(abs(u - v) > 1e-9 for u, v in zip(x[f], y[f])):
                    diffs.append(f"{where}: {f} {x[f]} != {y[f]}")
            ex, ey = x["evidence"], y["evidence"]
            if set(ex) != set(ey) or any(
                set(ex[c]) != set(ey[c]) or any(abs(ex[c][p] - ey[c][p]) > 1e-9 for p in ex[c])
                for c in ex
            ):
                diffs.append(f"{where}: rank evidence differs")
            if x["recall5"] != y["recall5"]:
                diffs.append(f"{where}: recall {x['recall5']} != {y['recall5']}")
    return diffs


def compare(kb: Path, trees: dict[str, Path], rounds: int) -> dict:
    runs: dict[str, list[dict]] = {t: [] for t in trees}
    for i in range(rounds):
        order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]
        for label, tree in order:  # alternating, each first every other round (the second
            # process of a round measured ~6 % more CPU in an A/A run of one tree)
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
                cmd = [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "run",
                    "--kb",
                    str(kb),
                    "--json",
                    f.name,
                ]
                subprocess.run(cmd, check=True, env=env, cwd=str(tree))
                runs[label].append(json.loads(Path(f.name).read_text()))
    before, after = runs["before"][0], runs["after"][0]
    diffs = _same(before, after)
    for label in trees:  # each tree agrees with itself across rounds too
        diffs += [
            f"{label} round-to-round: {d}"
            for r in runs[label][1:]
            for d in _same(runs[label][0], r)
        ]
    table = []
    head = f"{'setting':30} {'recall@5 b/a':>13} {'wall p50 b/a':>13} {'wall p95 b/a':>13}"
    print(head + f" {'cpu p50 b/a':>13} {'cpu p95 b/a':>13}")
    pooled: dict[str, dict[str, list[float]]] = {t: {"ms": [], "cpu_ms": []} for t in trees}
    for key in [*before, "all"]:
        row: dict[str, Any] = {"setting": key}
        for label in trees:
            if key == "all":
                got = pooled[label]
                rec = [q["recall5"] for k in before for q in runs[label][0][k]]
            else:
                got = {f: [q[f] for r in runs[label] for q in r[key]] for f in ("ms", "cpu_ms")}
                rec = [q["recall5"] for q in runs[label][0][key]]
                for f in got:
                    pooled[label][f] += got[f]
            row[label] = {"recall5": sum(rec) / len(rec), "queries": len(got["ms"])}
            for f in ("ms", "cpu_ms"):
                row[label][f"p50_{f}"] = _pct(got[f], 50)
                row[label][f"p95_{f}"] = _pct(got[f], 95)
        b, a = row["before"], row["after"]
        cells = [f"{b['recall5']:6.3f}/{a['recall5']:6.3f}"]
        for f in ("p50_ms", "p95_ms", "p50_cpu_ms", "p95_cpu_ms"):
            cells.append(f"{b[f]:6.1f}/{a[f]:6.1f}")
        print(f"{key:30} " + " ".join(f"{c:>13}" for c in cells))
        table.append(row)
    print(f"differences: {len(diffs)}")
    for d in diffs[:20]:
        print("  " + d)
    return {
        "rows": table,
        "differences": len(diffs),
        "first_differences": diffs[:20],
        "rounds": rounds,
        "load_avg": os.getloadavg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--data", type=Path, default=DATA)
    r = sub.add_parser("run")
    r.add_argument("--kb", type=Path, required=True)
    r.add_argument("--json", type=Path, required=True)
    c = sub.add_parser("compare")
    c.add_argument("--kb", type=Path, required=True)
    c.add_argument("--before", type=Path, required=True)
    c.add_argument("--after", type=Path, default=ROOT.parent)
    c.add_argument("--rounds", type=int, default=2)
    c.add_argument("--out", type=Path, default=ROOT / "results" / "same_results.json")
    args = ap.parse_args()
    if args.cmd == "build":
        build(args.out, args.data)
    elif args.cmd == "run":
        args.json.write_text(json.dumps(run(args.kb)))
    else:
        summary = compare(args.kb, {"before": args.before, "after": args.after}, args.rounds)
        summary["command"] = " ".join(sys.argv)
        summary["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        for label in ("before", "after"):
            tree = getattr(args, label)
            rev = subprocess.run(
                ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
            )
            dirty = subprocess.run(
                ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
            )
            summary[f"{label}_tree"] = str(tree.resolve())
            summary[f"{label}_commit"] = (
                rev.stdout.strip() + ("+dirty" if dirty.stdout else "")
            ) or None
        args.out.write_text(json.dumps(summary, indent=1))
        if summary["differences"]:
            sys.exit(1)


if __name__ == "__main__":
    main()
