"""Protocols for what memory learns (pooled setting, zero-token retrieval):

- :func:`run_teach`: ask, teach every question its gold passages (``ReMindRAG.teach``, no
  LLM), ask again: the taught questions, their variants, and optionally the questions of
  another set indexed into the same graph (never taught: "different" questions);
- :func:`run_sequence`: memorize 100 questions, then 100 more on the same graph, and re-ask
  the first 100: does what was learned first survive (paper Table 3, in a longer sequence)?

Both write results shaped like the learning curve (``kind`` ``learning_curve``), so
``report`` renders them with the same table.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from .data import Dataset
from .resources import CachedEmbedder
from .runner import VARIANT_KINDS, Bench, _phase, indexing_summary

Progress = Callable[[str], None]


def merged(ds: Dataset, other: Dataset) -> Dataset:
    """One dataset over both corpora (questions of both; variants of ``ds`` only)."""
    return Dataset(
        f"{ds.name}+{other.name}",
        [*ds.questions, *other.questions],
        {**ds.corpus, **other.corpus},
        list(ds.variants),
    )


def subquestions(ds: Dataset, n: int) -> list[dict[str, Any]]:
    """The first ``n`` single-hop sub-questions of MuSiQue decompositions, in question order,
    ``#k`` replaced by the answer of sub-question k (so each is a self-contained question
    with one gold passage). Deterministic and LLM-free."""
    out: list[dict[str, Any]] = []
    for q in ds.questions:
        steps = q.get("extra", {}).get("decomposition", [])
        for j, d in enumerate(steps):
            text = _resolve_refs(d["question"], steps)
            if d.get("gold_pid") in ds.corpus and len(out) < n:
                out.append(
                    {
                        "qid": f"{q['qid']}/sub{j + 1}",
                        "question": " ".join(text.split()),
                        "answers": [d.get("answer", "")],
                        "gold_pids": [d["gold_pid"]],
                    }
                )
    return out


def _resolve_refs(question: str, steps: Sequence[dict]) -> str:
    """``#k`` in a MuSiQue sub-question replaced by the answer of sub-question k."""

    def answer(m: re.Match[str]) -> str:
        k = int(m.group(1))
        return str(steps[k - 1].get("answer", "")) if 0 < k <= len(steps) else ""

    return re.sub(r"#(\d+)", answer, question)


def teach_pairs(items: Sequence[dict]) -> list[dict[str, Any]]:
    """Each question with its gold passages, named by document id (the corpus ``pid``)."""
    return [{"question": q["question"], "doc_ids": list(q["gold_pids"])} for q in items]


def _variants(ds: Dataset) -> list[tuple[str, list[dict]]]:
    kinds = [v for v in VARIANT_KINDS if any(x["variant"] == v for x in ds.variants)]
    return [(kind, [v for v in ds.variants if v["variant"] == kind]) for kind in kinds]


def run_teach(
    ds: Dataset,
    embedder: CachedEmbedder,
    k: int = 10,
    other: Dataset | None = None,
    progress: Progress = lambda s: None,
) -> dict[str, Any]:
    """Ask (no memory) → teach ``ds``'s questions their gold passages → ask again."""
    full = merged(ds, other) if other is not None else ds
    bench = Bench(full, "pooled", "none", embedder, progress)
    sets = [("same", ds.questions), *_variants(ds)]
    if other is not None:
        sets.append((f"{other.name} (never taught)", other.questions))
    phases = [_phase(bench, items, k, None, f"{n} (no memory)", progress) for n, items in sets]
    engine = bench.unique_kbs()[0].engine
    progress(f"teaching {len(ds.questions)} pairs")
    t0 = time.perf_counter()
    report = engine.teach(teach_pairs(ds.questions))
    seconds = time.perf_counter() - t0
    phases += [_phase(bench, items, k, None, f"{n} (taught)", progress) for n, items in sets]
    chunks = sum(len(r.chunks) for r in report.results)
    return {
        "kind": "learning_curve",
        "title": f"**{full.name}**, pooled, LLM `none`, taught {report.pairs} "
        f"{ds.name} pairs (gold passages by document id)",
        "dataset": full.name,
        "setting": "pooled",
        "llm": "none",
        "feedback": "teach",
        "turns": 1,
        "questions": len(ds.questions),
        "k": k,
        "teach": {
            "pairs": report.pairs,
            "taught": report.taught,
            "passages": chunks,
            "reached": sum(len(r.reached) for r in report.results),
            "unreachable": sum(len(r.unreachable) for r in report.results),
            "not_found": sum(len(r.not_found) for r in report.results),
            "seconds": seconds,
        },
        "phases": phases,
        "alternating": [],
        "indexing": indexing_summary(bench),
    }


def run_sequence(
    ds: Dataset,
    embedder: CachedEmbedder,
    k: int = 10,
    feedback: str = "gold",
    second: int = 100,
    progress: Progress = lambda s: None,
) -> dict[str, Any]:
    """Memorize the questions, re-ask them; memorize ``second`` sub-questions (see
    :func:`subquestions`) on the same graph; re-ask both sets."""
    bench = Bench(ds, "pooled", "none", embedder, progress)
    kb = bench.unique_kbs()[0]
    later = subquestions(ds, second)
    for item in later:
        bench.kbs[item["qid"]] = kb
    first = ds.questions
    phases = [
        _phase(bench, first, k, feedback, "first set: ask + memorize", progress),
        _phase(bench, first, k, None, "first set after itself", progress),
        _phase(bench, later, k, feedback, "second set: ask + memorize", progress),
        _phase(bench, first, k, None, "first set after both", progress),
        _phase(bench, later, k, None, "second set after both", progress),
    ]
    replayed = [r["replayed_edges"] for p in phases for r in p["records"]]
    return {
        "kind": "learning_curve",
        "title": f"**{ds.name}**, pooled, LLM `none`, feedback `{feedback}`: "
        f"{len(first)} questions, then {len(later)} sub-questions, memorized in sequence",
        "dataset": ds.name,
        "setting": "pooled",
        "llm": "none",
        "feedback": feedback,
        "turns": 1,
        "questions": len(first) + len(later),
        "k": k,
        "max_replayed_edges": max(replayed, default=0),
        "phases": phases,
        "alternating": [],
        "indexing": indexing_summary(bench),
    }
