"""RecordedLLM finds a real model's reply by what the model was asked, not by the last bits of
the float scores that ordered its candidates: two near-tied candidates listed the other way
round (another processor's int8 kernels) replay the same pick; a candidate that is new or
gone is still reported as missing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from embed_noise import perturb

from remindrag_integrations.core.steps import _CURRENT_ASK, Ask
from remindrag_integrations.testing import (
    RecordedLLM,
    RecordingLLM,
    ScriptedLLM,
    ask_key,
    renumbered,
)

DATA = Path(__file__).parent / "data"


def traversal(choices: list[str], prompt: str | None = None) -> Ask:
    lines = "\n".join(f"{i}. {c}" for i, c in enumerate(choices, 1))
    context = {
        "query": "Who founded the bank?",
        "current": "e-000000000a",
        "options": [c for c in choices if c.startswith("e-")],
        "choices": choices,
        "subgraph": ["e-000000000a", "a-000000000b"],
        "chunks": ["c-000000000c"],
    }
    return Ask("traversal", prompt or f"Question\nChoices:\n{lines}", context)


@contextmanager
def asking(ask: Ask) -> Iterator[None]:
    token = _CURRENT_ASK.set(ask)  # what the engine's decider sets around an LLM call
    try:
        yield
    finally:
        _CURRENT_ASK.reset(token)


def record(ask: Ask, reply: str) -> dict:
    rec = RecordingLLM(ScriptedLLM(lambda _: reply), "scripted")
    with asking(ask):
        rec.complete(ask.prompt)
    return rec.fixture()


ORDER = ["e-0000000001", "e-0000000002", "e-0000000003", "a-0000000004"]


def test_a_reordered_prompt_replays_the_same_node() -> None:
    fixture = record(traversal(ORDER), '{"enough": false, "go": 2}')
    swapped = [ORDER[1], ORDER[0], *ORDER[2:]]  # a near-tie the other way round
    llm = RecordedLLM(fixture)
    ask = traversal(swapped)
    assert ask.prompt != traversal(ORDER).prompt and ask_key(ask) == ask_key(traversal(ORDER))
    with asking(ask):
        reply = llm.complete(ask.prompt).text
    assert json.loads(reply) == {"enough": False, "go": 1}  # e-0000000002, now listed first
    assert llm.missing == [] and llm.reordered == 1


def test_the_exact_prompt_is_served_as_recorded() -> None:
    fixture = record(traversal(ORDER), '{"enough": false, "go": 3}')
    llm = RecordedLLM(fixture)
    with asking(traversal(ORDER)):
        assert llm.complete(traversal(ORDER).prompt).text == '{"enough": false, "go": 3}'
    assert llm.reordered == 0 and len(llm.served) == 1


@pytest.mark.parametrize(
    "now",
    [
        [*ORDER, "e-0000000009"],  # a new candidate: another question for the model
        ["e-0000000001", "e-0000000003", "a-0000000004"],  # its pick is gone
    ],
)
def test_changed_candidates_are_still_missing(now: list[str]) -> None:
    fixture = record(traversal(ORDER), '{"enough": false, "go": 2}')
    llm = RecordedLLM(fixture)
    with asking(traversal(now)):
        c = llm.complete(traversal(now).prompt)
    assert c.text == "" and len(llm.missing) == 1 and "traversal" in llm.missing[0]


def test_records_that_disagree_on_one_ask_are_not_guessed() -> None:
    first = record(traversal(ORDER), '{"enough": false, "go": 1}')
    second = record(traversal(ORDER, prompt="another wording"), '{"enough": false, "go": 3}')
    llm = RecordedLLM({"replies": {**first["replies"], **second["replies"]}})
    ask = traversal([ORDER[2], ORDER[1], ORDER[0], ORDER[3]])
    with asking(ask):
        assert llm.complete(ask.prompt).text == ""
    assert len(llm.missing) == 1


def test_stop_replies_and_named_targets_need_no_renumbering() -> None:
    assert renumbered('{"enough": true}', ORDER, ORDER[::-1]) == '{"enough": true}'
    named = '{"enough": false, "go": "e-0000000003"}'
    assert renumbered(named, ORDER, ORDER[::-1]) == named
    assert renumbered('{"go": "#4"}', ORDER, ORDER[::-1]) == '{"go": "#1"}'


def test_the_fixtures_can_be_found_by_what_they_ask() -> None:
    """Every recorded reply of the suite carries its ask key (and a traversal reply its
    choices in prompt order), so a reordered prompt finds it."""
    for path in sorted(DATA.glob("qwen2.5-1.5b_*replies.json")):
        replies = json.loads(path.read_text(encoding="utf-8"))["replies"]
        assert replies and all(r.get("ask") for r in replies.values()), path.name
        trav = [r for r in replies.values() if r["stage"] == "traversal"]
        assert all(isinstance(r.get("choices"), list) for r in trav), path.name


def test_the_noise_moves_cosines_by_about_its_scale() -> None:
    """The processor-drift mode's noise (tests/embed_noise.py): seeded by the text, so the
    same text gets the same vector; rows stay unit; cosines move, but only a little."""
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((50, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    texts = [f"text {i}" for i in range(50)]
    a, b = perturb(texts, vecs, 1e-3), perturb(texts, vecs, 1e-3)
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    shift = np.abs(a @ a.T - vecs @ vecs.T)[np.triu_indices(50, 1)]
    assert 0.5e-3 < float(np.median(shift)) < 2e-3  # |N(0, 1e-3)| has median 0.67e-3 ... 1e-3
