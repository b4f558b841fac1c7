"""Learning without labels (issue 21 item 4): the tables of `bench curve --feedback ...` runs
(none-<policy>, cite, llm-cite) from their full result files, and one small JSON summary.

    python benchmarks/label_free.py RESULT.json [RESULT.json ...] \
        --out benchmarks/results/label_free.json

Per run: the first pass (Same, turn 0, fresh memory), Same after turns 1-3, Similar and
Different (every similar_* / different_* variant, pooled) and the untaught questions (with
``--untaught``) before and after; tokens per query; each judge's precision / recall against
the gold chunks; and where the gold chunks sit (top 5, 6-10, not retrieved) on the first
pass, which bounds what any judge can add at 5.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from remindrag_integrations.core.prompts import cited_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.learning import judge_summary, used_citations  # noqa: E402
from benchmarks.harness.metrics import mean  # noqa: E402

KS = ("recall@2", "recall@5", "recall@10")


def _pool(phases: list[dict], prefix: str, when: str) -> dict[str, Any] | None:
    """The records of every ``prefix*`` phase ``when`` (``no memory`` / ``after``), pooled."""
    recs = [
        r
        for p in phases
        if p["phase"].startswith(prefix) and when in p["phase"]
        for r in p.get("records", [])
    ]
    if not recs:
        return None
    return {"n": len(recs), **{k: mean([r[k] for r in recs]) for k in KS}}


def gold_positions(records: list[dict]) -> dict[str, int]:
    """Where the gold chunks of the first pass sit: top 5, 6-10, not in the top 10."""
    out = {"gold": 0, "top5": 0, "rank_6_10": 0, "not_retrieved": 0}
    for r in records:
        gold, ret = set(r["memo"]["gold"]), r["retrieved"]
        out["gold"] += len(gold)
        out["top5"] += len(gold & set(ret[:5]))
        out["rank_6_10"] += len(gold & set(ret[5:10]))
        out["not_retrieved"] += len(gold - set(ret[:10]))
    return out


def citing_failures(records: list[dict], answers: dict[str, list[str]]) -> dict[str, int]:
    """First-pass memorize events of a citing reader, by what went wrong: the reader cited
    nothing (of which the answer is yes / no; for the scripted reader the rest are answers no
    retrieved chunk holds), every citation ignored by memorize (the cited chunks were
    returned but not read by the walk), a non-gold chunk cited, gold chunks in the top 10 not
    cited (for the scripted reader: passages without the answer string, the bridges); and the
    gold chunks at ranks 6-10 cited, and of those ignored (the gain at 5 that was on offer)."""
    out = dict.fromkeys(
        (
            "events",
            "cited_none",
            "yes_no_answer",
            "all_citations_ignored",
            "non_gold_cited",
            "all_cited_gold",
            "top10_gold_not_cited",
            "gold_rank_6_10_cited",
            "gold_rank_6_10_cited_ignored",
        ),
        0,
    )
    for r in records:
        m = r["memo"]
        out["events"] += 1
        gold, used = set(m["gold"]), set(m.get("cited", []))
        given = set(cited_ids(m.get("answer") or ""))
        if not given:
            out["cited_none"] += 1
            got = answers.get(r["qid"], [])
            if got and all(a.strip().lower() in ("yes", "no") for a in got):
                out["yes_no_answer"] += 1
        elif not used:
            out["all_citations_ignored"] += 1
        if given and given <= gold:
            out["all_cited_gold"] += 1
        out["non_gold_cited"] += int(bool(given - gold))
        out["top10_gold_not_cited"] += int(bool((gold & set(r["retrieved"][:10])) - given))
        for cid in r["retrieved"][5:10]:
            if cid in gold and cid in given:
                out["gold_rank_6_10_cited"] += 1
                out["gold_rank_6_10_cited_ignored"] += int(cid not in used)
    return out


def summarize_run(res: dict) -> dict[str, Any]:
    phases = res["phases"]
    by = {p["phase"]: p for p in phases}
    same = {
        t: {k: by[f"same, turn {t}"]["summary"][k] for k in KS}
        for t in range(res["turns"] + 1)
        if f"same, turn {t}" in by
    }
    first = by["same, turn 0"]
    tokens = {
        f"turn {t}": by[f"same, turn {t}"]["summary"].get("tokens_per_query")
        for t in range(res["turns"] + 1)
        if f"same, turn {t}" in by
    }
    out: dict[str, Any] = {
        "dataset": res["dataset"],
        "feedback": res["feedback"] + (f" ({res['variant']})" if res.get("variant") else ""),
        "questions": res["questions"],
        "complete": not res.get("partial", False),
        "overrides": res.get("overrides", {}),
        "same": same,
        "similar": {w: _pool(phases, "similar_", w) for w in ("no memory", "after")},
        "different": {w: _pool(phases, "different_", w) for w in ("no memory", "after")},
        "untaught": {w: _pool(phases, "untaught", w) for w in ("no memory", "after")},
        "retrieval_tokens_per_query": tokens,
        "gold_positions_first_pass": gold_positions(first["records"])
        if first["records"] and "memo" in first["records"][0]
        else None,
        "judges": res.get("judges"),
        "command": res.get("command"),
        "load_average_at_end": res.get("machine", {}).get("load_average"),
        "seconds": res.get("seconds"),
    }
    return out


def _f(x: Any, nd: int = 3) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def curve_rows(runs: list[dict]) -> str:
    head = (
        "| set | feedback | n | first pass R@2 / R@5 / R@10 | Same R@5 after turn 1 / 2 / 3 | "
        "Same R@2 / R@10 after 3 | Δ Same R@5 | Similar R@5 before → after (n) | "
        "Different R@5 before → after (n) | untaught R@5 before → after (n) | "
        "retrieval tokens/q | answer tokens/memorize |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in runs:
        s = r["same"]
        last = s[max(s)]
        first = s[0]
        turns = " / ".join(_f(s[t]["recall@5"]) if t in s else "–" for t in (1, 2, 3))

        def ba(d: dict) -> str:
            b, a = d["no memory"], d["after"]
            if not b:
                return "–"
            return f"{_f(b['recall@5'])} → {_f(a['recall@5']) if a else '–'} ({b['n']})"

        j = r.get("judges") or {}
        lines.append(
            f"| {r['dataset']} | {r['feedback']} | {r['questions']} | "
            f"{_f(first['recall@2'])} / {_f(first['recall@5'])} / {_f(first['recall@10'])} | "
            f"{turns} | {_f(last['recall@2'])} / {_f(last['recall@10'])} | "
            f"{last['recall@5'] - first['recall@5']:+.3f} | {ba(r['similar'])} | "
            f"{ba(r['different'])} | {ba(r['untaught'])} | "
            f"{_f(max(v or 0 for v in r['retrieval_tokens_per_query'].values()), 0)} | "
            f"{_f(j.get('answer_tokens_per_memorize'), 0)} |"
        )
    return "\n".join(lines) + "\n"


def judge_rows(runs: list[dict]) -> str:
    head = (
        "| set | run | judge | events | picks/event | precision | recall | recall of read "
        "gold | no pick | gold not read | a non-gold pick |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    names = {
        "written": "what memorize wrote",
        "citations_as_given": "citations as the reader wrote them",
        "citations": "citations memorize used (not ignored)",
        "fallback": "similarity (fallback: cited none)",
        "llm_filter": "LLM filter (probed, not written)",
        "citations_on_probed": "citations on the probed questions",
    }
    for r in runs:
        for key, label in names.items():
            s = (r.get("judges") or {}).get(key)
            if not s or not s["events"]:
                continue
            if key == "written" and r["feedback"] == "none-enhance":
                label = "similarity (self_memorize=enhance)"
            elif key == "written" and r["feedback"].startswith("none-"):
                label = f"self_memorize={r['feedback'][5:]}"
            lines.append(
                f"| {r['dataset']} | {r['feedback']} | {label} | {s['events']} | "
                f"{_f(s['picks_per_event'], 2)} | {_f(s['precision'])} | {_f(s['recall'])} | "
                f"{_f(s['recall_of_read_gold'])} | {s['no_pick']} | {s['gold_not_read']} | "
                f"{s['non_gold_pick']} |"
            )
    return "\n".join(lines) + "\n"


def failure_rows(runs: list[dict]) -> str:
    """First pass of each citing run: where the gold sits and what the citations did."""
    head = (
        "| set | feedback | n | gold chunks: top 5 / 6–10 / not in top 10 | cited nothing "
        "(yes / no answer) | every citation ignored | a non-gold chunk cited | a top-10 gold "
        "chunk not cited | gold at 6–10 cited / of those ignored | gold at 6–10 picked → in "
        "the top 5 after 3 turns |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in runs:
        c, g = r.get("first_pass_citing"), r.get("gold_positions_first_pass")
        if not c or not g:
            continue
        m = (r.get("judges") or {}).get("rank_moves") or {}
        lines.append(
            f"| {r['dataset']} | {r['feedback']} | {c['events']} | {g['top5']} / "
            f"{g['rank_6_10']} / {g['not_retrieved']} | {c['cited_none']} "
            f"({c['yes_no_answer']}) | {c['all_citations_ignored']} | {c['non_gold_cited']} | "
            f"{c['top10_gold_not_cited']} | {c['gold_rank_6_10_cited']} / "
            f"{c['gold_rank_6_10_cited_ignored']} | {m.get('picked_gold_rank_6_10', 0)} → "
            f"{m.get('now_top5', 0)} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "files",
        nargs="+",
        help="full result files of bench curve, with records (benchmarks/results/raw/*.json)",
    )
    p.add_argument("--data", default="../shared/datasets")
    p.add_argument("--out", default=None, help="the small JSON summary")
    args = p.parse_args()
    runs = []
    for f in args.files:
        res = json.loads(Path(f).read_text(encoding="utf-8"))
        memos = [r["memo"] for p in res["phases"] for r in p.get("records", []) if r.get("memo")]
        for m in memos:
            if "judge" in m:  # what memorize used, from its own ignored_citations
                used_citations(m, m.get("answer"))
        if memos:
            res["judges"] = judge_summary(res)  # this code's judge table on older files too
        run = summarize_run(res)
        first = next(p for p in res["phases"] if p["phase"] == "same, turn 0")["records"]
        if run["judges"] and "cite_rate" in run["judges"]:
            qfile = Path(args.data) / f"{res['dataset']}.questions.jsonl"
            answers = {}
            with open(qfile, encoding="utf-8") as fh:
                for line in fh:
                    q = json.loads(line)
                    answers[q["qid"]] = q["answers"]
            run["first_pass_citing"] = citing_failures(first, answers)
        runs.append(run)
    print(curve_rows(runs))
    print(judge_rows(runs))
    print(failure_rows(runs))
    for r in runs:
        extra = {k: r[k] for k in ("gold_positions_first_pass", "first_pass_citing") if r.get(k)}
        moves = (r.get("judges") or {}).get("rank_moves")
        print(f"{r['dataset']} {r['feedback']} ({r['questions']} q): {extra} moves={moves}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"runs": runs}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
