"""The demo behind ``make demo``: memory replay at work on a small packaged corpus.

Indexes 50 HotpotQA passages (CC BY-SA 4.0, see ``data/LICENSE.md``), asks five questions,
memorizes each traversal (where round 1 missed a gold passage, a user's thumbs-up on the right
passages instead), asks again and prints what changed: gold passages found, answers, and the
traversal decisions (LLM calls, when an LLM is used) each round took. Zero-token mode on the
packaged embedder by default: no API key, no network.

    python -m remindrag_integrations.demo [--llm SPEC] [--questions N] [--store DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..core.types import Document


def load_demo_data() -> tuple[list[Document], list[dict[str, Any]]]:
    """(documents, questions) shipped in ``remindrag_integrations/data``."""
    data = files("remindrag_integrations") / "data"
    rows = [json.loads(x) for x in (data / "demo_corpus.jsonl").read_text("utf-8").splitlines()]
    docs = [Document(r["id"], f"{r['title']}\n{r['text']}", {"title": r["title"]}) for r in rows]
    questions = [
        json.loads(x) for x in (data / "demo_questions.jsonl").read_text("utf-8").splitlines()
    ]
    return docs, questions


@dataclass(frozen=True)
class Round:
    """What one question cost in one round."""

    decisions: int
    llm_calls: int
    tokens: int
    replayed_edges: int
    gold_found: int
    gold_total: int
    answer: str = ""
    correct: bool = False
    in_passages: bool = False  # the gold answer is written in the returned passages


def ask(engine: Any, question: dict[str, Any], show: bool, llm: Any = None) -> tuple[Any, Round]:
    from .display import describe_path

    answer = engine.answer(question["question"], llm=llm)
    retrieval, trace = answer.retrieval, answer.retrieval.trace
    docs = [rc.chunk.doc_id for rc in retrieval.chunks]
    gold = question["gold_ids"]
    if show:
        print(f"\nQ: {question['question']}   (gold answer: {question['answers'][0]})")
        print(f"A: {answer.text}")
        for rc in retrieval.chunks:
            mark = "gold" if rc.chunk.doc_id in gold else "    "
            text = " ".join(rc.chunk.text.split())
            print(f"   {mark} [{rc.chunk.id}] {rc.chunk.doc_id}: {text[:90]}...")
        print("   path: " + " | ".join(describe_path(engine, trace)))
    costs = trace.costs
    return answer, Round(
        trace.decisions,
        costs.llm_calls["traversal"],
        costs.total_tokens,
        len(trace.replayed_edges),
        sum(g in docs for g in gold),
        len(gold),
        answer.text,
        any(_fold(a) in _fold(answer.text) for a in question["answers"]),
        any(
            _fold(a) in _fold(rc.chunk.text) for a in question["answers"] for rc in retrieval.chunks
        ),
    )


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def learn(engine: Any, question: dict[str, Any], answer: Any, r: Round, llm: Any) -> str:
    """After round 1: memorize the traversal, or, when a gold passage was missed, a user's
    thumbs-up on the right passages (bridged into memory even if the walk never saw them)."""
    from ..core.memory.teach import doc_chunks

    if r.gold_found < r.gold_total:
        gold = [c for d in question["gold_ids"] for c in doc_chunks(engine.store, d)]
        write = engine.feedback(answer.trace_id, helpful=True, chunk_ids=gold)
        how = "a user's thumbs-up on the gold passages"
    else:
        write = engine.memorize(answer.trace_id, answer.text, llm=llm)
        how = "memorized"
    if not write.applied:
        return f"   not memorized: {write.skipped_reason}"
    return f"   {how}: {len(write.enhanced)} edges enhanced, {len(write.penalised)} penalised"


def print_fixed(
    questions: Sequence[dict[str, Any]], r1: Sequence[Round], r2: Sequence[Round]
) -> None:
    """The questions memory fixed: more gold passages, or a right answer, in round 2."""
    fixed = [
        (q, a, b)
        for q, a, b in zip(questions, r1, r2)
        if b.gold_found > a.gold_found or b.correct > a.correct or b.in_passages > a.in_passages
    ]
    yes = {True: "yes", False: "no"}
    for q, a, b in fixed:
        print(
            f"\nfixed by memory: {q['question']!r}\n"
            f"   gold passages in the top 5: {a.gold_found}/{a.gold_total} -> "
            f"{b.gold_found}/{b.gold_total}\n"
            f"   the answer {q['answers'][0]!r} is in the returned passages: "
            f"{yes[a.in_passages]} -> {yes[b.in_passages]}\n"
            f"   answer, round 1 ({'right' if a.correct else 'wrong'}): {a.answer[:100]}\n"
            f"   answer, round 2 ({'right' if b.correct else 'wrong'}): {b.answer[:100]}"
        )
    if not fixed:
        print("\nno question changed its passages or answer between the rounds.")


def print_table(
    questions: Sequence[dict[str, Any]], r1: Sequence[Round], r2: Sequence[Round]
) -> None:
    print("\nMemory replay: traversal decisions per question (LLM calls when an LLM is used)")
    print(
        f"{'question':<52} {'round 1':>8} {'round 2':>8} {'replayed':>9} {'gold 1':>7} "
        f"{'gold 2':>7}"
    )
    for q, a, b in zip(questions, r1, r2):
        text = q["question"] if len(q["question"]) <= 50 else q["question"][:49] + "…"
        print(
            f"{text:<52} {a.decisions:>8} {b.decisions:>8} {b.replayed_edges:>9} "
            f"{a.gold_found:>4}/{a.gold_total} {b.gold_found:>4}/{b.gold_total}"
        )
    t1, t2 = sum(r.decisions for r in r1), sum(r.decisions for r in r2)
    print(f"{'total':<52} {t1:>8} {t2:>8}")
    if any(r.llm_calls for r in r1):
        c1, c2 = sum(r.llm_calls for r in r1), sum(r.llm_calls for r in r2)
        k1, k2 = sum(r.tokens for r in r1), sum(r.tokens for r in r2)
        print(f"LLM traversal calls: {c1} -> {c2}; tokens per round: {k1:,} -> {k2:,}")
    if t2 < t1:
        print(
            f"round 2 took {t2} traversal decisions instead of {t1} "
            f"({100.0 * (t1 - t2) / t1:.0f}% fewer): the memorized paths were replayed "
            "instead of searched."
        )
    else:
        print(f"memory did not cut the traversal here ({t1} -> {t2} decisions).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--llm",
        default="none",
        help="'none' (zero-token, default), 'local:smollm2', 'local:PATH.gguf' or 'provider:model'",
    )
    parser.add_argument("--questions", type=int, default=5, help="questions to ask (max 5)")
    parser.add_argument("--store", help="also save the demo store to this directory")
    parser.add_argument("--quiet", action="store_true", help="print only the table")
    parser.add_argument(
        "--cache", default=".remindrag-cache", help="LLM response cache directory (with --llm)"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not cache LLM replies")


def run(args: argparse.Namespace) -> int:
    from ..adapters.llm_specs import load_llm
    from ..engine import ReMindRAG
    from .display import progress_bar
    from .specs import cached

    docs, questions = load_demo_data()
    questions = questions[: max(1, args.questions)]
    mode = "zero-token mode (no LLM)" if args.llm == "none" else f"LLM {args.llm}"
    print(
        f"ReMindRAG demo: {len(docs)} HotpotQA passages (CC BY-SA 4.0), "
        f"{len(questions)} questions, {mode}, packaged all-MiniLM-L6-v2 embeddings"
    )
    llm = load_llm(args.llm)
    cache = None if args.no_cache else Path(args.cache)
    # the cache serves indexing only: a cached traversal reply would pass for memory at work
    engine = ReMindRAG(llm=cached(llm, args.llm, cache))
    report = engine.insert(docs, progress=progress_bar("indexing"))
    print(
        f"graph: {report.chunks} chunks, {report.entities_added} entities, "
        f"{report.relations} relations; {report.costs.total_calls} LLM calls"
    )

    rounds: list[list[Round]] = []
    for n in (1, 2):
        print(f"\n=== round {n} " + ("(fresh memory)" if n == 1 else "(after memorizing)"))
        results = []
        for q in questions:
            answer, r = ask(engine, q, show=not args.quiet, llm=llm)
            results.append(r)
            if n == 1:
                note = learn(engine, q, answer, r, llm)
                if not args.quiet:
                    print(note)
        rounds.append(results)
    print_table(questions, rounds[0], rounds[1])
    print_fixed(questions, rounds[0], rounds[1])
    if args.store:
        engine.save(Path(args.store))
        print(f"store saved to {args.store}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="remindrag demo", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
