"""Sentence-aligned token chunking with provenance."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from remindrag_integrations import Document, IndexConfig
from remindrag_integrations.core.indexing import make_chunks
from remindrag_integrations.core.text import chunk_text, count_tokens


def test_sentences_are_never_split_when_they_fit() -> None:
    text = "Alpha beta gamma. Delta epsilon! Zeta eta theta? Iota kappa."
    spans = chunk_text(text, max_tokens=8)
    chunks = [text[s.start : s.end] for s in spans]
    assert chunks == ["Alpha beta gamma. Delta epsilon!", "Zeta eta theta? Iota kappa."]


def test_overlap_repeats_trailing_sentences() -> None:
    text = " ".join(f"Sentence number {i}." for i in range(10))
    spans = chunk_text(text, max_tokens=12, overlap_tokens=4)
    chunks = [text[s.start : s.end] for s in spans]
    for a, b in zip(chunks, chunks[1:]):
        assert a.split(".")[-2].strip() + "." in b


def test_a_long_sentence_is_cut_at_words() -> None:
    text = "word " * 100
    spans = chunk_text(text, max_tokens=30)
    assert len(spans) == 4
    assert all(count_tokens(text[s.start : s.end]) <= 30 for s in spans)


def test_chunk_offsets_point_into_the_document() -> None:
    doc = Document("d", "First sentence here.\n\nSecond one follows. " * 50)
    chunks = make_chunks(doc, IndexConfig(chunk_tokens=40))
    assert len(chunks) > 5
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text
        assert c.id.startswith("c-") and c.doc_id == "d"
    assert [c.index for c in chunks] == list(range(len(chunks)))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=600), st.integers(4, 60))
def test_chunks_cover_every_sentence_within_budget(text: str, size: int) -> None:
    spans = chunk_text(text, size)
    for s in spans:
        assert count_tokens(text[s.start : s.end]) <= size
    covered = "".join(text[s.start : s.end] for s in spans)
    assert "".join(covered.split()) == "".join(text.split())
