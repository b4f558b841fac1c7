"""When should the LLM walk? (issue 25 item 2; RESULTS §9).

Three measures on per-question graphs (each question's own passages, zero-token indexing,
the packaged MiniLM, k = 5):

``bounds``: no LLM. Traversal tokens (counted) of an LLM walk by a scripted model that, like
Qwen2.5-1.5B, never says enough and takes the suggested choice, at the old and the current
walk defaults (and the knobs between), with the stop reasons; and whether the zero-token
top k moves with the bounds.

``signals``: no LLM. The zero-token first pass of every question with the certainty
signals of ``core/navigate/mode.py`` (the graph's pull beyond the top k, the margin at place
k, dense/fused agreement), and whether that first pass missed a gold passage: which signal
finds the questions where there is something left to find (ROC AUC per signal, and the share
of questions each threshold would send to the LLM).

``compare``: a real LLM. ``llm_navigation`` = never, always and auto on the same graph,
side by side: traversal tokens, LLM calls, recall@5, stop reasons, the auto decision and
whether the model's walk returned other passages than the zero-token one. Replies are kept
in ``--replies`` (a RecordedLLM fixture, saved after every new reply): a prompt already
there is replayed, so "auto" (whose walks, when it asks, are "always"'s walks) costs no
model time, and an interrupted run resumes.

    python benchmarks/llm_navigation.py bounds --data ../shared/datasets --limit 20
    python benchmarks/llm_navigation.py signals --data ../shared/datasets --limit 100
    python benchmarks/llm_navigation.py compare --data ../shared/datasets --limit 20 \\
        --llm local:qwen2.5-1.5b --replies /tmp/i25-llm-replies.json \\
        --out benchmarks/results/llm_navigation.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from remindrag_integrations import ReMindRAG
from remindrag_integrations.adapters.llm import as_chat_llm
from remindrag_integrations.adapters.llm_specs import load_llm
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.core.protocols import Completion
from remindrag_integrations.testing import RecordedLLM, RecordingLLM, ScriptedLLM, prompt_key

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import Dataset, load_dataset  # noqa: E402
from benchmarks.harness.real import recall  # noqa: E402
from benchmarks.harness.resources import make_embedder  # noqa: E402

SETS = ("hotpotqa_train100", "musique_train100")
MODES = ("never", "always", "auto")


class ReplayOrAsk:
    """Recorded replies first (the exact prompt, else the same ask reordered:
    :meth:`RecordedLLM.lookup`); a prompt not recorded goes to the model (loaded at the first
    such prompt) and is recorded, the file saved at once; ``keep_prompts`` keeps each new
    reply's prompt text beside it. ``used``: the key of every prompt this run sent, in order."""

    def __init__(self, path: Path, spec: str, keep_prompts: bool = False) -> None:
        self.path, self.spec, self.keep_prompts = path, spec, keep_prompts
        data = json.loads(path.read_text()) if path.exists() else {"model": spec, "replies": {}}
        self.recorded = RecordedLLM(data)
        self.recording: RecordingLLM | None = None
        self.asked = 0
        self.served = 0
        self.used: list[str] = []

    def complete(self, prompt: str) -> Completion:
        found = self.recorded.lookup(prompt)
        if found is not None:
            self.served += 1
            self.used.append(found[0])
            return self.recorded.serve(found[1])
        if self.recording is None:
            self.recording = RecordingLLM(as_chat_llm(load_llm(self.spec)), self.spec)
        c = self.recording.complete(prompt)
        key = prompt_key(prompt)
        self.used.append(key)
        self.asked += 1
        call = self.recording.calls[-1]
        print(f"    {call['stage']}: {c.prompt_tokens} tok, {call['seconds']:.1f} s", flush=True)
        entry = self.recording.fixture()["replies"][key]
        self.recorded.replies[key] = {**entry, "prompt": prompt} if self.keep_prompts else entry
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"model": self.spec, "replies": self.recorded.replies}))
        os.replace(tmp, self.path)
        return c

    async def acomplete(self, prompt: str) -> Completion:
        return self.complete(prompt)

    def fixture(self, **meta: Any) -> dict[str, Any]:
        """The replies this run used, in first use order, for a test to replay."""
        used = {k: self.recorded.replies[k] for k in dict.fromkeys(self.used)}
        return {"model": self.spec, **meta, "replies": used}


