"""Parsers: golden cases plus fuzzed garbage (always a typed error or a legal result)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remindrag_integrations.core.ids import EDGE_ID_RE, NODE_ID_RE
from remindrag_integrations.core.navigate.move import parse_move
from remindrag_integrations.core.prompts import (
    extract_json,
    parse_citations,
    parse_extraction,
    parse_filter,
    parse_pre_query,
)
from remindrag_integrations.errors import LLMOutputError


def test_json_in_fence_with_chatter() -> None:
    reply = 'Let me think.\n```json\n{"enough": false, "action": "forward", "node": "e-0123456789"}\n```\nDone.'
    m = parse_move(reply)
    assert (m.enough, m.action, m.node) == (False, "forward", "e-0123456789")


def test_json_embedded_in_prose() -> None:
    assert parse_move('Sure! {"enough": true} is my answer').enough is True


def test_enough_as_string() -> None:
    assert parse_move('{"enough": "yes"}').enough is True


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "no json here",
        '{"enough": false, "action": "forward"}',
        '{"enough": false, "go": ""}',
        '{"enough": false, "go": true}',
        '{"enough": false, "go": ["3"]}',
        '["forward", "e-0123456789"]',
    ],
)
def test_bad_moves_raise_typed_error(reply: str) -> None:
    with pytest.raises(LLMOutputError):
        parse_move(reply)


@pytest.mark.parametrize(
    ("reply", "target"),
    [
        ('{"enough": false, "go": 3}', "3"),
        ('{"enough": false, "go": "n3"}', "n3"),
        ('{"enough": false, "action": "forward", "node": "Scott Derrickson"}', "Scott Derrickson"),
        ('{"enough": false, "action": "jump", "node": "e-0123456789"}', "e-0123456789"),
        ('{"enough": "no", "target": "  Ed   Wood "}', "Ed Wood"),
    ],
)
def test_a_move_keeps_its_target_as_written(reply: str, target: str) -> None:
    """The target is resolved against the choices by the navigator, not by the parser."""
    m = parse_move(reply)
    assert (m.enough, m.node) == (False, target)


def test_extraction_golden() -> None:
    reply = json.dumps(
        {
            "title": "Scott Derrickson, director",
            "entities": ["Scott Derrickson", "  Sinister ", "scott derrickson", 7],
            "triples": [
                ["Scott Derrickson", "Scott Derrickson directed Sinister.", "Sinister"],
                ["bad"],
                {"subject": "Sinister", "sentence": "Sinister is a 2012 film.", "object": "2012"},
            ],
        }
    )
    x = parse_extraction(reply)
    assert x.title == "Scott Derrickson, director"
    assert x.entities == ["Scott Derrickson", "Sinister", "7", "2012"]
    assert x.triples == [
        ("Scott Derrickson", "Scott Derrickson directed Sinister.", "Sinister"),
        ("Sinister", "Sinister is a 2012 film.", "2012"),
    ]


def test_extraction_rejects_non_list_triples() -> None:
    with pytest.raises(LLMOutputError):
        parse_extraction('{"title": "t", "entities": [], "triples": "none"}')


def test_filter_drops_ids_of_the_wrong_syntax() -> None:
    chunks, edges = parse_filter(
        '{"chunks": ["c-0123456789", "chunk:1", "1"], '
        '"edges": ["r-abcdef0123", "Scott -> Sinister"]}'
    )
    assert chunks == ["c-0123456789"] and edges == ["r-abcdef0123"]


def test_pre_query() -> None:
    assert parse_pre_query('{"need_retrieval": "no", "subquestions": []}', 1) == (False, [])
    assert parse_pre_query('{"need_retrieval": true, "subquestions": ["a", "b"]}', 1) == (
        True,
        ["a"],
    )


def test_citations_only_known_ids_in_order() -> None:
    text = "Yes [c-bbbbbbbbbb] and [c-aaaaaaaaaa], also [c-ffffffffff] and c-bbbbbbbbbb."
    assert parse_citations(text, {"c-aaaaaaaaaa", "c-bbbbbbbbbb"}) == [
        "c-bbbbbbbbbb",
        "c-aaaaaaaaaa",
    ]


def test_extract_json_type_mismatch() -> None:
    with pytest.raises(LLMOutputError):
        extract_json("[1, 2, 3]", dict)
    assert extract_json("text [1, 2] more", list) == [1, 2]


garbage = st.one_of(
    st.text(max_size=300),
    st.builds(
        lambda d: json.dumps(d),
        st.dictionaries(
            st.sampled_from(
                [
                    "enough",
                    "action",
                    "node",
                    "chunks",
                    "edges",
                    "title",
                    "entities",
                    "triples",
                    "need_retrieval",
                    "subquestions",
                ]
            ),
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                lambda c: (
                    st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=3)
                ),
                max_leaves=10,
            ),
            max_size=6,
        ),
    ),
    st.builds(lambda a, b: f"{a}```json\n{b}\n```", st.text(max_size=50), st.text(max_size=80)),
)


@settings(max_examples=400, deadline=None)
@given(garbage)
def test_fuzzed_replies_give_typed_error_or_legal_result(reply: str) -> None:
    try:
        m = parse_move(reply)
        assert m.enough or (isinstance(m.node, str) and 0 < len(m.node) <= 200)
    except LLMOutputError:
        pass
    try:
        chunks, edges = parse_filter(reply)
        assert all(NODE_ID_RE.match(c) for c in chunks)
        assert all(EDGE_ID_RE.match(e) for e in edges)
    except LLMOutputError:
        pass
    try:
        x = parse_extraction(reply)
        assert all(isinstance(e, str) and e for e in x.entities)
        assert all(len(t) == 3 for t in x.triples)
    except LLMOutputError:
        pass
    try:
        need, subs = parse_pre_query(reply, 2)
        assert isinstance(need, bool) and len(subs) <= 2
    except LLMOutputError:
        pass
