"""Per-run summaries of per-question records: means with bootstrap intervals, cost and
latency per query, and paired differences between methods."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from remindrag_integrations.core.types import STAGES

from . import metrics as M


def summarize(records: Sequence[dict]) -> dict[str, Any]:
    """Means with 95 % bootstrap intervals, LLM calls / tokens per query per stage, latency."""
    if not records:
        return {"n": 0}
    out: dict[str, Any] = {"n": len(records)}
    prefixes = ("recall@", "allgold@", "evidence@", "em", "f1", "option_acc")
    metric_keys = [k for k in records[0] if k.startswith(prefixes) and k != "embedder"]
    for key in metric_keys:
        vals = [r[key] for r in records]
        out[key] = M.mean(vals)
        out[key + "_ci"] = M.bootstrap_ci(vals)
    if "calls" in records[0]:
        for field_ in ("calls", "prompt_tokens", "completion_tokens"):
            out[field_] = {s: M.mean([r[field_][s] for r in records]) for s in STAGES}
        out["calls_per_query"] = sum(out["calls"].values())
        out["tokens_per_query"] = sum(out["prompt_tokens"].values()) + sum(
            out["completion_tokens"].values()
        )
        out["traversal_tokens_per_query"] = (
            out["prompt_tokens"]["traversal"] + out["completion_tokens"]["traversal"]
        )
        out["replay_only"] = M.mean([float(r["replay_only"]) for r in records])
        out["decisions_per_query"] = M.mean([float(r.get("decisions", 0)) for r in records])
    timing_keys = sorted({k for r in records for k in r.get("timings_ms", {})})
    lat: dict[str, Any] = {}
    for key in timing_keys:
        vals = [r["timings_ms"][key] for r in records if key in r["timings_ms"]]
        lat[key] = {"p50": M.percentile(vals, 50), "p95": M.percentile(vals, 95)}
    non_llm = [sum(r["timings_ms"].values()) for r in records]
    lat["non_llm_total"] = {"p50": M.percentile(non_llm, 50), "p95": M.percentile(non_llm, 95)}
    cpu = [r["cpu_ms"] for r in records if "cpu_ms" in r]
    if cpu:  # CPU time of the whole call (a loaded machine stretches wall-clock times)
        lat["cpu"] = {"p50": M.percentile(cpu, 50), "p95": M.percentile(cpu, 95)}
    out["latency_ms"] = lat
    if any("memorized" in r for r in records):
        out["memorized"] = M.mean([float(r.get("memorized", False)) for r in records])
    return out


def paired_differences(
    records: Sequence[dict], methods: Sequence[str], key: str = "recall@5"
) -> dict[str, Any]:
    """remindrag minus each baseline on ``key``, per question, with a bootstrap interval."""
    if "remindrag" not in methods:
        return {}
    by = {(r["method"], r["qid"]): r[key] for r in records}
    ours = {q: v for (m, q), v in by.items() if m == "remindrag"}
    out = {}
    for m in methods:
        if m == "remindrag":
            continue
        diffs = [ours[q] - by[(m, q)] for q in ours if (m, q) in by]
        lo, hi = M.bootstrap_ci(diffs)
        out[f"remindrag-{m}"] = {"metric": key, "mean": M.mean(diffs), "ci": (lo, hi)}
    return out
