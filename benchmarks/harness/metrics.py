"""Pure metric functions: passage recall, AllGold, LooGLE evidence recall, EM / F1 (HotpotQA
normalisation), QuALITY option accuracy, bootstrap intervals and percentiles."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

_WS = re.compile(r"\s+")
_WORD = re.compile(r"\w+")


def _flat(text: str) -> str:
    return _WS.sub(" ", text).strip().lower()


# --- passage matching and recall ------------------------------------------------------------
def gold_matches(
    chunk_text: str, gold: Mapping[str, str], sentences: Iterable[str] = ()
) -> set[str]:
    """The gold passages (pid -> passage text) a returned chunk counts for: the chunk contains
    the passage's text, or one of the gold ``sentences`` that belongs to that passage
    (whitespace and case are ignored)."""
    chunk = _flat(chunk_text)
    flat_sents = [s for s in (_flat(x) for x in sentences) if s]
    hits = set()
    for pid, text in gold.items():
        passage = _flat(text)
        if (passage and passage in chunk) or any(s in passage and s in chunk for s in flat_sents):
            hits.add(pid)
    return hits


def recall_at_k(ranked: Sequence[set[str]], gold: Iterable[str], k: int) -> float:
    """Share of ``gold`` covered by the first ``k`` results (each result: the gold ids it
    counts for). No gold: 0."""
    want = set(gold)
    if not want:
        return 0.0
    got = set().union(*ranked[:k]) if ranked[:k] else set()
    return len(want & got) / len(want)


def all_gold_at_k(ranked: Sequence[set[str]], gold: Iterable[str], k: int) -> float:
    """1.0 when every gold id is covered by the first ``k`` results."""
    return 1.0 if recall_at_k(ranked, gold, k) == 1.0 else 0.0


# --- LooGLE evidence recall -----------------------------------------------------------------
def _ngrams(text: str, n: int = 3) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    n = min(n, len(words)) if words else n
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def evidence_covered(
    sentence: str, chunk_texts: Sequence[str], threshold: float = 0.6, n: int = 3
) -> bool:
    """A sentence is covered when ≥ ``threshold`` of its word n-grams occur in the chunks
    (sentences shorter than n words use one n-gram of their whole length)."""
    grams = _ngrams(sentence, n)
    if not grams:
        return False
    size = len(next(iter(grams)))
    have: set[tuple[str, ...]] = set()
    for t in chunk_texts:
        have |= _ngrams(t, size) if size < n else _ngrams(t, n)
    return len(grams & have) / len(grams) >= threshold


def evidence_recall(
    chunk_texts: Sequence[str], evidence: Sequence[str], threshold: float = 0.6
) -> float:
    """Share of evidence sentences covered by the returned chunks (no evidence: 0)."""
    ev = [e for e in evidence if e.strip()]
    if not ev:
        return 0.0
    return sum(evidence_covered(e, chunk_texts, threshold) for e in ev) / len(ev)


# --- answers --------------------------------------------------------------------------------
def normalize_answer(s: str) -> str:
    """HotpotQA / SQuAD normalisation: lower case, no punctuation, articles or extra space."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(a) for a in answers))


def _f1(prediction: str, truth: str) -> float:
    p, t = normalize_answer(prediction), normalize_answer(truth)
    # HotpotQA: yes / no / noanswer only match exactly
    if (p in ("yes", "no", "noanswer") or t in ("yes", "no", "noanswer")) and p != t:
        return 0.0
    pt, tt = p.split(), t.split()
    common = Counter(pt) & Counter(tt)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pt), same / len(tt)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, answers: Sequence[str]) -> float:
    """Best token F1 over the acceptable answers."""
    return max((_f1(prediction, a) for a in answers), default=0.0)


_OPTION = re.compile(r"\(?\b([A-D])\b\)?")


def option_letter(text: str) -> str | None:
    """The first option letter A–D named in a reply ("(B)", "B.", "Answer: B")."""
    m = _OPTION.search(text.strip())
    return m.group(1) if m else None


def option_accuracy(predictions: Sequence[str], gold: Sequence[str]) -> float:
    """QuALITY: share of replies whose option letter is the gold letter."""
    if not gold:
        return 0.0
    return sum(option_letter(p) == g.strip().upper() for p, g in zip(predictions, gold)) / len(gold)


# --- statistics -----------------------------------------------------------------------------
def bootstrap_ci(
    values: Sequence[float], n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (deterministic for a given seed)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_resamples, x.size))].mean(axis=1)
    lo = (1.0 - confidence) / 2.0
    return float(np.quantile(means, lo)), float(np.quantile(means, 1.0 - lo))


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")
