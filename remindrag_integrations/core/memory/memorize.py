"""Memorize (docs/method.md §3): which support a retrieval's write uses, and the claim that
writes each trace exactly once.

The support — what helped — is, in this order: chunk or edge ids a person or a known answer
names (``supporting``); else the answer's citations when ``memorize_judge="citations"`` (no
LLM call); else the judge: the LLM filter, or without an LLM the ``self_memorize`` policy.
Named support is checked before any write and, with a thumbs-up, made to come back for the
question (:mod:`.assure`). The write itself is :func:`.write.write`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np

from ..config import RetrievalConfig
from ..prompts import FILTER_PROMPT
from ..protocols import GraphStore, TraceClaims
from ..steps import Step
from ..types import MemoryWrite, Trace
from .assure import Requery, assure
from .filter import Support, citations, llm_filter, similarity_filter
from .write import skipped, write


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
        support, ignored = citations(trace, answer, cited)
        if cfg.memorize_judge == "citations" and support.chunks:  # the answer's word, no LLM
            result = yield from self.named(trace, support, True, named=False)
            return replace(result, ignored_citations=ignored)
        if not trace.subgraph_edges:
            return skipped(trace, "nothing was traversed")
        elif uses_llm:
            chars = cfg.prompt.chunk_chars
            support = yield from llm_filter(
                trace, self.store, answer or "", chars, self.filter_prompt
            )
        elif cfg.self_memorize == "off":
            return skipped(trace, "no judge and self_memorize='off'")
        else:  # no judge: remember without penalising, unless self_memorize="full"
            top = len(trace.chunk_ids) if cfg.self_memorize == "cache" else cfg.navigator.filter_top
            support = yield from similarity_filter(trace, self.store, top)
            judged = cfg.self_memorize == "full"
        result = write(
            trace, self.store, support, max_depth=cfg.memory.max_bridge_hops, penalise=judged
        )
        return replace(result, ignored_citations=ignored)

    def named(self, trace: Trace, support: Support, helpful: bool, *, named: bool = True) -> Step:
        """The write of support the caller's word gives (citations, thumbs, ``supporting=``);
        with ``named`` (a person named the ids) every id is checked first and each named
        chunk is made to come back for the question (:mod:`.assure`)."""
        cfg, store = self.cfg, self.store
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
        q = np.asarray(trace.query_embedding, dtype=np.float32)
        return (yield from assure(store, self.requery, trace.query, q, result, support.chunks))


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
        if isinstance(store, TraceClaims) and not store.claim_trace(trace.trace_id):
            with self._lock:  # another process holds or finished it
                self._writing.discard(trace.trace_id)
            return False
        return True

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
