"""Is the repeat of an answered question served by memory? (issue 33 item 10).

A real model at the library's defaults, on each question's own graph (its context passages,
zero-token indexing, the packaged MiniLM, k = 5), as an app runs it:

    r = rag.retrieve(q, llm=model)
    ans = rag.answer(q, llm=model)
    rag.memorize(ans.trace_id, answer=ans.text, llm=model)
    again = rag.retrieve(q, llm=model)        # traversal tokens 0 and stop "replay"?

Printed per question: the traversal prompt tokens of the first pass and of the repeat, the
auto-navigation decisions, the answer, the memory write (what supported it, or why nothing
was written) and the repeat's stop reason. Replies are kept in ``--replies`` (saved after
every new reply, with their prompts): a prompt already there is replayed, so a rerun costs no
model time and an interrupted run resumes. ``--fixture`` saves the replies this run used, for
a test to replay (tests/test_recorded_qwen_memory.py).

    nice python benchmarks/memory_repeat.py --data tests/data --set hotpotqa_train100_sample \\
        --limit 7 --llm local:qwen2.5-1.5b --replies /tmp/i33-replies.json \\
        --fixture tests/data/qwen2.5-1.5b_memory_replies.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from remindrag_integrations import ReMindRAG
from remindrag_integrations.core.config import RetrievalConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llm_navigation import ReplayOrAsk  # noqa: E402  (replay, else ask the model and record)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import load_dataset  # noqa: E402
from benchmarks.harness.resources import make_embedder  # noqa: E402


def traversal_tokens(r: Any) -> int:
    st = r.trace.costs.stages.get("traversal")
    return st.prompt_tokens if st else 0


def memorize_calls(rag: ReMindRAG, trace_id: str) -> int:
    st = rag.trace(trace_id).costs.stages.get("memorize")
    return st.calls if st else 0


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    ds = load_dataset(args.set, Path(args.data)).head(args.limit)
    emb = make_embedder(args.embedder)
    llm = ReplayOrAsk(Path(args.replies), args.llm, keep_prompts=True)
    rows = []
    for item in ds.questions:
        cfg = RetrievalConfig(llm_timeout=1800.0)  # a slow local model on a busy machine
        rag = ReMindRAG(llm=None, embeddings=emb, retrieval_config=cfg)
        rag.insert(ds.documents(item["context_pids"]))
        q = item["question"]
        print(q, flush=True)
        first = rag.retrieve(q, llm=llm)
        ans = rag.answer(q, llm=llm)
        write = rag.memorize(ans.trace_id, answer=ans.text, llm=llm)
        again = rag.retrieve(q, llm=llm)
        row = {
            "qid": item["qid"],
            "question": q,
            "gold": item["answers"],
            "first_tokens": traversal_tokens(first),
            "first_navigation": first.trace.navigation.get("reason"),
            "answer": ans.text,
            "answer_tokens": traversal_tokens(ans.retrieval),
            "applied": write.applied,
            "supporting": write.supporting_chunks,
            "skipped_reason": write.skipped_reason,
            "memorize_calls": memorize_calls(rag, ans.trace_id),
            "repeat_tokens": traversal_tokens(again),
            "repeat_stop": again.trace.stop_reason,
            "repeat_navigation": again.trace.navigation.get("reason"),
        }
        print(json.dumps(row, indent=1), flush=True)
        rows.append(row)
    if args.fixture:  # the replies this run used, for a test to replay
        fixture = llm.fixture(command=" ".join(sys.argv))
        Path(args.fixture).write_text(json.dumps(fixture, indent=1) + "\n")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/datasets")
    ap.add_argument("--set", default="hotpotqa_train100")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--llm", default="local:qwen2.5-1.5b")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--replies", default="/tmp/i33-memory-replies.json")
    ap.add_argument("--fixture", default="")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rows = run(args)
    summary = {
        "first_tokens": sum(r["first_tokens"] for r in rows),
        "repeat_tokens": sum(r["repeat_tokens"] for r in rows),
        "repeat_replay": sum(r["repeat_stop"] == "replay" for r in rows),
        "questions": len(rows),
    }
    print(json.dumps(summary))
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
