"""``llm_navigation`` with a real model's replies, in every CI run: Qwen2.5-Coder-1.5B-Instruct's
traversal replies on the first sample questions of each set, at the library's default bounds,
recorded by

    python benchmarks/llm_navigation.py compare --data tests/data \\
        --sets hotpotqa_train100_sample musique_train100_sample --limit 3 \\
        --replies /tmp/i25-llm-replies.json --fixture tests/data/qwen2.5-1.5b_nav_replies.json

(the sample questions are the first of the dev sets, so their replies come from the dev run
of benchmarks/RESULTS.md §9) and replayed here by ``RecordedLLM``: always, auto and never on
each question's own graph, the auto decision checked against its signal and its result
against the two others, with no model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import sample_set

from remindrag_integrations import ReMindRAG
from remindrag_integrations.adapters.embeddings import default_embedder
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.testing import RecordedLLM

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "qwen2.5-1.5b_nav_replies.json"
pytestmark = pytest.mark.packaged_embedder  # run again under drift by make test
SETS = ("hotpotqa_train100_sample", "musique_train100_sample")
PER_SET = 3


@pytest.fixture(scope="module")
def runs() -> list[dict[str, Any]]:
    emb = default_embedder()  # the packaged MiniLM, as recorded
    out = []
    for name in SETS:
        questions, docs = sample_set(name)
        for item in questions[:PER_SET]:
            cfg = RetrievalConfig(llm_timeout=1800.0)
            eng = ReMindRAG(llm=None, embeddings=emb, retrieval_config=cfg)
            eng.insert([docs[p] for p in item["context_pids"]])
            row: dict[str, Any] = {"qid": item["qid"], "zero": eng.retrieve(item["question"])}
            for mode in ("never", "always", "auto"):
                llm = RecordedLLM(FIXTURE)
                row[mode] = (eng.retrieve(item["question"], llm=llm, llm_navigation=mode), llm)
            out.append(row)
    return out


def ids(r: Any) -> list[str]:
    return [c.chunk.id for c in r.chunks]


def tokens(r: Any) -> int:
    st = r.trace.costs.stages.get("traversal")
    return st.tokens if st else 0


def test_every_prompt_was_recorded(runs) -> None:
    assert RecordedLLM(FIXTURE).model == "local:qwen2.5-1.5b"
    for row in runs:
        for mode in ("never", "always", "auto"):
            _, llm = row[mode]
            assert not llm.missing, f"{row['qid']} {mode}: prompts changed:\n" + "\n".join(
                llm.missing
            )
        assert row["always"][1].served, "the real model walked every question"


def test_never_spends_no_token_and_returns_the_zero_token_result(runs) -> None:
    for row in runs:
        r, llm = row["never"]
        assert llm.served == [] and tokens(r) == 0
        assert ids(r) == ids(row["zero"])


def test_auto_asks_exactly_where_the_graph_pulls_beyond_the_top_k(runs) -> None:
    kinds = set()
    for row in runs:
        r, llm = row["auto"]
        nav = r.trace.navigation
        unsure = nav["outside"] is not None and nav["outside"] > 0.25
        assert nav["llm"] is unsure and bool(llm.served) is unsure
        kinds.add(unsure)
        same = row["always"] if unsure else row["never"]
        assert ids(r) == ids(same[0]) and tokens(r) == tokens(same[0])
    assert kinds == {True, False}, "the sample has sure and unsure questions"


def test_the_default_bounds_keep_a_real_first_pass_under_5k_tokens(runs) -> None:
    always = [row["always"][0] for row in runs]
    assert all(0 < tokens(r) <= 5000 for r in always)
    stops = {r.trace.stop_reason for r in always}
    assert stops <= {"no_progress", "max_hops", "enough", "token_budget"} and "no_progress" in stops
    assert sum(tokens(row["auto"][0]) for row in runs) < sum(tokens(r) for r in always)
