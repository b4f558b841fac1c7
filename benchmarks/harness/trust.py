"""Memory users can count on, measured (pooled, zero-token, no LLM):

1. **taught means found**: a graph over the first ``n`` questions' own passages; the first
   half is taught its gold documents (``ReMindRAG.teach``); recall@k of the taught questions,
   their paraphrases (``similar_*`` variants) and the untaught half, before and after;
2. **edits keep memory**: every taught document is re-inserted with one sentence appended
   (same document id); remembered edges and taught recall before and after.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from statistics import mean
from typing import Any

from remindrag_integrations.core.types import Document

from .data import Dataset
from .memory_bench import teach_pairs
from .resources import CachedEmbedder
from .runner import Bench, remindrag_query

Progress = Callable[[str], None]
EDIT_SENTENCE = " This passage was reviewed by the editors."


def pooled_subset(ds: Dataset, n: int) -> Dataset:
    """The first ``n`` questions over a corpus of their own candidate passages only."""
    qs = ds.questions[:n]
    pids = dict.fromkeys(p for q in qs for p in (q.get("context_pids") or q["gold_pids"]))
    keep = {q["qid"] for q in qs}
    corpus = {p: ds.corpus[p] for p in pids if p in ds.corpus}
    variants = [v for v in ds.variants if v["qid"] in keep]
    return Dataset(f"{ds.name}[:{n}]", qs, corpus, variants)


def _recall(bench: Bench, items: list[dict], k: int) -> dict[str, Any]:
    recs = [remindrag_query(bench, it, k) for it in items]
    missed = [r["qid"] for r in recs if r["recall@5"] < 1.0]
    return {
        "n": len(recs),
        "recall@5": mean(r["recall@5"] for r in recs) if recs else float("nan"),
        "recall@2": mean(r["recall@2"] for r in recs) if recs else float("nan"),
        "replay_share": mean(r["replay_only"] for r in recs) if recs else float("nan"),
        "missed": missed,
    }


def remembered_edges(bench: Bench) -> int:
    """Edges whose memory vector is non-zero."""
    store = bench.unique_kbs()[0].engine.store
    return int(sum(1 for v in store.export_memory().values() if any(v)))


def run_trust(
    ds: Dataset,
    embedder: CachedEmbedder,
    n: int = 60,
    k: int = 10,
    progress: Progress = lambda s: None,
) -> dict[str, Any]:
    sub = pooled_subset(ds, n)
    bench = Bench(sub, "pooled", "none", embedder, progress)
    engine = bench.unique_kbs()[0].engine
    half = len(sub.questions) // 2
    taught, untaught = sub.questions[:half], sub.questions[half:]
    taught_ids = {q["qid"] for q in taught}
    para = [
        v for v in sub.variants if v["variant"].startswith("similar") and v["qid"] in taught_ids
    ]
    sets = {"taught": taught, "paraphrases": para, "untaught": untaught}
    before = {name: _recall(bench, items, k) for name, items in sets.items()}
    progress(f"teaching {len(taught)} pairs")
    report = engine.teach(teach_pairs(taught))
    after = {name: _recall(bench, items, k) for name, items in sets.items()}
    edges_before = remembered_edges(bench)
    docs = list(dict.fromkeys(p for q in taught for p in q["gold_pids"]))
    progress(f"editing {len(docs)} taught documents")
    edited = [sub.document(p) for p in docs]
    edited = [Document(d.id, d.text + EDIT_SENTENCE, d.metadata) for d in edited]
    engine.insert(edited)
    stats = engine.memory_stats()
    edges_after = remembered_edges(bench)
    after_edit = {"taught": _recall(bench, taught, k), "paraphrases": _recall(bench, para, k)}
    return {
        "kind": "memory_trust",
        "dataset": sub.name,
        "questions": len(sub.questions),
        "passages": len(sub.corpus),
        "k": k,
        "teach": {
            "pairs": report.pairs,
            "taught": report.taught,
            "unreachable": sum(len(r.unreachable) for r in report.results),
            "summary": report.summary(),
        },
        "before": before,
        "after_teach": after,
        "edit": {
            "documents": len(docs),
            "remembered_edges_before": edges_before,
            "remembered_edges_after": edges_after,
            "kept_share": edges_after / edges_before if edges_before else float("nan"),
            "memory_stats": dataclasses.asdict(stats),
        },
        "after_edit": after_edit,
    }


def table(result: dict[str, Any]) -> str:
    rows = [
        f"{result['dataset']}: {result['questions']} questions, {result['passages']} passages",
        "| set | n | R@5 before | R@5 taught | R@5 after edit | replay share |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("taught", "paraphrases", "untaught"):
        b, a = result["before"][name], result["after_teach"][name]
        e = result["after_edit"].get(name)
        edit = f"{e['recall@5']:.3f}" if e else "-"
        rows.append(
            f"| {name} | {b['n']} | {b['recall@5']:.3f} | {a['recall@5']:.3f} | {edit} "
            f"| {a['replay_share']:.2f} |"
        )
    ed = result["edit"]
    rows.append(
        f"remembered edges {ed['remembered_edges_before']} -> {ed['remembered_edges_after']} "
        f"({ed['kept_share']:.2f} kept) after editing {ed['documents']} documents"
    )
    rows.append(result["teach"]["summary"].splitlines()[0])
    return "\n".join(rows)


def _reword_at(text: str, starts: list[int]) -> str:
    """The text with the first sentence after each offset reworded (a word inserted)."""
    for at in sorted(set(starts), reverse=True):
        cut = text.find(". ", at)
        if cut >= 0:
            text = text[: cut + 2] + "Notably, " + text[cut + 2 :]
    return text


def run_long_edit(
    ds: Dataset, embedder: CachedEmbedder, k: int = 10, progress: Progress = lambda s: None
) -> dict[str, Any]:
    """Long documents: teach half of the questions the chunk that best covers their evidence,
    then reword one sentence in every taught chunk and re-insert the documents: how much of
    the memory is kept (unchanged chunks), moved (edited chunks, and those whose boundaries
    shifted) and dropped, and the taught questions' evidence recall@5."""
    from .metrics import evidence_recall

    bench = Bench(ds, "pooled", "none", embedder, progress)
    kb = bench.unique_kbs()[0]
    engine = kb.engine
    half = [q for q in ds.questions if q.get("gold_sentences")][: len(ds.questions) // 2]
    stored = [c for d in engine.store.document_ids() for c in engine.store.document_chunks(d)]

    def best(q: dict) -> str:
        return max(stored, key=lambda c: evidence_recall([c.text], q["gold_sentences"])).id

    def ev5() -> float:
        out = []
        for q in half:
            r = engine.retrieve(q["question"], k=k)
            out.append(evidence_recall([rc.chunk.text for rc in r.chunks[:5]], q["gold_sentences"]))
        return mean(out)

    before = ev5()
    targets = {q["qid"]: best(q) for q in half}
    report = engine.teach(
        [{"question": q["question"], "chunk_ids": [targets[q["qid"]]]} for q in half]
    )
    taught = ev5()
    edges = remembered_edges(bench)
    chunk = {c.id: c for c in stored}
    edited = [
        Document(
            d.id,
            _reword_at(
                d.text, [chunk[t].start for t in targets.values() if chunk[t].doc_id == d.id]
            ),
            d.metadata,
        )
        for d in ds.documents()
    ]
    done = engine.insert(edited)
    return {
        "kind": "memory_trust_long",
        "dataset": ds.name,
        "documents": len(ds.corpus),
        "chunks": len(stored),
        "taught_pairs": report.taught,
        "pairs": report.pairs,
        "evidence@5": {"before": before, "taught": taught, "after_edit": ev5()},
        "remembered_edges_before": edges,
        "remembered_edges_after": remembered_edges(bench),
        "index_report_memory": dict(done.memory),
    }