def engine_for(ds: Dataset, item: dict, embedder: Any, overrides: dict) -> ReMindRAG:
    cfg = RetrievalConfig(**{"llm_timeout": 1800.0, **overrides})
    engine = ReMindRAG(llm=None, embeddings=embedder, retrieval_config=cfg)
    engine.insert(ds.documents(item["context_pids"]))
    return engine


def auc(pos: list[float], neg: list[float]) -> float | None:
    """P(a positive scores higher than a negative), ties half."""
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def signals(args: argparse.Namespace) -> dict:
    emb = make_embedder(args.embedder)
    never_ask = ScriptedLLM(lambda p: '{"enough": true}')
    rows = []
    for name in args.sets:
        ds = load_dataset(name, args.data).head(args.limit)
        for item in ds.questions:
            eng = engine_for(ds, item, emb, {})
            q = item["question"]
            zero = eng.retrieve(q, k=args.k)
            # auto with a threshold of 1 asks only where the first pass has no graph signal
            r = eng.retrieve(q, k=args.k, llm=never_ask, navigator={"llm_threshold": 1.0})
            got = recall(item, ds.corpus, [c.chunk for c in zero.chunks], 5)
            rows.append({"set": name, "qid": item["qid"], "recall@5": got, **r.trace.navigation})
    missed = [r for r in rows if r["recall@5"] < 1.0]
    whole = [r for r in rows if r["recall@5"] >= 1.0]
    out: dict[str, Any] = {"questions": len(rows), "missed_gold": len(missed), "auc": {}}
    for key, sign in (("outside", 1), ("margin", -1), ("agreement", -1)):
        # AUC of "this question is unsure" (high pull, low margin, low agreement) for "the
        # first pass missed a gold passage"
        pos = [sign * r[key] for r in missed if r.get(key) is not None]
        neg = [sign * r[key] for r in whole if r.get(key) is not None]
        out["auc"][key] = auc(pos, neg)
    out["thresholds"] = []
    for t in (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5):
        asked = [r for r in rows if r.get("outside") is not None and r["outside"] > t]
        out["thresholds"].append(
            {
                "outside_above": t,
                "asked_share": len(asked) / len(rows),
                "missed_caught": sum(r["recall@5"] < 1.0 for r in asked) / max(1, len(missed)),
            }
        )
    by_set = {}
    for name in args.sets:
        part = [r for r in rows if r["set"] == name]
        miss = [r["outside"] for r in part if r["recall@5"] < 1 and r["outside"] is not None]
        ok = [r["outside"] for r in part if r["recall@5"] >= 1 and r["outside"] is not None]
        by_set[name] = {
            "questions": len(part),
            "missed_gold": len(miss),
            "auc_outside": auc(miss, ok),
        }
    out["by_set"] = by_set
    out["rows"] = rows
    print(f"{len(rows)} questions, first pass missed gold on {len(missed)}")
    print("ROC AUC of each signal for 'the first pass missed gold':", out["auc"], by_set)
    print("| outside above | asked | missed-gold questions asked |\n|---|---|---|")
    for t in out["thresholds"]:
        print(f"| {t['outside_above']} | {t['asked_share']:.2f} | {t['missed_caught']:.2f} |")
    return out


# the library's walk defaults before issue 25, and one knob at a time toward today's
OLD_DEFAULTS = {
    "max_hops": 10,
    "max_iterations": 20,
    "max_neighbors_shown": 30,
    "prompt": {"max_back_choices": 8, "chunk_chars": 600},
    "max_idle_decisions": 6,
    "max_traversal_tokens": 20_000,
}
BOUNDS = {
    "old defaults": OLD_DEFAULTS,
    "old, idle 3": {**OLD_DEFAULTS, "max_idle_decisions": 3},
    "old, idle 3, 10 shown": {**OLD_DEFAULTS, "max_idle_decisions": 3, "max_neighbors_shown": 10},
    "old, idle 3, 10 shown, 4 back, 400 chars": {
        **OLD_DEFAULTS,
        "max_idle_decisions": 3,
        "max_neighbors_shown": 10,
        "prompt": {"max_back_choices": 4, "chunk_chars": 400},
    },
    "defaults": {},
}


