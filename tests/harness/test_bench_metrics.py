"""The benchmark metrics on hand-made cases."""

from __future__ import annotations

import pytest

from benchmarks.harness import metrics as M


def test_recall_that_must_be_half_is_half() -> None:
    ranked = [{"p1"}, set(), {"p2"}]
    assert M.recall_at_k(ranked, ["p1", "p2"], 2) == 0.5
    assert M.recall_at_k(ranked, ["p1", "p2"], 3) == 1.0
    assert M.all_gold_at_k(ranked, ["p1", "p2"], 2) == 0.0
    assert M.all_gold_at_k(ranked, ["p1", "p2"], 3) == 1.0


def test_recall_counts_a_gold_passage_once_and_handles_no_gold() -> None:
    assert M.recall_at_k([{"p1"}, {"p1"}], ["p1", "p2", "p3", "p4"], 5) == 0.25
    assert M.recall_at_k([{"p1"}], [], 5) == 0.0
    assert M.recall_at_k([], ["p1"], 5) == 0.0


def test_gold_matching_by_passage_text_or_gold_sentence() -> None:
    gold = {"A": "Alpha is a city.  It has a port.", "B": "Beta was founded in 1900. It is old."}
    # the chunk holds passage A (with different whitespace) and one gold sentence of B
    chunk = "Title\nalpha is a city. It has a port.\nBeta was founded in 1900."
    assert M.gold_matches(chunk, gold, ["Beta was founded in 1900."]) == {"A", "B"}
    # without the gold sentence, B's partial text does not count
    assert M.gold_matches(chunk, gold) == {"A"}
    # a gold sentence that belongs to no gold passage matches nothing
    assert M.gold_matches("Gamma.", gold, ["Gamma."]) == set()


def test_evidence_recall_uses_trigram_coverage_threshold() -> None:
    chunks = ["the quick brown fox jumps over the lazy dog"]
    covered = "quick brown fox jumps over"  # every trigram present
    half = "the quick brown cat sat on a mat"  # 1 of 6 trigrams present
    assert M.evidence_recall(chunks, [covered, half]) == 0.5
    assert M.evidence_recall(chunks, ["quick brown"]) == 1.0  # short: one bigram
    assert M.evidence_recall(chunks, []) == 0.0


def test_evidence_threshold_is_sixty_percent() -> None:
    chunk = ["a b c d e f"]
    # trigrams of "a b c d e x y": abc bcd cde dex exy -> 3 of 5 = 60 %: covered
    assert M.evidence_covered("a b c d e x y", chunk)
    # "a b c d x y z": abc bcd cdx dxy xyz -> 2 of 5 = 40 %: not covered
    assert not M.evidence_covered("a b c d x y z", chunk)


@pytest.mark.parametrize(
    ("pred", "answers", "em", "f1"),
    [
        ("The Eiffel Tower", ["Eiffel Tower"], 1.0, 1.0),
        ("eiffel tower, paris", ["Eiffel Tower"], 0.0, 0.8),
        ("yes", ["no"], 0.0, 0.0),
        ("yes", ["yes"], 1.0, 1.0),
        ("no idea", ["no"], 0.0, 0.0),
        ("Paris", ["London", "paris."], 1.0, 1.0),
        ("", ["x"], 0.0, 0.0),
    ],
)
def test_em_f1_golden_cases(pred: str, answers: list[str], em: float, f1: float) -> None:
    assert M.exact_match(pred, answers) == em
    assert M.f1_score(pred, answers) == pytest.approx(f1)


def test_option_accuracy() -> None:
    assert M.option_letter("Answer: (B) because") == "B"
    assert M.option_letter("C. The third") == "C"
    assert M.option_letter("none of these") is None
    assert M.option_accuracy(["(A)", "B", "D"], ["A", "C", "D"]) == pytest.approx(2 / 3)


def test_bootstrap_ci_contains_the_mean_and_is_deterministic() -> None:
    values = [0.0, 1.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0]
    lo, hi = M.bootstrap_ci(values)
    assert lo <= M.mean(values) <= hi
    assert 0.0 <= lo < hi <= 1.0
    assert M.bootstrap_ci(values) == (lo, hi)
    assert M.bootstrap_ci([0.7] * 20) == pytest.approx((0.7, 0.7))


def test_percentiles() -> None:
    vals = list(range(1, 101))
    assert M.percentile(vals, 50) == pytest.approx(50.5)
    assert M.percentile(vals, 95) == pytest.approx(95.05)
