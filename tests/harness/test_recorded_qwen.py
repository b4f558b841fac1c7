"""What a real model says, in every CI run: Qwen2.5-Coder-1.5B-Instruct's replies on the first
HotpotQA sample questions, recorded once by

    python -m benchmarks.harness real --data tests/data \
        --set hotpotqa_train100_sample --llm local:qwen2.5-1.5b --embedder hash --limit 2 \
        --k 5 --record tests/data/qwen2.5-1.5b_replies.json

and replayed here through the real navigator, filter and answer steps by ``RecordedLLM``
(the bench protocol runs exactly as it did with the model). The recording was made on graphs
built by the zero-token extractor of that time, so the replay builds them with it
(``benchmarks/legacy_extractor.py``): the navigation prompts list the graph's entity names, and the
recorded replies answer those prompts. It was also made before the first-pass prior existed,
so the replay runs with ``prior={"enabled": False}`` (the paper's cosine-only first pass): together they
give the model's prompts back byte for byte. When chunk ids came to hash their own text the answer and filter prompts, which show chunk ids, changed: their 4 replies were
recorded again from the same model on the same protocol, every other reply replayed as it
was (the replies no prompt asks for any more were dropped). When the filter came to be shown
every chunk the answer was written from, the returned first-pass fill included, and an
abstaining answer ("I do not know.") came to write nothing, the one changed filter
prompt and the walk after it (2 replies) were recorded again the same way."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.harness.data import load_dataset
from benchmarks.harness.real import run_real
from benchmarks.harness.resources import make_embedder
from remindrag_integrations.core import indexing
from remindrag_integrations.testing import RecordedLLM

DATA = Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from legacy_extractor import legacy_extraction  # noqa: E402  (benchmarks/: not shipped)

FIXTURE = DATA / "qwen2.5-1.5b_replies.json"


@pytest.fixture(scope="module")
def replayed() -> tuple[dict, RecordedLLM]:
    llm = RecordedLLM(FIXTURE)
    ds = load_dataset("hotpotqa_train100_sample", DATA).head(2)
    with pytest.MonkeyPatch.context() as mp:  # the graphs the recording saw
        mp.setattr(indexing, "rule_based_extraction", legacy_extraction)
        res, _ = run_real(
            ds, llm, make_embedder("hash"), k=5, overrides={"prior": {"enabled": False}}
        )
    return res, llm


def walks(res: dict) -> list[dict]:
    out = []
    for r in res["records"]:
        out += [r["first"], r["same_after"], *r["similar_before"], *r["similar_after"]]
    return out


def test_every_prompt_was_recorded(replayed) -> None:
    res, llm = replayed
    assert llm.model == "local:qwen2.5-1.5b"
    assert not llm.missing, "prompts changed since the recording:\n" + "\n".join(llm.missing)
    assert {h["stage"] for h in llm.served} >= {"traversal", "answer", "memorize"}


def test_no_walk_ends_because_of_an_unusable_reply(replayed) -> None:
    res, llm = replayed
    ws = walks(res)
    assert len(ws) >= 4
    assert all(w["stop_reason"] not in ("invalid_llm_output", "") for w in ws)
    assert all(not w["stop_reason"].startswith("llm_error") for w in ws)
    moved = [w for w in ws if w["decisions"] > 0]
    assert moved, "the real replies drove real walks"


def test_the_real_walks_use_the_prefix_cache_and_stay_in_budget(replayed) -> None:
    res, _ = replayed
    first = [r["first"] for r in res["records"]]
    assert all(w["prompt_tokens"] + w["completion_tokens"] <= 6000 for w in first)
    later = sum(w["later_prompt_tokens"] for w in first)
    cached = sum(w["later_cached_tokens"] for w in first)
    # llama.cpp reported reusing a large part of every later step's prompt (the log before
    # the choices); on these short walks the fresh tail (new passage + choices) is about half
    assert all(w["later_cached_tokens"] > 0 for w in first if w["decisions"] > 1)
    assert later and cached / later >= 0.4


def test_memorizing_through_the_real_filter_cuts_the_second_ask(replayed) -> None:
    res, _ = replayed
    applied = [r for r in res["records"] if r["memorize"]["applied"]]
    assert applied
    for r in applied:
        before, after = r["first"], r["same_after"]
        assert after["prompt_tokens"] < before["prompt_tokens"]
        assert after["recall@5"] >= before["recall@5"]


def test_an_unrecorded_prompt_is_named_not_guessed(hotpot) -> None:
    from remindrag_integrations import ReMindRAG
    from remindrag_integrations.testing import HashEmbedder

    qs, rows = hotpot
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    eng.insert([(p, rows[p]["text"]) for p in qs[0]["context_pids"]])
    llm = RecordedLLM({"model": "none", "replies": {}})
    r = eng.retrieve(
        qs[0]["question"], llm=llm, max_iterations=2, max_hops=2, llm_navigation="always"
    )
    assert llm.missing and llm.missing[0].startswith("traversal: ")
    assert qs[0]["question"] in llm.missing[0]
    assert r.chunks  # an empty reply is unusable: re-asked, then the zero-token fallback