def _follower(prompt: str) -> str:
    """A model like Qwen2.5-1.5B in RESULTS §9: never says enough, takes the suggestion."""
    m = re.search(r"Suggested by [^:]+: (\d+)", prompt)
    return json.dumps({"enough": False, "go": int(m.group(1)) if m else 1})


def bounds(args: argparse.Namespace) -> dict:
    """Traversal tokens (counted) of an LLM walk that never stops itself, at each set of
    bounds; and whether the zero-token top k moved."""
    emb = make_embedder(args.embedder)
    runs: dict[str, list[dict]] = {name: [] for name in BOUNDS}
    for name in args.sets:
        ds = load_dataset(name, args.data).head(args.limit)
        for item in ds.questions:
            eng = engine_for(ds, item, emb, {})
            q = item["question"]
            zero = ids_of(eng.retrieve(q, k=args.k))
            for label, ov in BOUNDS.items():
                r = eng.retrieve(q, k=args.k, llm=ScriptedLLM(_follower), **ALWAYS, **ov)
                st = r.trace.costs.stages["traversal"]
                moved = ids_of(eng.retrieve(q, k=args.k, **ov)) != zero
                runs[label].append(
                    {
                        "tokens": st.tokens,
                        "calls": st.calls,
                        "moved": moved,
                        "stop": r.trace.stop_reason,
                    }
                )
    out = {}
    print("| bounds | tokens / query | max | calls | stop reasons | zero-token top k moved |")
    print("|---|---|---|---|---|---|")
    for label, rs in runs.items():
        stops: dict[str, int] = {}
        for x in rs:
            stops[x["stop"]] = stops.get(x["stop"], 0) + 1
        out[label] = {
            "tokens": sum(x["tokens"] for x in rs) / len(rs),
            "max_tokens": max(x["tokens"] for x in rs),
            "calls": sum(x["calls"] for x in rs) / len(rs),
            "stop_reasons": stops,
            "zero_token_moved": sum(x["moved"] for x in rs),
        }
        o = out[label]
        print(
            f"| {label} | {o['tokens']:,.0f} | {o['max_tokens']:,} | {o['calls']:.1f} | "
            f"{stops} | {o['zero_token_moved']} of {len(rs)} |"
        )
    return {"bounds": BOUNDS, "questions": len(runs["defaults"]), "summary": out}


def ids_of(r: Any) -> list[str]:
    return [c.chunk.id for c in r.chunks]


ALWAYS = {"llm_navigation": "always"}


def _arm(eng: ReMindRAG, item: dict, ds: Dataset, llm: ReplayOrAsk, k: int, mode: str) -> dict:
    asked0, t0 = llm.asked, time.perf_counter()
    r = eng.retrieve(item["question"], llm=llm, k=k, llm_navigation=mode)
    if r.trace.stop_reason.startswith("llm_error"):
        raise RuntimeError(f"{mode}: {r.trace.stop_reason}")
    st = r.trace.costs.stages.get("traversal")
    return {
        "recall@5": recall(item, ds.corpus, [c.chunk for c in r.chunks], 5),
        "chunks": [c.chunk.id for c in r.chunks],
        "tokens": st.tokens if st else 0,
        "calls": st.calls if st else 0,
        "model_calls": llm.asked - asked0,
        "stop_reason": r.trace.stop_reason,
        "decisions": r.trace.decisions,
        "navigation": r.trace.navigation,
        "seconds": time.perf_counter() - t0,
    }


