"""Benchmark harness: datasets, metrics, baselines, the runner and the scale test.

Run it from the repository root with ``python -m benchmarks.harness --help``. It is not part
of the installed package: the library and its own tests never import it
(``tools/import_floors.py`` checks the library side).
"""

from __future__ import annotations

from .data import Dataset, load_dataset
from .metrics import (
    all_gold_at_k,
    bootstrap_ci,
    evidence_recall,
    exact_match,
    f1_score,
    gold_matches,
    option_accuracy,
    recall_at_k,
)

__all__ = [
    "Dataset",
    "all_gold_at_k",
    "bootstrap_ci",
    "evidence_recall",
    "exact_match",
    "f1_score",
    "gold_matches",
    "load_dataset",
    "option_accuracy",
    "recall_at_k",
]
