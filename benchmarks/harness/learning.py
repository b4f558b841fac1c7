"""Label-free feedback for the learning curve (``bench curve --feedback ...``): who reads a
retrieval and what memorize is told afterwards, with no gold passage ever shown.

- ``none-<policy>``: memorize with no answer and no LLM: the zero-token judge, i.e. the
  ``self_memorize`` policy (``enhance`` / ``cache`` / ``full`` / ``off``), named explicitly
  (the library's default is ``off``: no answer, no write);
- ``cite``: a scripted reader. From the retrieved top k it cites, as ``[c-…]``, every chunk
  holding one of the question's answer strings (HotpotQA-normalised, whole words; ``yes`` /
  ``no`` answers are held by no passage, so they cite nothing), and memorize reads the
  citations (no LLM call). Citing nothing, memorize falls back to the passages holding the
  answer's words (``fallback``; a bare yes / no holds none and writes nothing);
- ``llm-cite``: an LLM (``--reader-llm``, default Qwen2.5-1.5B) answers over the same
  zero-token retrieval with the library's answer prompt, and memorize reads its citations;
  an answer citing nothing falls back to the passages holding its words, and a refusal
  writes nothing (no LLM filter call).

Every memorize is recorded with the support it picked, so :func:`judge_table` can score each
judge's precision and recall against the gold chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from remindrag_integrations.core import answer as answering
from remindrag_integrations.core.memory.filter import llm_filter
from remindrag_integrations.core.prompts import cited_ids
from remindrag_integrations.core.protocols import Completion
from remindrag_integrations.core.steps import LLMDecider, Runtime, drive
from remindrag_integrations.core.types import CostLedger, Retrieval

from . import metrics as M

POLICIES = ("enhance", "cache", "full", "off")
FEEDBACKS = ("filter", "gold", "cite", "llm-cite", *(f"none-{p}" for p in POLICIES))
LLM_TIMEOUT = 1800.0  # a slow local model on a shared machine


@dataclass
class Reading:
    """What a reader made of one retrieval: the answer text (``None``: no answer) and the
    tokens it cost; ``filter_pick``: the LLM filter's support for the same trace, when the
    reader was asked to probe it (not written)."""

    text: str | None
    tokens: int = 0
    filter_pick: list[str] | None = None


def holds_answer(text: str, answers: Sequence[str]) -> bool:
    """Whether ``text`` contains one of ``answers`` as whole words, after HotpotQA
    normalisation; ``yes`` / ``no`` (comparison answers) are held by no passage."""
    hay = f" {M.normalize_answer(text)} "
    for a in answers:
        needle = M.normalize_answer(a)
        if needle and needle not in ("yes", "no") and f" {needle} " in hay:
            return True
    return False


class ScriptedReader:
    """Cites the retrieved chunks that hold the answer (see the module docstring)."""

    name = "cite"

    def read(self, engine: Any, item: dict, retrieval: Retrieval) -> Reading:
        cited = [
            rc.chunk.id for rc in retrieval.chunks if holds_answer(rc.chunk.text, item["answers"])
        ]
        if not cited:
            return Reading(None)
        return Reading(f"{item['answers'][0]} " + " ".join(f"[{c}]" for c in cited))


class _Paid:
    """Counts a reply served from a response cache at the tokens the model spent on it (the
    bench caches replies only so an interrupted run resumes; a reader pays every answer)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def complete(self, prompt: str) -> Completion:
        return replace(self.llm.complete(prompt), cached=False)

    async def acomplete(self, prompt: str) -> Completion:
        return replace(await self.llm.acomplete(prompt), cached=False)


