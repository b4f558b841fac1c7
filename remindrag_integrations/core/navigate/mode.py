"""When the LLM walks (``RetrievalConfig.llm_navigation``): always, never, or only when the
zero-token first pass is unsure of its top k.

The first pass (:mod:`..prior`) ranks every candidate passage; its top ``k`` is what a
zero-token query returns. ``auto`` reads how sure that cut is from the graph's pull beyond
it: ``outside``, the highest graph (PageRank) part of the passages ranked k+1 to 2k. A
passage the question's entities reach through the graph but that dense and lexical scores
leave out is where a bridge passage hides, and where a walk that reads can change the top k.
``auto`` asks the LLM when ``outside > navigator.llm_threshold``. Two more signals are kept
beside it for the trace: ``margin``, the k-th first-pass score minus the (k+1)-th, and
``agreement``, the share of the fused top k that the dense top k also holds. On 200 dev
questions the pull found the first passes that missed a gold passage best (ROC AUC 0.70;
margin 0.50, agreement 0.61): benchmarks/RESULTS.md §9.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..walk import Walk


def certainty(walk: Walk) -> dict[str, float | None]:
    """The first pass's signals about its top ``k`` (``None``: not defined, e.g. no candidate
    beyond the k-th)."""
    p, k = walk.prior, walk.cfg.k
    if p is None:
        return {"outside": None, "margin": None, "agreement": None}
    ranked = p.ranked()
    top = ranked[:k]
    beyond = ranked[k : 2 * k]
    outside = max(p.parts[c]["graph"] for c in beyond) if beyond else None
    margin = p.score[ranked[k - 1]] - p.score[ranked[k]] if beyond else None
    by_cos = sorted(ranked, key=lambda c: (-p.parts[c]["cosine"], c))[:k]
    agreement = len(set(top) & set(by_cos)) / len(top) if top else None
    return {"outside": outside, "margin": margin, "agreement": agreement}


@dataclass(frozen=True)
class Navigation:
    """The decision who walks (a stage's frozen result): the ``llm_navigation`` mode, whether
    the LLM walks, why, and the first pass's signals (:func:`certainty`) when they were read;
    the trace keeps :meth:`to_dict` as ``navigation``."""

    mode: str
    llm: bool
    reason: str
    signals: Mapping[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "llm": self.llm, "reason": self.reason, **self.signals}


def decide(walk: Walk, has_llm: bool) -> Navigation:
    """Whether this query's walk asks the LLM, and why (``has_llm``: the navigator's
    declared ``spends_tokens``)."""
    cfg = walk.cfg
    mode = cfg.llm_navigation
    if not has_llm:
        return Navigation(mode, False, "no LLM: zero-token walk")
    if mode == "always":
        return Navigation(mode, True, "llm_navigation='always'")
    if mode == "never":
        return Navigation(mode, False, "llm_navigation='never'")
    signals = certainty(walk)
    outside, t = signals["outside"], cfg.navigator.llm_threshold
    if walk.prior is None or not walk.prior.graph:
        reason, ask = "no graph signal in the first pass: the LLM walks", True
    elif outside is None:
        reason, ask = f"at most k={cfg.k} candidates: nothing to choose", False
    elif outside > t:
        reason = (
            f"unsure: a passage ranked {cfg.k + 1}-{2 * cfg.k} has graph pull {outside:.2f} > {t}"
        )
        ask = True
    else:
        reason = f"sure: graph pull beyond the top {cfg.k} is {outside:.2f} <= {t}"
        ask = False
    return Navigation(mode, ask, reason, signals)
