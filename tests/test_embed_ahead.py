"""Embedding ahead (``IndexConfig.embed_ahead``, core/insert.py ``ahead``): a zero-token
insert extracts and embeds the next batch on a thread while this one is merged and written.
The graph, the vectors and the embedder's calls are the serial insert's; a failure in either
stage loses no committed batch and leaves nothing running."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from graph_compare import graph, passages, same

from remindrag_integrations import IndexConfig, ReMindRAG
from remindrag_integrations.adapters.embeddings import SentenceTransformerEmbedder
from remindrag_integrations.core import insert as inserting
from remindrag_integrations.errors import EmbeddingError
from remindrag_integrations.testing import HashEmbedder


class Recording(HashEmbedder):
    """The hash embedder, recording each call's texts and the thread it ran on; ``fail_on``:
    a call with this text raises."""

    def __init__(self, dim: int = 64, fail_on: str | None = None) -> None:
        super().__init__(dim)
        self.calls: list[tuple[str, ...]] = []
        self.threads: set[str] = set()
        self.fail_on = fail_on

    def embed(self, texts: Any) -> np.ndarray:
        self.calls.append(tuple(texts))
        self.threads.add(threading.current_thread().name)
        if self.fail_on is not None and self.fail_on in texts:
            raise EmbeddingError("the embedding service is down (test)")
        return super().embed(texts)


def config(ahead: bool) -> IndexConfig:
    # batches of 30 documents, small chunks, a low synonym threshold (names merge into the
    # store's and the batch's own): several batches that share names
    return IndexConfig(
        embed_ahead=ahead,
        chunk_tokens=64,
        insert_batch_documents=30,
        synonym_threshold=0.6,
        workers=1,
    )


def build(ahead: bool, docs: list[tuple[str, str]], **kw: Any) -> tuple[ReMindRAG, Recording]:
    emb = Recording(**kw)
    engine = ReMindRAG(embeddings=emb, index_config=config(ahead))
    engine.insert(docs)
    return engine, emb


def ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("remindrag-embed-ahead")]


def test_the_graph_and_the_embedder_calls_are_the_serial_inserts() -> None:
    docs = passages()
    serial, s_emb = build(False, docs)
    ahead, a_emb = build(True, docs)
    same(graph(serial), graph(ahead))
    assert a_emb.calls == s_emb.calls  # the same texts, in the same calls, in the same order
    assert len(a_emb.threads) == 1 and all("embed-ahead" in t for t in a_emb.threads)
    assert s_emb.threads == {threading.current_thread().name}
    assert not ahead_threads()


def replaced_then_named(ahead: bool, monkeypatch: Any) -> dict[str, Any]:
    """A stored document replaced in the first batch, its old version's only entity named
    again in the second; embedding ahead, batch 2 is made before batch 1 is written."""
    docs = passages()
    old = ("replaced", "Zorblax Quimby founded the Vantor Guild in 1901.")
    new = ("replaced", "The guild was founded in 1901 by a nameless printer.")
    later = ("names-it", "Zorblax Quimby was a printer.")
    engine = ReMindRAG(embeddings=HashEmbedder(64), index_config=config(ahead))
    engine.insert([old])
    assert engine.store.find_entity_by_name("zorblax quimby")
    made: list[Any] = []
    second_made = threading.Event()
    real, write = inserting.indexing.prepare, engine.store.add_graph

    def spy(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        if len(made) == 2:
            second_made.set()
        return made[-1]

    def gated(*args: Any, **kwargs: Any) -> Any:
        if ahead:  # batch 1 is written only once batch 2 was made (the order to test)
            assert second_made.wait(30)
        return write(*args, **kwargs)

    monkeypatch.setattr(inserting.indexing, "prepare", spy)
    monkeypatch.setattr(engine.store, "add_graph", gated)
    engine.insert([new, *docs[:29], later, *docs[29:40]])  # batches of 30
    monkeypatch.undo()
    if ahead:  # batch 2 was made while "zorblax quimby" was still stored
        assert "zorblax quimby" in made[1].resolve
    eid = engine.store.find_entity_by_name("zorblax quimby")
    assert eid and engine.store.get_node(eid) is not None
    return graph(engine)


def test_a_document_replaced_in_one_batch_and_named_in_the_next(monkeypatch: Any) -> None:
    """Made ahead, batch 2 took the replaced version's name for known; built after batch 1's
    write, the name is new again: checked and embedded as the serial insert would have (the
    same graph)."""
    same(replaced_then_named(False, monkeypatch), replaced_then_named(True, monkeypatch))


def test_an_embedding_failure_keeps_the_batches_before_it() -> None:
    docs = passages()[:90]  # three batches
    third = ReMindRAG(embeddings=HashEmbedder(64), index_config=config(False))
    first_chunk = inserting.plan(third.store, docs[60:61], third.index_config).chunks[0].text
    engines = []
    for ahead in (False, True):
        emb = Recording(fail_on=first_chunk)  # the third batch's chunks
        engine = ReMindRAG(embeddings=emb, index_config=config(ahead))
        with pytest.raises(EmbeddingError, match="service is down"):
            engine.insert(docs)
        assert not ahead_threads()
        stored = {d for d, _ in docs if engine.store.document_hash(d) is not None}
        assert stored == {d for d, _ in docs[:60]}
        engines.append(engine)
    same(graph(engines[0]), graph(engines[1]))
    # run again: the rest is indexed, the first 60 are unchanged
    for engine in engines:
        engine.embedder.fail_on = None  # type: ignore[attr-defined]
        report = engine.insert(docs)
        assert (report.documents, report.skipped_documents) == (30, 60)
    same(graph(engines[0]), graph(engines[1]))


def test_a_write_failure_stops_the_batch_being_embedded(monkeypatch: Any) -> None:
    docs = passages()[:90]
    engine, emb = ReMindRAG(embeddings=Recording(), index_config=config(True)), None
    real = engine.store.add_graph
    writes = [0]

    def failing(*args: Any, **kwargs: Any) -> Any:
        writes[0] += 1
        if writes[0] == 2:
            raise OSError("disk full (test)")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine.store, "add_graph", failing)
    with pytest.raises(OSError, match="disk full"):
        engine.insert(docs)
    assert not ahead_threads()  # the third batch's preparation ended before the error left
    assert {d for d, _ in docs if engine.store.document_hash(d) is not None} == {
        d for d, _ in docs[:30]
    }
    del emb


def test_progress_counts_every_chunk_once_in_order() -> None:
    seen: list[tuple[int, int]] = []
    engine = ReMindRAG(embeddings=HashEmbedder(64), index_config=config(True))
    engine.insert(passages()[:90], progress=lambda done, total: seen.append((done, total)))
    total = {t for _, t in seen}
    assert len(total) == 1
    dones = [d for d, _ in seen]
    assert dones == sorted(dones) and dones[-1] == total.pop()


def test_the_default_is_off_for_embedders_on_this_cpu_and_on_otherwise() -> None:
    assert not inserting.embeds_ahead(None, SentenceTransformerEmbedder(device="cpu"))
    assert inserting.embeds_ahead(None, SentenceTransformerEmbedder(device="cuda:0"))
    assert inserting.embeds_ahead(None, HashEmbedder(8))  # an API, a test embedder
    assert not inserting.embeds_ahead(False, HashEmbedder(8))
    assert inserting.embeds_ahead(True, SentenceTransformerEmbedder(device="cpu"))
    auto = SentenceTransformerEmbedder(device=None)  # type: ignore[arg-type]  # torch picks
    assert auto.cpu_bound is (auto._load().device.type == "cpu")
    onnx = pytest.importorskip("remindrag_integrations.adapters.onnx_embedder")
    assert onnx.OnnxEmbedder.cpu_bound is True


def test_ainsert_embeds_ahead_too() -> None:
    import asyncio

    docs = passages()[:90]
    serial, s_emb = build(False, docs)
    emb = Recording()
    engine = ReMindRAG(embeddings=emb, index_config=config(True))
    asyncio.run(engine.ainsert(docs))
    same(graph(serial), graph(engine))
    assert emb.calls == s_emb.calls
    assert all("embed-ahead" in t for t in emb.threads)


def test_a_stream_embeds_ahead_inside_each_of_its_batches() -> None:
    """insert_stream(batch_documents=60) with insert batches of 30: each stream batch is two
    insert batches, the second embedded while the first is written; the graph is the serial
    insert's of the same insert batches."""
    docs = passages()[:120]
    serial, s_emb = build(False, docs)
    emb = Recording()
    engine = ReMindRAG(embeddings=emb, index_config=config(True))
    reports: list[Any] = []
    total = engine.insert_stream(iter(docs), batch_documents=60, on_batch=reports.append)
    assert [r.documents for r in reports] == [60, 60] and total.documents == 120
    same(graph(serial), graph(engine))
    assert emb.calls == s_emb.calls
    assert all("embed-ahead" in t for t in emb.threads)