@dataclass
class LLMReader:
    """An LLM answering over the retrieval with the engine's answer prompt (the same prompt
    ``engine.answer`` uses); ``llm`` is usually a :class:`~..testing.RecordingLLM`. The first
    ``probe_filter`` questions it reads also get the LLM filter's pick for the same trace and
    answer (recorded for the judge table, never written)."""

    llm: Any
    probe_filter: int = 0
    name: str = "llm-cite"
    _probed: set[str] = field(default_factory=set)

    def _runtime(self, engine: Any) -> Runtime:
        return Runtime(LLMDecider(_Paid(self.llm), LLM_TIMEOUT), engine.embedder, engine.store.dim)

    def read(self, engine: Any, item: dict, retrieval: Retrieval) -> Reading:
        rt, ledger = self._runtime(engine), CostLedger()
        step = answering.answer(item["question"], retrieval, True, engine.prompts.answer)
        ans = drive(step, rt, ledger)
        reading = Reading(ans.text, ledger.total_tokens)
        if len(self._probed) < self.probe_filter and item["qid"] not in self._probed:
            self._probed.add(item["qid"])
            trace = engine.trace(retrieval.trace_id)
            cfg = engine.retrieval_config
            pick = drive(
                llm_filter(
                    trace, engine.store, ans.text, cfg.prompt.chunk_chars, engine.prompts.filter
                ),
                rt,
                CostLedger(),
            )
            reading.filter_pick = list(pick.chunks)
        return reading


def plan(feedback: str, reader_llm: Any = None, probe_filter: int = 0) -> tuple[str, dict, Any]:
    """``--feedback`` as (memorize mode for the runner, config overrides, reader or None)."""
    if feedback not in FEEDBACKS:
        raise ValueError(f"feedback must be one of {', '.join(FEEDBACKS)}")
    if feedback.startswith("none-"):
        return "filter", {"self_memorize": feedback.removeprefix("none-")}, None
    if feedback == "cite":
        return "read", {}, ScriptedReader()
    if feedback == "llm-cite":
        if reader_llm is None:
            raise ValueError("--feedback llm-cite needs a reader LLM")
        return "read", {}, LLMReader(reader_llm, probe_filter)
    return feedback, {}, None


def used_citations(memo: dict[str, Any], answer: str | None) -> None:
    """Set ``memo["cited"]`` (the answer's citations memorize used: those it did not list in
    ``ignored_citations``) and ``memo["judge"]`` (``citations``, or ``fallback`` when it used
    none: the passages holding the answer's words, or nothing)."""
    ignored = set(memo.get("ignored_citations", ()))
    memo["cited"] = [c for c in cited_ids(answer or "") if c not in ignored]
    memo["judge"] = "citations" if memo["cited"] else "fallback"


# --- the judge table ------------------------------------------------------------------------
def _pr(pick: Sequence[str], gold: set[str]) -> tuple[float | None, float | None]:
    hit = len(set(pick) & gold)
    return (hit / len(pick) if pick else None), (hit / len(gold) if gold else None)


def judge_stats(events: Sequence[dict], key: str = "support") -> dict[str, Any]:
    """Precision and recall of the picked support (``key``) against the gold chunks over
    memorize events (macro means over events with a pick / with gold), the recall against
    the gold the walk read, and where it goes wrong: no pick, gold not read, a non-gold pick."""
    evs = [e for e in events if e.get(key) is not None]
    precs, recs, read_recs = [], [], []
    counts = {"events": len(evs), "no_pick": 0, "gold_not_read": 0, "non_gold_pick": 0}
    counts |= {"no_gold_pick": 0, "all_gold_read_picked": 0}
    for e in evs:
        gold, read, pick = set(e["gold"]), set(e["read"]), e[key]
        p, r = _pr(pick, gold)
        if p is None:
            counts["no_pick"] += 1
        else:
            precs.append(p)
            counts["non_gold_pick"] += int(p < 1.0)
            counts["no_gold_pick"] += int(p == 0.0)
        if r is not None:
            recs.append(r)
        seen = gold & read
        if not seen:
            counts["gold_not_read"] += 1
        else:
            rr = len(set(pick) & seen) / len(seen)
            read_recs.append(rr)
            counts["all_gold_read_picked"] += int(rr == 1.0)
    return {
        "precision": M.mean(precs) if precs else None,
        "recall": M.mean(recs) if recs else None,
        "recall_of_read_gold": M.mean(read_recs) if read_recs else None,
        "picks_per_event": M.mean([float(len(e[key])) for e in evs]) if evs else None,
        **counts,
    }


