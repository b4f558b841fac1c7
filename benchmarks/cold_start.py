"""Cold start: time to first result in fresh ``python -c`` processes (issue #15 item 6).

Run through ``benchmarks/indexing.py --sections cold`` (or this file alone, same options)::

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/indexing.py \\
        --data ../shared/datasets/hotpotqa_train100.corpus.jsonl --sections cold --runs 5 \\
        --baseline /tmp/before --out benchmarks/results/indexing_cold.json

Every row is a fresh interpreter; the table gives the median wall time and the median CPU time
(user + system) of ``--runs`` processes. CPU time is what a quiet machine's wall time would be
for these single-threaded imports; wall time is what the user waits for here. ``--baseline``
adds another code tree (for instance ``git archive`` of the commit before a change) measured in
the same loop, run for run, so both trees see the same load. The ``first use`` row points
``REMINDRAG_CACHE`` at an empty directory: it includes the one-time ONNX export.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

QUERY = "Where did Marie Curie work?"
TEXTS = ["Marie Curie worked in Paris.", "Paris is in France."]
FROM_TEXTS = (
    "from remindrag_integrations import ReMindRetriever; "
    f"assert ReMindRetriever.from_texts({TEXTS!r}).invoke({QUERY!r})"
)
# rows that do not embed: measured once, not per backend
IMPORTS = {
    "LangChain only: import langchain_core.retrievers": "import langchain_core.retrievers",
    "LlamaIndex only: import llama_index.core.retrievers": "import llama_index.core.retrievers",
    "frameworks only: import the two base classes' modules": (
        "import langchain_core.retrievers, llama_index.core.retrievers"
    ),
    "import remindrag_integrations": "import remindrag_integrations",
    "from remindrag_integrations import ReMindRetriever": (
        "from remindrag_integrations import ReMindRetriever"
    ),
}
QUERIES = {
    "ReMindRetriever.from_texts([2 texts]) + first invoke": FROM_TEXTS,
    "ReMindRetriever.load(dir) + first invoke": (
        "from remindrag_integrations import ReMindRetriever; "
        f"assert ReMindRetriever.load({{store!r}}).invoke({QUERY!r})"
    ),
    "ReMindRAG.load(dir).retrieve(q) (no framework)": (
        "from remindrag_integrations import ReMindRAG; "
        f"assert ReMindRAG.load({{store!r}}).retrieve({QUERY!r}).chunks"
    ),
}
FIRST_USE = "first use on a machine: from_texts + invoke, empty ONNX cache (export)"


def fresh(code: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def measure(
    label: str, code: str, envs: dict[str, dict[str, str]], runs: int, cache: bool = True
) -> list[dict[str, Any]]:
    """``runs`` rounds; each round runs ``code`` once per tree (side by side)."""
    samples: dict[str, list[tuple[float, float]]] = {tree: [] for tree in envs}
    load_before = os.getloadavg()
    for _ in range(runs):
        for tree, env in envs.items():
            if cache:
                samples[tree].append(fresh(code, env))
                continue
            with tempfile.TemporaryDirectory() as empty:
                samples[tree].append(fresh(code, {**env, "REMINDRAG_CACHE": empty}))
    load_after = os.getloadavg()
    return [
        {
            "row": label,
            "tree": tree,
            "wall_median": statistics.median(w for w, _ in got),
            "cpu_median": statistics.median(c for _, c in got),
            "walls": [w for w, _ in got],
            "cpus": [c for _, c in got],
            "load_before": load_before,
            "load_after": load_after,
        }
        for tree, got in samples.items()
    ]


def make_store(store: Path) -> None:
    from remindrag_integrations import ReMindRAG

    engine = ReMindRAG()
    engine.insert(TEXTS)
    engine.save(store)


def tree_envs(backend: str, baseline: Path | None) -> dict[str, dict[str, str]]:
    env = {**os.environ, "REMINDRAG_EMBEDDER_BACKEND": backend, "HF_HUB_OFFLINE": "1"}
    envs = {"this": env}
    if baseline is not None:
        envs["baseline"] = {**env, "PYTHONPATH": str(baseline.resolve())}
    return envs


def bench_cold(
    runs: int, backends: list[str], store: Path, baseline: Path | None = None
) -> dict[str, Any]:
    make_store(store)
    rows: list[dict[str, Any]] = []
    for label, code in IMPORTS.items():
        rows += [{**r, "backend": "-"} for r in measure(label, code, tree_envs("", baseline), runs)]
    for backend in backends:
        envs = tree_envs(backend, baseline)
        for label, code in QUERIES.items():
            got = measure(label, code.format(store=str(store)), envs, runs)
            rows += [{**r, "backend": backend} for r in got]
    if "onnx" in backends:
        got = measure(FIRST_USE, FROM_TEXTS, tree_envs("onnx", None), min(runs, 3), cache=False)
        rows += [{**r, "backend": "onnx"} for r in got]
    print_rows(rows, runs)
    return {"runs": runs, "rows": rows}


def print_rows(rows: list[dict[str, Any]], runs: int) -> None:
    print(f"\nCold start, fresh process, median of {runs} (first-use row: of {min(runs, 3)}), s")
    trees = list(dict.fromkeys(r["tree"] for r in rows))
    head = ["fresh process does", "backend"]
    head += [f"{t} {m}" for t in trees for m in ("wall", "cpu")] + ["load"]
    cells = [head]
    keys = list(dict.fromkeys((r["row"], r["backend"]) for r in rows))
    for row, backend in keys:
        got = {r["tree"]: r for r in rows if r["row"] == row and r["backend"] == backend}
        line = [row, backend]
        for t in trees:
            r = got.get(t)
            line += [f"{r['wall_median']:.2f}", f"{r['cpu_median']:.2f}"] if r else ["", ""]
        first = next(iter(got.values()))
        line.append(f"{first['load_before'][0]:.1f}-{first['load_after'][0]:.1f}")
        cells.append(line)
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    for i, c in enumerate(cells):
        print(
            "  ".join(
                x.ljust(w) if j == 0 else x.rjust(w) for j, (x, w) in enumerate(zip(c, widths))
            )
        )
        if i == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--backends", default="onnx,torch")
    ap.add_argument("--baseline", type=Path, help="another code tree, measured side by side")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/indexing_cold.json"))
    args = ap.parse_args()
    result: dict[str, Any] = {"uptime": os.getloadavg(), "nproc": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        got = bench_cold(args.runs, args.backends.split(","), Path(tmp) / "store", args.baseline)
    result["cold"] = got
    result["load_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"\nload average before {result['uptime']}, after {result['load_after']}")


if __name__ == "__main__":
    main()
