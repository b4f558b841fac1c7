"""Memorize (docs/method.md §3): which support a retrieval's write uses, and the claim that
writes each trace exactly once.

The support — what helped — is, in this order:

1. chunk or edge ids a person or a known answer names (``supporting``): the caller's word,
   whatever the answer says;
2. nothing, when the answer abstains ("I don't know", "the context does not mention ...":
   :func:`.grounding.abstains`);
3. the answer's own word, with no LLM call, when ``memorize_judge="citations"`` (the
   default) or no LLM is given: the chunks it cites (and ``cited``), else the passages that
   hold its words (:func:`.grounding.grounded_in`); with no LLM an answer grounded in no
   passage writes nothing. A citation earns trust, not a pass: when the question's relevance
   is below ``memory.uncited_min_score`` (an off-topic question), only the cited passages that
   hold the answer's words and name what the question names are support, else nothing is
   written (:meth:`Memorizer.cited_off_topic`), so memory never lifts an off-corpus question
   over the cutoff;
4. the judge: the LLM filter (an answer grounded in nothing, ``memorize_judge="filter"``, or
   no answer); with no LLM and no answer the ``self_memorize`` policy (``"off"`` by default:
   nothing is written).

Named support is checked before any write and, with a thumbs-up, made to come back for the
question (:mod:`.assure`). The write itself is :func:`.write.write`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace

import numpy as np

from ..config import RetrievalConfig
from ..errors import UnknownNodeError
from ..ids import contains_edge_of
from ..prompts import FILTER_PROMPT
from ..steps import Step
from ..store import ChunkBatchStore, GraphStore, TraceClaims
from ..types import MemoryWrite, Trace
from .assure import Requery, assure
from .filter import Support, citations, llm_filter, similarity_filter
from .grounding import abstains, grounded_in, names_held
from .write import skipped, write

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Memorizer:
    """The memory writes of one engine call: its store, config, filter prompt and the
    :data:`.assure.Requery` that asks a question again."""

    store: GraphStore
    cfg: RetrievalConfig
    requery: Requery
    filter_prompt: str = FILTER_PROMPT

    def memorize(
        self,
        trace: Trace,
        answer: str | None,
        supporting: list[str] | None,
        cited: list[str] | None,
        uses_llm: bool,
    ) -> Step:
        """The write of one retrieval's experience with the support the policy picks
        (module doc); ``uses_llm``: an LLM is there to judge."""
        cfg, judged = self.cfg, True
        if supporting is not None:  # the caller's word on what helped, not on what did not
            return (yield from self.named(trace, Support.of(supporting), True))
        why = abstains(answer)
        if why is not None:  # nothing to learn from, whatever it cites
            return skipped(trace, f"the answer abstains ({why}): nothing to learn from")
        support, ignored = citations(trace, answer, cited)
        by_answer = cfg.memorize_judge == "citations" or not uses_llm
        unheld = ""
        if support.chunks and answer is not None:  # citations earn trust, not a pass
            support, unheld = self.cited_off_topic(trace, answer, support)
            if not support.chunks:
                return replace(skipped(trace, unheld), ignored_citations=ignored)
        if by_answer and answer is not None and not support.chunks:  # the passages holding it
            support, unheld = self.grounding(trace, answer)
        if by_answer and support.chunks:  # the answer's word, no LLM call
            result = yield from self.named(trace, support, True, named=False)
            return replace(result, ignored_citations=ignored)
        if answer is not None and not uses_llm:
            return replace(
                skipped(
                    trace,
                    unheld
                    or "the answer is grounded in no retrieved passage (it cites none, and none "
                    "holds its words): nothing to learn from",
                ),
                ignored_citations=ignored,
            )
        if not trace.subgraph_edges:
            return skipped(trace, "nothing was traversed")
        elif uses_llm:
            chars = cfg.prompt.chunk_chars
            support = yield from llm_filter(
                trace, self.store, answer or "", chars, self.filter_prompt
            )
        elif cfg.self_memorize == "off":
            return skipped(
                trace,
                "no answer and no LLM to judge (self_memorize='off'): pass answer= (or "
                "supporting=[...]) to say what helped",
            )
        else:  # no answer, no judge: the walk remembered without penalising, unless "full"
            top = len(trace.chunk_ids) if cfg.self_memorize == "cache" else cfg.navigator.filter_top
            support = yield from similarity_filter(trace, self.store, top)
            judged = cfg.self_memorize == "full"
        result = write(
            trace, self.store, support, max_depth=cfg.memory.max_bridge_hops, penalise=judged
        )
        return replace(result, ignored_citations=ignored)

    def cited_off_topic(self, trace: Trace, answer: str, support: Support) -> tuple[Support, str]:
        """The cited chunks an answer to an off-topic question may teach: all of them when
        the question's relevance reaches ``memory.uncited_min_score`` (or the trace kept no
        relevance); below it only the cited passages that hold the answer's words and name
        what the question names (:func:`.grounding.grounded_in`, :func:`.grounding.names_held`):
        a model answering from its own knowledge ("Lima [c-…]") cites a passage that holds
        neither, and memory would otherwise lift an off-corpus question over the cutoff."""
        floor, rel = self.cfg.memory.uncited_min_score, relevance(trace)
        if rel is None or rel >= floor:
            return support, ""
        passages = live_texts(self.store, support.chunks)
        held = (
            grounded_in(answer, trace.query, passages) if names_held(trace.query, passages) else []
        )
        if held:
            return Support(held, support.edges), ""
        return Support([]), (
            f"the question's relevance {rel:.2f} is below memory.uncited_min_score {floor} "
            "(an off-topic question?) and the cited passages do not hold the answer: a "
            "citation alone teaches nothing there; pass supporting=[...] to say what helped"
        )

    def grounding(self, trace: Trace, answer: str) -> tuple[Support, str]:
        """The passages the retrieval read or returned that hold ``answer``
        (:func:`.grounding.grounded_in`), best-ranked first; none, with the reason, when
        the question's relevance is below ``memory.uncited_min_score`` or the passages name
        nothing the question names (:func:`.grounding.names_held`)."""
        score = {c: float(e.get("score", 0.0)) for c, e in trace.rank_evidence.items()}
        ids = list(dict.fromkeys([*trace.rank_evidence, *trace.chunk_ids]))
        ids.sort(key=lambda c: (c not in score, -score.get(c, 0.0)))
        floor, rel = self.cfg.memory.uncited_min_score, relevance(trace)
        if rel is not None and rel < floor:  # a trace from before relevances were kept: not checked
            why = (
                f"the question's relevance {rel:.2f} is below memory.uncited_min_score "
                f"{floor} (an off-corpus question?): an answer that cites no passage is not "
                "grounded in them; cite a passage or pass supporting=[...]"
            )
            return Support([]), why
        passages = live_texts(self.store, ids)
        if not names_held(trace.query, passages):
            why = (
                "the retrieved passages name nothing the question names (not its longest "
                "name: an off-corpus question?): an answer that cites none is not grounded "
                "in them; cite a passage or pass supporting=[...]"
            )
            return Support([]), why
        return Support(grounded_in(answer, trace.query, passages)), ""

    def named(self, trace: Trace, support: Support, helpful: bool, *, named: bool = True) -> Step:
        """The write of support the caller's word gives (citations, thumbs, ``supporting=``);
        with ``named`` (a person named the ids) every id is checked first and each named
        chunk is made to come back for the question (:mod:`.assure`)."""
        cfg, store = self.cfg, self.store
        if named:  # a chunk a document edit replaced since the retrieval: its successor
            seen = {*trace.chunk_ids, *trace.rank_evidence, *trace.parents}
            support = replace(support, chunks=successor_chunks(store, support.chunks, seen))
        for c in support.chunks if named else ():  # every named id known before any write
            store.get_chunk(c)
        for e in support.edges if named else ():
            store.get_edge(e)
        result = write(
            trace,
            store,
            support,
            helpful=helpful,
            max_depth=cfg.memory.max_bridge_hops,
            penalise=cfg.named_support_penalises,
        )
        if not (named and helpful and support.chunks):
            return result
        if result.applied:  # recorded as applied before the check: a retry never applies twice
            mark(trace, store, result)
        q = np.asarray(trace.query_embedding, dtype=np.float32)
        return (yield from assure(store, self.requery, trace.query, q, result, support.chunks))


def successor_chunks(store: GraphStore, chunk_ids: list[str], seen: set[str]) -> list[str]:
    """``chunk_ids`` with each chunk of the retrieval (``seen``) that is no longer stored
    replaced by the chunk that took its place when its document was edited (the same passage,
    edited: :mod:`.carry`; found through the store's record of replaced edges,
    ``edge_successors``). A chunk with no successor (its document deleted, or the passage
    gone from it) is an :class:`UnknownNodeError` that says so."""
    gone = [c for c in chunk_ids if c in seen and not _stored(store, c)]
    if not gone:
        return chunk_ids
    lookup = getattr(store, "edge_successors", None)
    moved = lookup([contains_edge_of(c) for c in gone]) if callable(lookup) else {}
    took: dict[str, str] = {}
    for c in gone:
        edge = moved.get(contains_edge_of(c))
        try:  # a contains edge runs anchor -> chunk
            successor = store.get_edge(edge).v if edge is not None else None
        except UnknownNodeError:  # the successor's document was deleted in turn
            successor = None
        if successor is None:
            raise UnknownNodeError(
                f"chunk {c!r} is no longer stored: its document was edited or deleted since "
                "the retrieval, and no passage of it took this one's place; search again "
                "and name a chunk the new search returns"
            )
        took[c] = successor
        log.info("chunk %s was edited since the retrieval: its successor %s", c, took[c])
    return list(dict.fromkeys(took.get(c, c) for c in chunk_ids))


def _stored(store: GraphStore, chunk_id: str) -> bool:
    try:
        store.get_chunk(chunk_id)
    except UnknownNodeError:
        return False
    return True


def relevance(trace: Trace) -> float | None:
    """The question's relevance: its best passage's (``None`` for a trace from before
    relevances were kept, or one that returned nothing)."""
    rel = [float(e["relevance"]) for e in trace.rank_evidence.values() if "relevance" in e]
    return max(rel) if rel else None


def live_texts(store: GraphStore, ids: list[str]) -> list[tuple[str, str]]:
    """``(id, text)`` of the chunks still stored, in the order given: in one call where the
    store reads many at once, chunk by chunk where it cannot or where one is gone (a document
    edited or deleted since the retrieval)."""
    if ids and isinstance(store, ChunkBatchStore):
        try:
            return [(c.id, c.text) for c in store.get_chunks(ids)]
        except UnknownNodeError:
            pass
    out = []
    for c in ids:
        try:
            out.append((c, store.get_chunk(c).text))
        except UnknownNodeError:
            continue
    return out


def mark(trace: Trace, store: GraphStore, result: MemoryWrite) -> MemoryWrite:
    """After an applied write: the trace is marked memorized and saved (which also ends a
    shared store's claim on it)."""
    if result.applied:
        trace.memorized, trace.memory_result = True, result.to_dict()
        store.save_trace(trace.to_dict())
    return result


class Once:
    """Exactly one memory write per trace, whatever runs concurrently: threads of this
    process (the traces being written), and other processes through a shared store's
    :class:`~..protocols.TraceClaims` (PostgreSQL claims in the trace's row)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writing: set[str] = set()  # traces whose write is under way here

    def _claim(self, trace: Trace, store: GraphStore) -> bool:
        with self._lock:
            if trace.memorized or trace.trace_id in self._writing:
                return False
            self._writing.add(trace.trace_id)
        won = False
        try:  # a claim that raises (a store held too long) leaves the trace unclaimed
            won = not isinstance(store, TraceClaims) or store.claim_trace(trace.trace_id)
        finally:
            if not won:  # another process holds or finished it, or the claim failed
                with self._lock:
                    self._writing.discard(trace.trace_id)
        return won

    def write(self, trace: Trace, store: GraphStore, step: Step) -> Step:
        """``step``'s write, marked (:func:`mark`) before the claim ends, when this call wins
        the trace; else an "already memorized" skip. A claim whose write applied nothing is
        released, so the trace can be memorized later."""
        if not self._claim(trace, store):
            return skipped(trace, "already memorized")
        result = None
        try:
            result = yield from step
            return mark(trace, store, result)
        finally:
            if isinstance(store, TraceClaims) and not (result is not None and result.applied):
                store.release_trace(trace.trace_id)
            with self._lock:
                self._writing.discard(trace.trace_id)
