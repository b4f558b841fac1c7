"""What real apps send (issue 33), measured as an app runs it: documents split by the
frameworks' own splitters, edited and re-added, off-corpus questions, a noisy reader, and
``memorize(answer=...)`` after every answer, with no LLM anywhere.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/app_shapes.py --data ../shared/datasets \\
        --label before --out benchmarks/results/app_shapes_before.json

Only the public API: ``ReMindRetriever.from_documents(pieces)`` with the packaged embedder
(``embeddings=None``; ``--embedder hash`` is for the smoke test), ``add_documents`` of an
edited document's new pieces, LangChain's ``invoke`` / LlamaIndex's ``retrieve``,
``memorize(trace_id, answer=...)`` and ``memory_stats()``. Per dev set (``--sets``; each with
the set whose questions are its off-corpus traffic) and per splitter arm:

- **corpus**: the first ``--n`` questions' gold passages (their variants' too), filled up to
  ``--passages`` with their other candidate passages; each passage a document (title line
  above the text) split by LangChain's ``RecursiveCharacterTextSplitter`` (``source`` =
  the pid, ``add_start_index=True``) or a LlamaIndex ``IngestionPipeline([SentenceSplitter])``
  (``Document(id_=pid, metadata={"file_path": pid})``);
- **before**: recall@5 of Same (the questions), Similar (``similar_*`` variants) and Different
  (``different_*``) on the fresh graph, read only;
- **three rounds** (``--rounds``): a seeded third of the documents is edited (a sentence
  inserted at a sentence boundary and one appended; some grow by a piece, some non-gold ones
  are cut to fewer pieces, so piece counts change every round) and the edited documents' new
  pieces are added with ``add_documents``; then the traffic: every question plus 20 % of
  off-corpus questions (another set's), in a seeded order, each retrieved (k = ``--k``),
  answered by the reader, and memorized with the answer;
- **readers** (one graph each, same edits and traffic): ``noisy`` answers with citations of
  the retrieved pieces of the gold passages 60 % of the time, says "I don't know" (three
  common phrasings) 20 % and gives another question's answer (no citation) 20 % (an exact
  seeded share per round); ``correct`` answers with the citations every time. A reader that
  has no gold piece in its context (off-corpus questions always) gives the answer uncited;
- **after**: Same / Similar / Different recall@5 again, read only; the share of the correct
  reader's Same gain the noisy reader keeps;
- **stale**: a returned passage holding a word 5-gram of a superseded version of its
  document that the current version lacks (counted over every retrieval, per round);
  **duplicates**: a passage whose text an earlier passage of the same result already had;
- **memory writes**: memorize calls that wrote (``MemoryWrite.applied`` with an enhanced,
  penalised or linked edge; ``memory_stats().writes_applied`` counted beside), by what caused
  them: an off-corpus question, an abstaining answer, another question's answer, a cited one;
- **abstain option**: when ``RetrievalConfig`` has ``min_score`` (``--min-score``, else the
  value the library documents, else skipped), at the end of the noisy arm: the share of
  off-corpus questions returning no passage, the memory writes their memorize makes, and
  Same / Similar / Different recall@5 with it on against off (per-call ``invoke(q,
  min_score=...)``).

- **turn shapes** (issue 46; last, on the noisy arm: they write): ``hedge``: every question
  answered with a hedge, a partial refusal or a guess that cites its gold pieces ("Maybe
  <answer>? [c-…]", "Probably <answer> [c-…], but I'm guessing.", "I think it is <answer>
  [c-…].", "The passages mention <answer> [c-…] but not the rest."); ``cited_off_topic``:
  every off-corpus question answered from the model's own knowledge, citing the top piece,
  three turns each; ``agent_loop``: a LangChain tool-calling loop (a fake chat model binding
  the retriever tool, ``ReMindMemoryCallback`` on every call) whose model call fails after
  the tool ran for one question, then answers the next question citing its gold pieces
  (a question whose gold passage the failed search returned, where there is one). Writes from the hedges, the cited off-topic answers and the failed turns
  should be 0; the answered agent turns still write;

Prints a table and writes a small JSON summary; every memorize event (cause, answer, whether
it wrote, what it took as support) goes to ``raw/<name>`` beside it (git ignores it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remindrag_integrations import ReMindRetriever
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.errors import ReMindError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import Dataset, load_dataset  # noqa: E402
from benchmarks.harness.resources import machine  # noqa: E402
from benchmarks.harness.results import write_result  # noqa: E402

Log = Callable[[str], None]
SPLITTERS = ("langchain", "llamaindex")
READERS = ("noisy", "correct")
ABSTAIN = (
    "I don't know.",
    "I don't know the answer based on the provided context.",
    "The context does not contain this information.",
)
DEFAULT_SETS = "musique_train100:hotpotqa_train100,2wiki_dev64:hotpotqa_train100"
_WORD = re.compile(r"\w+")
_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


# --- the corpus and its questions ----------------------------------------------------------
@dataclass
class Workload:
    """One set's pooled corpus (pid -> text), its questions and variants, its off-corpus
    questions, and the pids no question needs (the ones an edit may cut)."""

    name: str
    off_name: str
    texts: dict[str, str]
    same: list[dict[str, Any]]
    similar: list[dict[str, Any]]
    different: list[dict[str, Any]]
    off: list[dict[str, Any]]
    needed: set[str]


def workload(ds: Dataset, off: Dataset, n: int, passages: int, off_n: int) -> Workload:
    """The first ``n`` questions over their gold passages (and their variants'), filled with
    their other candidate passages in turn up to ``passages``; ``off_n`` questions of ``off``
    whose gold passages this corpus lacks."""
    qs = ds.questions[:n]
    keep = {q["qid"] for q in qs}
    variants = [v for v in ds.variants if v["qid"] in keep]
    needed = [p for q in qs for p in q["gold_pids"]] + [p for v in variants for p in v["gold_pids"]]
    pids = dict.fromkeys(p for p in needed if p in ds.corpus)
    pools = [[p for p in (q.get("context_pids") or []) if p in ds.corpus] for q in qs]
    depth = 0
    while len(pids) < passages and any(depth < len(pool) for pool in pools):
        for pool in pools:
            if depth < len(pool) and len(pids) < passages:
                pids.setdefault(pool[depth])
        depth += 1
    texts = {p: ds.document(p).text for p in pids}
    off_qs = [q for q in off.questions if not set(q["gold_pids"]) & set(texts)][:off_n]
    return Workload(
        ds.name,
        off.name,
        texts,
        [q for q in qs if set(q["gold_pids"]) <= set(texts)],
        [v for v in variants if v["variant"].startswith("similar")],
        [v for v in variants if v["variant"].startswith("different")],
        off_qs,
        set(needed),
    )


# --- the two splitters ---------------------------------------------------------------------
class Splitter:
    """A framework's splitter: a document (pid, text) as the pieces an app adds."""

    name: str

    def split(self, pid: str, text: str) -> list[Any]:
        raise NotImplementedError

    @staticmethod
    def texts(pieces: Sequence[Any]) -> list[str]:
        raise NotImplementedError


class LangChainSplitter(Splitter):
    name = "langchain"

    def __init__(self, size: int, overlap: int) -> None:
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        self.inner = RecursiveCharacterTextSplitter(
            chunk_size=size, chunk_overlap=overlap, add_start_index=True
        )

    def split(self, pid: str, text: str) -> list[Any]:
        from langchain_core.documents import Document

        doc = Document(page_content=text, metadata={"source": pid})
        return self.inner.split_documents([doc])

    @staticmethod
    def texts(pieces: Sequence[Any]) -> list[str]:
        return [p.page_content for p in pieces]


class LlamaIndexSplitter(Splitter):
    name = "llamaindex"

    def __init__(self, size: int, overlap: int) -> None:
        from llama_index.core.ingestion import IngestionPipeline
        from llama_index.core.node_parser import SentenceSplitter

        self.pipeline = IngestionPipeline(
            transformations=[SentenceSplitter(chunk_size=size, chunk_overlap=overlap)]
        )

    def split(self, pid: str, text: str) -> list[Any]:
        from llama_index.core import Document

        doc = Document(text=text, id_=pid, metadata={"file_path": pid})
        return list(self.pipeline.run(documents=[doc]))

    @staticmethod
    def texts(pieces: Sequence[Any]) -> list[str]:
        return [p.get_content() for p in pieces]


# --- edits -----------------------------------------------------------------------------------
def grams(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    if len(words) < n:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def revision(rnd: int, i: int) -> str:
    """A neutral sentence (no proper name: the zero-token extractor finds no entity in it)."""
    return f"It was reviewed again in revision {rnd}.{i}, and its sources were checked."


def edit_text(text: str, rnd: int, how: str, rng: random.Random, grow_chars: int) -> str:
    """``text`` with a revision sentence inserted at a random sentence boundary and one
    appended; ``grow``: sentences appended past ``grow_chars``; ``shrink``: cut at the last
    sentence boundary before 45 % of its length (at least its first sentence kept)."""
    if how == "shrink":
        cuts = [m.start() for m in _BOUNDARY.finditer(text) if m.start() <= 0.45 * len(text)]
        text = text[: cuts[-1]] if cuts else text[: max(1, len(text) // 2)]
    spots = [m.end() for m in _BOUNDARY.finditer(text)]
    at = rng.choice(spots) if spots else (text.find("\n") + 1 or len(text))
    text = f"{text[:at]}{revision(rnd, 0)} {text[at:]}".rstrip()
    extra = [revision(rnd, 1)]
    while how == "grow" and sum(len(s) + 1 for s in extra) < grow_chars:
        extra.append(revision(rnd, len(extra) + 1))
    return f"{text} {' '.join(extra)}"


@dataclass
class Versions:
    """Every version of every document: the current text, and the word 5-grams only
    superseded versions hold (a passage with one of them is stale)."""

    current: dict[str, str]
    history: dict[str, list[str]] = field(default_factory=dict)
    superseded: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)

    def update(self, pid: str, text: str) -> None:
        self.history.setdefault(pid, []).append(self.current[pid])
        self.current[pid] = text
        old = set().union(*(grams(t) for t in self.history[pid]))
        self.superseded[pid] = old - grams(text)

    def stale(self, pid: str | None, text: str) -> bool:
        bad = self.superseded.get(pid or "")
        return bool(bad and grams(text) & bad)


def plan_edits(
    wl: Workload,
    versions: Versions,
    rnd: int,
    share: float,
    pieces: Callable[[str], int],
    seed: int,
) -> dict[str, str]:
    """The round's edits, pid -> kind (``change``, ``grow``, ``shrink``): a seeded ``share``
    of the documents; one in twenty of them grows (at least one), and at least one non-gold
    document of several pieces (one in twenty of the edited, if there are) is cut."""
    rng = random.Random(f"{seed}:{wl.name}:edits:{rnd}")
    pids = sorted(versions.current)
    chosen = rng.sample(pids, max(1, round(share * len(pids))))
    plan = dict.fromkeys(chosen, "change")
    grow = max(1, len(chosen) // 20)
    for p in [p for p in chosen if p in wl.needed][:grow] or chosen[:grow]:
        plan[p] = "grow"
    cuttable = [p for p in pids if p not in wl.needed and pieces(versions.current[p]) > 1]
    cut = [p for p in chosen if p in cuttable][: max(1, len(chosen) // 20)]
    if not cut and cuttable:
        cut = [rng.choice(cuttable)]
    for p in cut:
        plan[p] = "shrink"
    return plan


# --- the two faces ---------------------------------------------------------------------------
@dataclass
class Passage:
    id: str
    text: str
    pid: str | None
    score: float
    trace_id: str | None


def ask(face: str, retriever: ReMindRetriever, question: str, **over: Any) -> list[Passage]:
    """One retrieval through a framework's own call: LangChain ``invoke`` (per-call
    overrides allowed), LlamaIndex ``retrieve``."""
    if face == "langchain" or over:
        docs = retriever.invoke(question, **over)
        return [
            Passage(
                str(d.id),
                d.page_content,
                d.metadata.get("source") or d.metadata.get("file_path"),
                float(d.metadata.get("remindrag", {}).get("score", 0.0)),
                d.metadata.get("remindrag", {}).get("trace_id"),
            )
            for d in docs
        ]
    nodes = retriever.retrieve(question)
    return [
        Passage(
            n.node.node_id,
            n.node.get_content(),
            n.node.metadata.get("file_path") or n.node.metadata.get("source"),
            float(n.score or 0.0),
            n.node.metadata.get("remindrag", {}).get("trace_id"),
        )
        for n in nodes
    ]


def recall5(passages: Sequence[Passage], gold: Sequence[str]) -> float:
    want = set(gold)
    return len(want & {p.pid for p in passages[:5]}) / len(want) if want else 0.0


def duplicates(passages: Sequence[Passage]) -> int:
    seen: set[str] = set()
    dup = 0
    for p in passages:
        key = " ".join(_WORD.findall(p.text.lower()))
        dup += key in seen
        seen.add(key)
    return dup


# --- the readers -----------------------------------------------------------------------------
def cited_answer(item: dict[str, Any], passages: Sequence[Passage]) -> str:
    """The answer, citing every retrieved piece of a gold passage as ``[chunk-id]`` (the
    library's citation format); uncited when none is in the context."""
    gold = set(item["gold_pids"])
    cited = " ".join(f"[{p.id}]" for p in passages if p.pid in gold)
    return f"{item['answers'][0]} {cited}".strip()


def kinds_for(items: Sequence[dict[str, Any]], reader: str, rng: random.Random) -> list[str]:
    """Each item's answer kind this round: ``cite`` for the correct reader; for the noisy one
    an exact 60 / 20 / 20 share of ``cite`` / ``abstain`` / ``other``, shuffled."""
    n = len(items)
    if reader == "correct":
        return ["cite"] * n
    kinds = ["cite"] * round(0.6 * n) + ["abstain"] * round(0.2 * n)
    kinds += ["other"] * (n - len(kinds))
    rng.shuffle(kinds)
    return kinds


def reply(
    kind: str, item: dict, passages: Sequence[Passage], pool: list, rng: random.Random
) -> str:
    if kind == "abstain":
        return rng.choice(ABSTAIN)
    if kind == "other":
        others = [q for q in pool if q["qid"] != item["qid"]]
        return f"{rng.choice(others)['answers'][0]}."
    return cited_answer(item, passages)


# --- memory ----------------------------------------------------------------------------------
def memorize(retriever: ReMindRetriever, passages: Sequence[Passage], answer: str) -> dict:
    """``memorize(trace, answer=...)`` as the app calls it after an answer (the trace the
    results name, else the retriever's last); whether it wrote, by the write it returns and by
    ``memory_stats().writes_applied``."""
    tid = next((p.trace_id for p in passages if p.trace_id), None) or retriever.last_trace_id
    before = retriever.memory_stats().writes_applied
    try:
        w = retriever.memorize(tid, answer=answer)
    except ReMindError as exc:
        return {"wrote": False, "counted": 0, "refused": type(exc).__name__}
    touched = any(getattr(w, f, None) for f in ("enhanced", "penalised", "linked"))
    counted = retriever.memory_stats().writes_applied - before
    return {
        "wrote": bool(getattr(w, "applied", False) and touched),
        "counted": counted,
        "enhanced": len(getattr(w, "enhanced", None) or ()),
        "support": list(getattr(w, "supporting_chunks", None) or ()),
        "skipped": getattr(w, "skipped_reason", ""),
    }


# --- one arm ---------------------------------------------------------------------------------
def min_score_setting(given: float | None) -> tuple[bool, float | None, str]:
    """(the library has ``RetrievalConfig.min_score``, the value to try, where it came from):
    ``--min-score``, else the field's default when set, else its documented example, else a
    ``RECOMMENDED_MIN_SCORE`` beside the config, else a number its description recommends;
    none found: skipped."""
    info = RetrievalConfig.model_fields.get("min_score")
    if info is None:
        return False, None, "the library has no RetrievalConfig.min_score"
    if given is not None:
        return True, given, "--min-score"
    if isinstance(info.default, (int, float)) and not isinstance(info.default, bool):
        return True, float(info.default), "RetrievalConfig.min_score's default"
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    for ex in [*(info.examples or []), *extra.get("examples", [])]:  # type: ignore[misc]
        if isinstance(ex, (int, float)) and not isinstance(ex, bool):
            return True, float(ex), "RetrievalConfig.min_score's example"
    constant = getattr(sys.modules.get(RetrievalConfig.__module__), "RECOMMENDED_MIN_SCORE", None)
    if isinstance(constant, (int, float)) and not isinstance(constant, bool):
        return True, float(constant), "RECOMMENDED_MIN_SCORE"
    text = info.description or ""
    m = re.search(r"(?:recommend\w*|e\.g\.|such as|try)\D{0,20}(\d?\.\d+)", text) or re.search(
        r"(\d?\.\d+)\s+(?:is\s+)?recommended", text
    )
    if m:
        return True, float(m.group(1)), "RetrievalConfig.min_score's description"
    return True, None, "min_score exists but no value documented: pass --min-score"


@dataclass
class Arm:
    face: str
    reader: str
    retriever: ReMindRetriever
    stale: list[int] = field(default_factory=list)
    dups: list[int] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)
    writes: Counter = field(default_factory=Counter)
    counted: Counter = field(default_factory=Counter)
    refused: Counter = field(default_factory=Counter)
    records: list[dict[str, Any]] = field(default_factory=list)


def measure(arm: Arm, items: Sequence[dict], versions: Versions, **over: Any) -> dict[str, Any]:
    """Recall@5 of ``items`` (read only), and the stale, duplicate and empty results, and the
    spread of the top passage's score."""
    rec, top, stale, dup, empty = [], [], 0, 0, 0
    for it in items:
        got = ask(arm.face, arm.retriever, it["question"], **over)
        rec.append(recall5(got, it["gold_pids"]))
        top += [got[0].score] if got else []
        stale += sum(versions.stale(p.pid, p.text) for p in got)
        dup += duplicates(got)
        empty += not got
    return {
        "n": len(items),
        "recall@5": sum(rec) / len(rec) if rec else None,
        "stale": stale,
        "duplicates": dup,
        "empty": empty,
        "top_score": _spread(top),
    }


def sets_of(wl: Workload) -> dict[str, list[dict]]:
    return {"same": wl.same, "similar": wl.similar, "different": wl.different}


def run_arm(
    wl: Workload, splitter: Splitter, args: argparse.Namespace, embed: Any, log: Log
) -> dict[str, Any]:
    versions = Versions(dict(wl.texts))

    def pieces(pid: str) -> list[Any]:
        return splitter.split(pid, versions.current[pid])

    t0 = time.perf_counter()
    first = [x for p in sorted(versions.current) for x in pieces(p)]
    counts0 = Counter(x_pid(x) for x in first)
    arms = []
    for reader in args.readers:
        log(f"{wl.name} / {splitter.name} / {reader}: indexing {len(first)} pieces")
        r = ReMindRetriever.from_documents(first, embeddings=embed(), k=args.k)
        arms.append(Arm(splitter.name, reader, r))
    build_s = time.perf_counter() - t0
    log(f"{wl.name} / {splitter.name}: before (read only)")
    before = {name: measure(arms[0], items, versions) for name, items in sets_of(wl).items()}
    off_before = measure(arms[0], wl.off, versions)
    piece_changes, edited = [], []
    for rnd in range(1, args.rounds + 1):
        plan = plan_edits(
            wl,
            versions,
            rnd,
            args.edit_share,
            lambda t: len(splitter.texts(splitter.split("x", t))),
            args.seed,
        )
        rng = random.Random(f"{args.seed}:{wl.name}:text:{rnd}")
        old_counts = {p: len(pieces(p)) for p in plan}
        for p in sorted(plan):
            versions.update(p, edit_text(versions.current[p], rnd, plan[p], rng, args.grow_chars))
        new = {p: pieces(p) for p in sorted(plan)}
        piece_changes.append(sum(len(new[p]) != old_counts[p] for p in plan))
        edited.append(dict(Counter(plan.values())))
        traffic = [*wl.same, *wl.off[(rnd - 1) * args.off_per_round : rnd * args.off_per_round]]
        random.Random(f"{args.seed}:{wl.name}:order:{rnd}").shuffle(traffic)
        off_ids = {q["qid"] for q in wl.off}
        for arm in arms:
            arm.retriever.add_documents([x for p in sorted(new) for x in new[p]])
            krng = random.Random(f"{args.seed}:{wl.name}:reader:{rnd}")
            kinds = kinds_for(traffic, arm.reader, krng)
            arng = random.Random(f"{args.seed}:{wl.name}:answers:{rnd}")
            stale = dup = 0
            for item, kind in zip(traffic, kinds):
                got = ask(arm.face, arm.retriever, item["question"], **args.traffic_over)
                stale += sum(versions.stale(p.pid, p.text) for p in got)
                dup += duplicates(got)
                text = reply(kind, item, got, wl.same, arng)
                cause = "off_corpus" if item["qid"] in off_ids else kind
                m = memorize(arm.retriever, got, text)
                arm.calls[cause] += 1
                arm.writes[cause] += m["wrote"]
                arm.counted[cause] += m["counted"]
                if "refused" in m:
                    arm.refused[m["refused"]] += 1
                arm.records.append(
                    {
                        "round": rnd,
                        "qid": item["qid"],
                        "cause": cause,
                        "answer": text,
                        "returned": len(got),
                        "stale": sum(versions.stale(p.pid, p.text) for p in got),
                        "support_pids": sorted(
                            {p.pid for p in got if p.id in m.get("support", ())} - {None}
                        ),
                        "gold_pids": item["gold_pids"],
                        **{k: v for k, v in m.items() if k != "support"},
                    }
                )
            arm.stale.append(stale)
            arm.dups.append(dup)
            log(
                f"{wl.name} / {splitter.name} / {arm.reader}: round {rnd}: {len(plan)} edited "
                f"({piece_changes[-1]} changed piece count), stale {stale}, duplicates {dup}, "
                f"writes {dict(arm.writes)}"
            )
    readers: dict[str, Any] = {}
    for arm in arms:
        after = {name: measure(arm, items, versions) for name, items in sets_of(wl).items()}
        readers[arm.reader] = {
            "after": after,
            "stale_per_round": arm.stale,
            "duplicates_per_round": arm.dups,
            "memorize_calls": dict(arm.calls),
            "memory_writes": dict(arm.writes),
            "writes_applied_counted": dict(arm.counted),
            "refused": dict(arm.refused),
            "memory_stats": _stats(arm.retriever),
            "records": arm.records,
        }
    out = {
        "set": wl.name,
        "off_corpus_set": wl.off_name,
        "splitter": splitter.name,
        "documents": len(wl.texts),
        "pieces": len(first),
        "multi_piece_share": sum(c > 1 for c in counts0.values()) / len(counts0),
        "edits_per_round": edited,
        "piece_count_changes_per_round": piece_changes,
        "before": before,
        "top_score_before": {
            "in_corpus": before["same"]["top_score"],
            "off_corpus": off_before["top_score"],
        },
        "readers": readers,
        "index_seconds": build_s,
    }
    if "noisy" in readers and "correct" in readers:
        out["same_gain_kept"] = gain_kept(before, readers)
    has, value, source = min_score_setting(args.min_score)
    out["min_score"] = {"available": has, "value": value, "source": source}
    if value is not None:
        arm = next((a for a in arms if a.reader == "noisy"), arms[0])
        log(f"{wl.name} / {splitter.name}: min_score={value} on the {arm.reader} arm")
        out["min_score"] |= abstain_probe(arm, wl, versions, value)
    arm = next((a for a in arms if a.reader == "noisy"), arms[0])
    log(f"{wl.name} / {splitter.name}: turn shapes on the {arm.reader} arm")
    out["turn_shapes"] = turn_shapes(arm, wl)
    out["seconds"] = time.perf_counter() - t0
    return out


def x_pid(piece: Any) -> str:
    meta = getattr(piece, "metadata", {}) or {}
    return str(meta.get("source") or meta.get("file_path"))


def _stats(retriever: ReMindRetriever) -> dict[str, Any]:
    s = retriever.memory_stats()
    return {k: v for k, v in vars(s).items() if isinstance(v, (int, float))}


def _spread(xs: Sequence[float]) -> dict[str, float] | None:
    if not xs:
        return None
    s = sorted(xs)
    q = lambda f: s[min(len(s) - 1, int(f * len(s)))]  # noqa: E731
    return {"min": s[0], "p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "max": s[-1]}


def gain_kept(before: dict, readers: dict) -> float | None:
    """The share of the correct reader's Same recall@5 gain the noisy reader keeps (None
    when the correct reader gains nothing)."""
    b = before["same"]["recall@5"]
    good = readers["correct"]["after"]["same"]["recall@5"] - b
    noisy = readers["noisy"]["after"]["same"]["recall@5"] - b
    return noisy / good if good > 0 else None


def abstain_probe(arm: Arm, wl: Workload, versions: Versions, value: float) -> dict[str, Any]:
    """With ``min_score=value`` per call: off-corpus questions returning nothing, and the
    writes their memorize (a plain answer, uncited) makes; Same / Similar / Different
    recall@5 on against off (the arm's graph after the rounds). Runs last: it writes."""
    on = {n: measure(arm, items, versions, min_score=value) for n, items in sets_of(wl).items()}
    off = {n: measure(arm, items, versions) for n, items in sets_of(wl).items()}
    empty = writes = 0
    for q in wl.off:
        got = ask(arm.face, arm.retriever, q["question"], min_score=value)
        empty += not got
        writes += memorize(arm.retriever, got, cited_answer(q, got))["wrote"]
    return {
        "off_corpus_questions": len(wl.off),
        "off_corpus_empty_share": empty / len(wl.off) if wl.off else None,
        "off_corpus_writes": writes,
        "recall@5_on": {n: v["recall@5"] for n, v in on.items()},
        "recall@5_off": {n: v["recall@5"] for n, v in off.items()},
        "recall@5_drop": {
            n: (off[n]["recall@5"] - on[n]["recall@5"]) if on[n]["n"] else None for n in on
        },
    }


HEDGES = (
    "Maybe {a}? {c}",
    "Probably {a} {c}, but I'm guessing.",
    "I think it is {a} {c}.",
    "The passages mention {a} {c} but not the rest of what was asked.",
)


def tool_loop_model(script: list[Any]) -> Any:
    """A chat model that binds tools and replies with the script in turn, raising where it
    holds an exception (the provider failing after a tool ran)."""
    import itertools

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class ToolLoopModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            reply = next(self.messages)
            if isinstance(reply, BaseException):
                raise reply
            self.messages = itertools.chain([reply], self.messages)
            return super()._generate(*args, **kwargs)

    return ToolLoopModel(messages=iter(script))


def agent_loop(arm: Arm, failed: dict, answered: dict) -> tuple[int, int]:
    """One failed turn (``failed``'s question: the model call after the tool raises) then one
    answered turn (``answered``'s, citing its gold pieces), on one callback; the writes made
    for each turn's question."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import create_retriever_tool

    from remindrag_integrations import ReMindMemoryCallback

    tool = create_retriever_tool(arm.retriever, "search", "Search the documents.")

    def call(q: str) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "search", "id": "c", "args": {"query": q}}])

    qa, qb = failed["question"], answered["question"]
    pending: list[Any] = [call(qa), RuntimeError("provider down"), call(qb)]
    model = tool_loop_model(pending)
    cb = ReMindMemoryCallback(arm.retriever)
    history: list[Any] = []
    for q in (qa, qb):
        history.append(HumanMessage(q))
        try:
            while True:
                ai = model.invoke(history, config={"callbacks": [cb]})
                history.append(ai)
                if not ai.tool_calls:
                    break
                for tc in ai.tool_calls:
                    out = tool.invoke(tc, config={"callbacks": [cb]})
                    history.append(out)
                    if q == qb:  # the answer cites the gold pieces the tool returned
                        got = ask(arm.face, arm.retriever, qb)
                        model.messages = iter([AIMessage(cited_answer(answered, got))])
        except RuntimeError:
            continue
    queries = [arm.retriever.trace(w.trace_id).query for w in cb.writes if w.applied]
    return queries.count(qa), queries.count(qb)


def agent_pairs(arm: Arm, items: Sequence[dict]) -> list[tuple[dict, dict]]:
    """(the question whose turn fails, the next one answered), as the issue met them: the next
    question's gold passage is among the pieces the failed question's search returned (so
    the old pairing could write it for the failed question); the following question where
    none is."""
    pairs = []
    for i, a in enumerate(items[::2]):
        returned = {p.pid for p in ask(arm.face, arm.retriever, a["question"])}
        others = [q for q in items if q["qid"] != a["qid"]]
        near = [q for q in others if returned & set(q["gold_pids"])]
        pairs.append((a, near[0] if near else others[(2 * i) % len(others)]))
    return pairs


def turn_shapes(arm: Arm, wl: Workload) -> dict[str, Any]:
    """The issue-46 shapes (module doc): writes from hedges, cited off-topic answers and
    failed agent turns, and from the agent turns that answered. Runs last: it writes."""
    hedge = off = 0
    for i, q in enumerate(wl.same):
        got = ask(arm.face, arm.retriever, q["question"])
        gold = set(q["gold_pids"])
        cites = " ".join(f"[{p.id}]" for p in got if p.pid in gold) or f"[{got[0].id}]"
        answer = HEDGES[i % len(HEDGES)].format(a=q["answers"][0], c=cites)
        hedge += memorize(arm.retriever, got, answer)["wrote"]
    for q in wl.off:
        for _ in range(3):
            got = ask(arm.face, arm.retriever, q["question"])
            if got:
                answer = f"{q['answers'][0]} [{got[0].id}]"
                off += memorize(arm.retriever, got, answer)["wrote"]
    pairs = agent_pairs(arm, wl.same)
    failed_writes = answered_writes = 0
    for a, b in pairs:
        fa, fb = agent_loop(arm, a, b)
        failed_writes += fa
        answered_writes += fb
    return {
        "hedge": {"calls": len(wl.same), "writes": hedge},
        "cited_off_topic": {"calls": 3 * len(wl.off), "writes": off},
        "agent_loop": {
            "turns": len(pairs),
            "failed_turn_writes": failed_writes,
            "answered_turn_writes": answered_writes,
        },
    }


# --- output ----------------------------------------------------------------------------------
def _f(x: Any, fmt: str = ".3f") -> str:
    return "–" if x is None else format(x, fmt)


def _ba(before: dict, after: dict, name: str) -> str:
    if not before[name]["n"]:
        return "–"
    b, a = before[name]["recall@5"], after[name]["recall@5"]
    return f"{_f(b)} → {_f(a)} ({before[name]['n']})"


def _wc(writes: dict, calls: dict, cause: str) -> str:
    return f"{writes.get(cause, 0)} / {calls.get(cause, 0)}"


def table(runs: Sequence[dict[str, Any]]) -> str:
    head = (
        "| set | splitter | reader | stale / round | duplicates / round | writes: off-corpus "
        "| writes: abstain | writes: other answer | Same R@5 before → after | Similar | "
        "Different |"
    )
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for run in runs:
        b = run["before"]
        for reader, r in run["readers"].items():
            a, w, c = r["after"], r["memory_writes"], r["memorize_calls"]
            rows.append(
                f"| {run['set']} | {run['splitter']} | {reader} | "
                f"{'/'.join(map(str, r['stale_per_round']))} | "
                f"{'/'.join(map(str, r['duplicates_per_round']))} | {_wc(w, c, 'off_corpus')} | "
                f"{_wc(w, c, 'abstain')} | {_wc(w, c, 'other')} | {_ba(b, a, 'same')} | "
                f"{_ba(b, a, 'similar')} | {_ba(b, a, 'different')} |"
            )
    lines = ["\n".join(rows), ""]
    for run in runs:
        ms = run["min_score"]
        line = (
            f"{run['set']} / {run['splitter']}: {run['documents']} documents, {run['pieces']} "
            f"pieces ({run['multi_piece_share']:.0%} of documents in several), piece count "
            f"changed per round {run['piece_count_changes_per_round']}; noisy reader keeps "
            f"{_f(run.get('same_gain_kept'), '.0%')} of the correct reader's Same gain; top "
            f"score p50 in-corpus {_f((run['top_score_before']['in_corpus'] or {}).get('p50'))}"
            f", off-corpus {_f((run['top_score_before']['off_corpus'] or {}).get('p50'))}"
        )
        if ms.get("off_corpus_questions"):
            drop = ms["recall@5_drop"]
            line += (
                f"; min_score={ms['value']} ({ms['source']}): off-corpus with no passage "
                f"{_f(ms['off_corpus_empty_share'], '.0%')}, their writes "
                f"{ms['off_corpus_writes']}, R@5 drop Same {_f(drop['same'])} Similar "
                f"{_f(drop['similar'])} Different {_f(drop['different'])}"
            )
        else:
            line += f"; abstain option: {ms['source']}"
        ts = run.get("turn_shapes")
        if ts:
            ag = ts["agent_loop"]
            line += (
                f"; turn shapes: hedge writes {ts['hedge']['writes']} / {ts['hedge']['calls']}, "
                f"cited off-topic {ts['cited_off_topic']['writes']} / "
                f"{ts['cited_off_topic']['calls']}, agent loop: failed turns' writes "
                f"{ag['failed_turn_writes']} / {ag['turns']}, answered turns' "
                f"{ag['answered_turn_writes']} / {ag['turns']}"
            )
        lines.append(line)
    return "\n".join(lines)


def summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The targets' numbers over every run (issue 33, "Measured as an app would run it")."""
    stale = sum(sum(r["stale_per_round"]) for run in runs for r in run["readers"].values())

    def writes(cause: str) -> int:
        return sum(
            r["memory_writes"].get(cause, 0) for run in runs for r in run["readers"].values()
        )

    kept = {
        f"{run['set']}/{run['splitter']}": run["same_gain_kept"]
        for run in runs
        if "same_gain_kept" in run
    }
    worst: dict[str, float] = {}  # reader -> the largest recall@5 drop, any set and question kind
    for run in runs:
        for reader, r in run["readers"].items():
            for name, v in r["after"].items():
                if v["n"] and run["before"][name]["n"]:
                    d = v["recall@5"] - run["before"][name]["recall@5"]
                    worst[reader] = min(worst.get(reader, d), d)
    probes = [run["min_score"] for run in runs if run["min_score"].get("off_corpus_questions")]
    shaped = [run for run in runs if run.get("turn_shapes")]
    return {
        "stale_passages": stale,
        "stale_passages_after": sum(
            v["stale"] for run in runs for r in run["readers"].values() for v in r["after"].values()
        ),
        "duplicate_passages": sum(
            sum(r["duplicates_per_round"]) for run in runs for r in run["readers"].values()
        ),
        "writes_off_corpus": writes("off_corpus"),
        "writes_abstain": writes("abstain"),
        "writes_other_answer": writes("other"),
        "turn_shapes": {
            "writes_hedge": sum(r["turn_shapes"]["hedge"]["writes"] for r in shaped),
            "writes_cited_off_topic": sum(
                r["turn_shapes"]["cited_off_topic"]["writes"] for r in shaped
            ),
            "writes_failed_agent_turn": sum(
                r["turn_shapes"]["agent_loop"]["failed_turn_writes"] for r in shaped
            ),
            "writes_answered_agent_turn": sum(
                r["turn_shapes"]["agent_loop"]["answered_turn_writes"] for r in shaped
            ),
            "agent_turns": sum(r["turn_shapes"]["agent_loop"]["turns"] for r in shaped),
        }
        if shaped
        else None,
        "same_gain_kept": kept,
        "same_gain_kept_min": min((k for k in kept.values() if k is not None), default=None),
        "worst_recall_change": worst,
        "min_score": {
            "off_corpus_empty_share_min": min(p["off_corpus_empty_share"] for p in probes),
            "recall_drop_max": max(
                d for p in probes for d in p["recall@5_drop"].values() if d is not None
            ),
        }
        if probes
        else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=os.environ.get("REMINDRAG_BENCH_DATA", "../shared/datasets"))
    p.add_argument(
        "--sets",
        default=DEFAULT_SETS,
        help="comma-separated SET:OFF pairs: the set, and the set whose questions are its "
        f"off-corpus traffic (default {DEFAULT_SETS})",
    )
    p.add_argument("--n", type=int, default=50, help="questions per set")
    p.add_argument("--passages", type=int, default=300, help="documents per pooled corpus")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--edit-share", type=float, default=1 / 3, help="documents edited a round")
    p.add_argument("--off-share", type=float, default=0.2, help="off-corpus share of traffic")
    p.add_argument("--k", type=int, default=10, help="passages per retrieval (recall at 5)")
    p.add_argument("--chunk-size", type=int, default=300, help="RecursiveCharacterTextSplitter")
    p.add_argument("--chunk-overlap", type=int, default=30)
    p.add_argument("--node-size", type=int, default=96, help="SentenceSplitter chunk_size")
    p.add_argument("--node-overlap", type=int, default=10)
    p.add_argument("--grow-chars", type=int, default=450, help="text a growing edit appends")
    p.add_argument("--splitters", default=",".join(SPLITTERS))
    p.add_argument("--readers", default=",".join(READERS))
    p.add_argument("--min-score", type=float, default=None, help="the abstain option's value")
    p.add_argument(
        "--traffic-min-score",
        action="store_true",
        help="run the rounds' traffic with min_score on too (per call)",
    )
    p.add_argument("--embedder", choices=("default", "hash"), default="default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label", default="", help="a name for the code measured (before, after)")
    p.add_argument("--out", default="benchmarks/results/app_shapes.json")
    args = p.parse_args(argv)
    args.readers = [r for r in args.readers.split(",") if r]
    if not set(args.readers) <= set(READERS):
        p.error(f"--readers: choose from {', '.join(READERS)}")
    splitters = [s for s in args.splitters.split(",") if s]
    if not set(splitters) <= set(SPLITTERS):
        p.error(f"--splitters: choose from {', '.join(SPLITTERS)}")
    args.off_per_round = max(1, round(args.n * args.off_share / (1 - args.off_share)))
    _, ms_value, ms_source = min_score_setting(args.min_score)
    args.traffic_over = {"min_score": ms_value} if args.traffic_min_score and ms_value else {}
    if args.traffic_min_score and not args.traffic_over:
        p.error(f"--traffic-min-score: {ms_source}")

    def embed() -> Any:
        if args.embedder == "hash":
            from remindrag_integrations.testing import HashEmbedder

            return HashEmbedder()
        return None  # the packaged default

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    t0, cpu0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()
    runs = []
    for spec in [s for s in args.sets.split(",") if s]:
        name, _, off_name = spec.partition(":")
        if not off_name:
            p.error(f"--sets: {spec!r} needs :OFF, the set of its off-corpus questions")
        ds, off = load_dataset(name, args.data), load_dataset(off_name, args.data)
        wl = workload(ds, off, args.n, args.passages, args.off_per_round * args.rounds)
        for s in splitters:
            sp: Splitter = (
                LangChainSplitter(args.chunk_size, args.chunk_overlap)
                if s == "langchain"
                else LlamaIndexSplitter(args.node_size, args.node_overlap)
            )
            runs.append(run_arm(wl, sp, args, embed, log))
    result = {
        "kind": "app_shapes",
        "label": args.label,
        "command": " ".join(sys.argv if argv is None else ["benchmarks/app_shapes.py", *argv]),
        "machine": machine(),
        "load_start": list(load0),
        "load_end": list(os.getloadavg()),
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - cpu0,
        "options": {
            k: v for k, v in vars(args).items() if k not in ("traffic_over",) and k != "data"
        },
        "summary": summary(runs),
        "runs": runs,
    }
    print(table(runs), flush=True)
    print(json.dumps(result["summary"], indent=1))
    write_result(result, Path(args.out))  # the memorize events to raw/<name>
    print(f"wrote {args.out} ({result['seconds']:.0f} s, {result['cpu_seconds']:.0f} s CPU)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