def memorize_events(result: dict) -> list[dict]:
    """The memorize events of a learning-curve result's Same turns."""
    return [r["memo"] for p in result["phases"] for r in p.get("records", []) if r.get("memo")]


def cited_rank_moves(result: dict) -> dict[str, int]:
    """Gold chunks at ranks 6–10 on the first pass that the judge picked (a reader's
    citations, else the written support), and how many of them are in the top 5 on the last
    Same turn: where a gain at 5 can come from."""
    phases = {p["phase"]: p for p in result["phases"]}
    same = sorted(k for k in phases if k.startswith("same, turn "))
    if len(same) < 2:
        return {}
    first = {r["qid"]: r for r in phases[same[0]]["records"]}
    last = {r["qid"]: r for r in phases[same[-1]]["records"]}
    out = {"picked_gold_rank_6_10": 0, "now_top5": 0, "gold_rank_6_10_not_picked": 0}
    for qid, r in first.items():
        memo = r.get("memo")
        if not memo or qid not in last:
            continue
        ranked, gold = r["retrieved"], set(memo["gold"])
        for cid in ranked[5:10]:
            if cid not in gold:
                continue
            if cid in memo.get("cited", memo["support"]):
                out["picked_gold_rank_6_10"] += 1
                out["now_top5"] += int(cid in last[qid]["retrieved"][:5])
            else:
                out["gold_rank_6_10_not_picked"] += 1
    return out


def judge_summary(result: dict) -> dict[str, Any]:
    """Each judge's precision / recall over the result's Same memorize events: ``written``
    (every event: the support memorize wrote), ``citations`` (events where the reader cited a
    read chunk: the cited chunks), ``citations_as_given`` (every citation the reader wrote, those
    memorize ignored included), ``fallback`` (the answer's words, where it cited none), ``llm_filter``
    (the probed LLM filter picks); plus readers' citation rate, answer tokens and EM."""
    events = memorize_events(result)
    cited = [e for e in events if e.get("judge") == "citations"]
    out: dict[str, Any] = {"written": judge_stats(events)}
    if any("judge" in e for e in events):
        out["citations"] = judge_stats(cited, "cited")
        given = [{**e, "given": cited_ids(e.get("answer") or "")} for e in events]
        out["citations_as_given"] = judge_stats([e for e in given if e["given"]], "given")
        out["all_citations_ignored"] = sum(1 for e in given if e["given"] and not e["cited"])
        out["fallback"] = judge_stats([e for e in events if e.get("judge") == "fallback"])
        out["cite_rate"] = len(cited) / len(events) if events else 0.0
        out["answer_tokens_per_memorize"] = M.mean([float(e["answer_tokens"]) for e in events])
        out["ignored_citations"] = sum(len(e["ignored_citations"]) for e in events)
        if any("em" in e for e in events):
            out["em"] = M.mean([e.get("em", 0.0) for e in events])
    probed = [e for e in events if "filter_pick" in e]
    if probed:
        out["llm_filter"] = judge_stats(probed, "filter_pick")
        out["citations_on_probed"] = judge_stats([e for e in probed if e["cited"]], "cited")
    out["rank_moves"] = cited_rank_moves(result)
    return out


def judge_markdown(judges: dict[str, Any]) -> str:
    """The judge table of :func:`judge_summary`."""

    def f(x: Any) -> str:
        return "–" if x is None else f"{x:.3f}"

    head = (
        "| judge | events | picks/event | precision | recall | recall of read gold | "
        "no pick | gold not read | a non-gold pick |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name in (
        "written",
        "citations_as_given",
        "citations",
        "fallback",
        "llm_filter",
        "citations_on_probed",
    ):
        s = judges.get(name)
        if not s or not s["events"]:
            continue
        lines.append(
            f"| {name} | {s['events']} | {f(s['picks_per_event'])} | {f(s['precision'])} | "
            f"{f(s['recall'])} | {f(s['recall_of_read_gold'])} | {s['no_pick']} | "
            f"{s['gold_not_read']} | {s['non_gold_pick']} |"
        )
    return "\n".join(lines) + "\n"
