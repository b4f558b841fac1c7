"""A memory write and a document change that land together: ``memorize``, ``feedback`` and
``teach`` apply all of their write or none of it, report which, and record an applied write
before anything can fail, so no retry applies it twice. On both stores.

The race is made deterministic: the delete runs right after the write (or right before it),
from inside the write path, as another thread's delete would land there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pg_fixture
import pytest
from capitals import QUESTION, TEXTS

import remindrag_integrations.core.memory.memorize as memorizing
import remindrag_integrations.core.memory.teach as teaching
from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.testing import HashEmbedder

pg_dsn = pg_fixture.pg_dsn
make_pg_store = pg_fixture.make_pg_store


@pytest.fixture(params=["memory", "postgres"])
def rag(request: pytest.FixtureRequest) -> Iterator[ReMindRAG]:
    if request.param == "memory":
        engine = ReMindRAG(embeddings=HashEmbedder())
    else:
        make = request.getfixturevalue("make_pg_store")
        engine = ReMindRAG(embeddings=HashEmbedder(), store=make("races"))
    engine.insert([Document(k, v) for k, v in TEXTS.items()])
    yield engine


def chunk_of(rag: ReMindRAG, doc_id: str) -> str:
    return rag.store.document_chunks(doc_id)[0].id


def around_write(
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    then: Callable[[], None],
    *,
    before: bool = False,
    nth: int = 1,
) -> None:
    """``then()`` once: right after the first memory write of ``module`` that applied, or
    (``before``) right before its ``nth`` write."""
    original = module.write
    calls: list[int] = []
    fired: list[bool] = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if before and not fired and len(calls) == nth:
            fired.append(True)
            then()
        out = original(*args, **kwargs)
        if not before and not fired and out.applied:
            fired.append(True)
            then()
        return out

    monkeypatch.setattr(module, "write", racing)


def test_a_delete_after_memorizes_write_keeps_it_reports_it_and_a_retry_writes_nothing(
    rag: ReMindRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = rag.retrieve(QUESTION)
    warsaw = chunk_of(rag, "warsaw.txt")
    around_write(monkeypatch, memorizing, lambda: rag.delete(["warsaw.txt"]))
    w = rag.memorize(r.trace_id, supporting=[warsaw])  # raised UnknownNodeError before
    assert w.applied and w.not_found == [warsaw]  # written, and not seen back: reported
    assert rag.trace(r.trace_id).memorized
    assert rag.memory_stats().writes_applied == 1
    again = rag.memorize(r.trace_id, supporting=[warsaw])
    assert not again.applied and again.skipped_reason == "already memorized"
    assert rag.memory_stats().writes_applied == 1


def test_an_error_after_the_write_still_records_it_so_a_retry_applies_nothing(
    rag: ReMindRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = rag.retrieve(QUESTION)
    warsaw = chunk_of(rag, "warsaw.txt")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the disk went away during the check")
        yield  # a step

    monkeypatch.setattr(memorizing, "assure", broken)
    with pytest.raises(OSError):
        rag.memorize(r.trace_id, supporting=[warsaw])
    touched = rag.memory_stats().touched_edges
    assert touched > 0 and rag.trace(r.trace_id).memorized  # applied, and recorded so
    monkeypatch.undo()
    again = rag.memorize(r.trace_id, supporting=[warsaw])
    assert not again.applied and again.skipped_reason == "already memorized"
    assert rag.memory_stats().touched_edges == touched


def test_a_thumbs_up_on_a_passage_deleted_after_the_write_keeps_it_and_reports_it(
    rag: ReMindRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = rag.retrieve(QUESTION)
    warsaw = chunk_of(rag, "warsaw.txt")
    around_write(monkeypatch, memorizing, lambda: rag.delete(["warsaw.txt"]))
    w = rag.feedback(r.trace_id, True, [warsaw])
    assert w.applied and w.not_found == [warsaw]


def test_teach_with_a_delete_before_a_pairs_write_teaches_the_others_and_says_which(
    rag: ReMindRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    warsaw, rome = chunk_of(rag, "warsaw.txt"), chunk_of(rag, "rome.txt")
    pairs = [
        {"question": QUESTION, "chunk_ids": [warsaw]},
        {"question": "Which river flows through Rome?", "chunk_ids": [rome]},
    ]
    # the second pair's passage is deleted just before its write
    around_write(monkeypatch, teaching, lambda: rag.delete(["rome.txt"]), before=True, nth=2)
    report = rag.teach(pairs)  # raised UnknownNodeError with the first pair written before
    first, second = report.results
    assert first.reached == [warsaw] and not first.not_found
    assert second.enhanced == 0 and second.not_found == [rome] and second.reached == []
    assert report.taught == 1 and rag.memory_stats().writes_applied == 1
    again = rag.retrieve(QUESTION)
    assert again.chunks[0].chunk.id == warsaw  # the first pair's write stands