def compare(args: argparse.Namespace) -> dict:
    emb = make_embedder(args.embedder)
    llm = ReplayOrAsk(Path(args.replies), args.llm)
    overrides = json.loads(args.overrides)
    sets = [load_dataset(name, args.data).head(args.limit) for name in args.sets]
    done = _rows(args.jsonl)
    rows = list(done.values())
    for i in range(args.limit):  # the sets in turn: a run cut short keeps both halves even
        for ds in sets:
            if i >= len(ds.questions) or ds.questions[i]["qid"] in done:
                continue
            item = ds.questions[i]
            print(f"{ds.name} {i + 1}: {item['question'][:70]}", flush=True)
            eng = engine_for(ds, item, emb, overrides)
            zero = eng.retrieve(item["question"], k=args.k)
            row: dict[str, Any] = {"set": ds.name, "qid": item["qid"], "question": item["question"]}
            row["zero_token"] = [c.chunk.id for c in zero.chunks]
            for mode in MODES:
                row[mode] = _arm(eng, item, ds, llm, args.k, mode)
            rows.append(row)
            if args.jsonl:
                with open(args.jsonl, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row, default=float) + "\n")
    if args.fixture:  # the replies this run used, for a test to replay
        fixture = llm.fixture(command=" ".join(sys.argv))
        Path(args.fixture).write_text(json.dumps(fixture, indent=1, sort_keys=True) + "\n")
    return {"overrides": overrides, "k": args.k, "summary": summarize(rows), "rows": rows}


def _rows(jsonl: str) -> dict[str, dict]:
    """Rows an earlier, interrupted run appended to ``jsonl``, by question id."""
    if not jsonl or not Path(jsonl).exists():
        return {}
    rows = [json.loads(line) for line in Path(jsonl).read_text().splitlines() if line]
    return {r["qid"]: r for r in rows}


def summarize(rows: list[dict]) -> dict:
    out: dict[str, Any] = {}
    for name in [*dict.fromkeys(r["set"] for r in rows), "all"]:
        part = [r for r in rows if name in ("all", r["set"])]
        s: dict[str, Any] = {"questions": len(part)}
        for mode in MODES:
            arms = [r[mode] for r in part]
            stops: dict[str, int] = {}
            for a in arms:
                stops[a["stop_reason"]] = stops.get(a["stop_reason"], 0) + 1
            s[mode] = {
                "recall@5": sum(a["recall@5"] for a in arms) / len(arms),
                "tokens": sum(a["tokens"] for a in arms) / len(arms),
                "max_tokens": max(a["tokens"] for a in arms),
                "calls": sum(a["calls"] for a in arms) / len(arms),
                "asked_llm": sum(bool(a["calls"]) for a in arms),
                "stop_reasons": stops,
            }
        always = s["always"]["tokens"]
        s["auto_token_share"] = s["auto"]["tokens"] / always if always else 0.0
        s["always_changed_result"] = [
            r["qid"] for r in part if set(r["always"]["chunks"]) != set(r["zero_token"])
        ]
        s["always_better"] = [
            r["qid"] for r in part if r["always"]["recall@5"] > r["never"]["recall@5"]
        ]
        s["always_worse"] = [
            r["qid"] for r in part if r["always"]["recall@5"] < r["never"]["recall@5"]
        ]
        out[name] = s
    return out


def print_table(summary: dict) -> None:
    print("| set | mode | recall@5 | traversal tokens / query | max | LLM calls / query |")
    print("|---|---|---|---|---|---|")
    for name, s in summary.items():
        for mode in MODES:
            m = s[mode]
            print(
                f"| {name} ({s['questions']} q) | {mode} | {m['recall@5']:.3f} | "
                f"{m['tokens']:,.0f} | {m['max_tokens']:,} | {m['calls']:.2f} |"
            )
    for name, s in summary.items():
        print(
            f"{name}: auto/always tokens {s['auto_token_share']:.1%}; LLM asked on "
            f"{s['auto']['asked_llm']}/{s['questions']}; always changed the top 5 on "
            f"{len(s['always_changed_result'])}, better on {s['always_better']}, worse on "
            f"{s['always_worse']}; stops always {s['always']['stop_reasons']}"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("signals", "compare", "bounds"))
    ap.add_argument("--data", default="../shared/datasets")
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--llm", default="local:qwen2.5-1.5b")
    ap.add_argument("--replies", default="/tmp/i25-llm-replies.json")
    ap.add_argument("--overrides", default="{}", help="JSON of RetrievalConfig fields")
    ap.add_argument("--out", default="")
    ap.add_argument("--jsonl", default="", help="compare: append each question's row here")
    ap.add_argument("--fixture", default="", help="compare: save the replies it used here")
    args = ap.parse_args(argv)
    result = {"signals": signals, "compare": compare, "bounds": bounds}[args.what](args)
    if args.what == "compare":
        print_table(result["summary"])
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, default=float))
        print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
