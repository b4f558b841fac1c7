"""Reading and printing the results of ``bench real``: a result from a (possibly unfinished)
run's JSONL, and the Markdown tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .real import _ratio, summarize_real


def from_jsonl(path: str | Path, dataset: str = "", model: str = "", k: int = 5) -> dict[str, Any]:
    """A result from the per-question records a run appended so far (a run still going, or
    one stopped early)."""
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return {
        "kind": "real_llm",
        "dataset": dataset or Path(path).stem,
        "model": model,
        "k": k,
        "summary": summarize_real(records),
        "records": records,
    }


def to_markdown(res: dict[str, Any]) -> str:
    s = res["summary"]
    f, same, sb, sa = s["llm_first"], s["llm_same_after"], s["similar_before"], s["similar_after"]
    lines = [
        f"### {res['dataset']}, per question, {res.get('model') or 'LLM'} ({s['questions']} questions, k={res['k']})",
        "",
        "| recall@5 | BM25 | dense | zero-token (same bounds) | zero-token (defaults) "
        "| LLM-navigated |",
        "|---|---|---|---|---|---|",
        f"| first pass | {s['bm25']['recall@5']:.3f} | {s['dense']['recall@5']:.3f} | "
        f"{s['zero_token']['recall@5']:.3f} | {s['zero_token_default']['recall@5']:.3f} | "
        f"{f.get('recall@5', 0):.3f} |",
        "",
        "| LLM walk | n | recall@5 | decisions | prompt tok | cached tok | completion tok | "
        "traversal s | steps 2+ cached (llama.cpp) | steps 2+ exact prefix | replay only |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, w in (
        ("first pass", f),
        ("Same, after", same),
        ("Similar, before", sb),
        ("Similar, after", sa),
    ):
        if not w.get("n"):
            continue
        lines.append(
            f"| {name} | {w['n']} | {w['recall@5']:.3f} | {w['decisions']:.1f} | "
            f"{w['prompt_tokens']:,.0f} | {w['cached_prompt_tokens']:,.0f} | "
            f"{w['completion_tokens']:,.0f} | {w['traversal_seconds']:.1f} | "
            f"{w['later_cached_share']:.0%} | {w['later_shared_share']:.0%} | {w['replay_only']:.0%} |"
        )
    replies = (
        f.get("replies", 0) + same.get("replies", 0) + sb.get("replies", 0) + sa.get("replies", 0)
    )
    bad = sum(w.get("unusable_replies", 0) for w in (f, same, sb, sa))
    falls = sum(w.get("fallbacks", 0) for w in (f, same, sb, sa))
    lines += [
        "",
        f"- traversal tokens per query, Same: {f.get('traversal_tokens', 0):,.0f} → "
        f"{same.get('traversal_tokens', 0):,.0f} ({s['same_token_saving']:.0%} fewer); Similar: "
        f"{sb.get('traversal_tokens', 0):,.0f} → {sa.get('traversal_tokens', 0):,.0f} "
        f"({s['similar_token_saving']:.0%} fewer); memorize applied on {s['memorized']:.0%} of questions",
        f"- stop reasons, first pass: {f.get('stop_reasons', {})}; walks ended by an unusable reply: "
        f"{sum(w.get('ended_by_unusable_reply', 0) for w in (f, same, sb, sa))}",
        f"- replies: {replies}, unusable {bad} ({_ratio(bad, replies):.1%}), fallbacks {falls} "
        f"({_ratio(falls, replies):.1%})",
        f"- answers: EM {s['em']:.3f}, F1 {s['f1']:.3f}; wall seconds per first pass (walk + answer): "
        f"{f.get('seconds', 0):.1f}",
    ]
    x = res.get("extraction")
    if x:
        lines.append(
            f"- LLM extraction on {x['passages']} passages: {x['entities']} entities, "
            f"{x['relations']} relations, {x['tokens_per_source_token']:.2f} tokens per source token, "
            f"{x['seconds']:.0f} s ({x['fallback_chunks']} chunks fell back to rules)"
        )
    return "\n".join(lines)
