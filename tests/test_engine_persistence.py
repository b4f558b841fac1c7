"""Persistence by composition: a folder store commits each write itself (one transaction per
write call), so ``ReMindRAG`` overrides no method of ``Engine`` to save, and every public
write of the engine reaches the folder by the time it returns. A public method added to the
engine fails :func:`test_every_public_engine_method_is_a_read_or_a_checked_write` until it
is listed here, and a listed write is run against the folder below. Also: the public
signatures are spelled out (no ``*args, **kwargs``)."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.core.facade import Engine
from remindrag_integrations.stores import SQLiteGraphStore
from remindrag_integrations.testing import HashEmbedder

READS = {
    "aanswer",
    "answer",
    "aretrieve",
    "retrieve",
    "batches",
    "changed_ids",
    "document_ids",
    "estimate_insert",
    "export_memory",  # writes a file, reads the store
    "get_documents",
    "inspect_memory",
    "memory_stats",
    "memory_vectors",
    "trace",
}
WRITES = {
    "insert",
    "ainsert",
    "insert_stream",
    "delete",
    "memorize",
    "amemorize",
    "feedback",
    "teach",
    "ateach",
    "reset_memory",
    "decay_memory",
    "import_memory",
    "forget_edges",
    "forget_trace",
    "restore_memory",
}
DOCS = [
    Document("warsaw", "Warsaw is the capital of Poland. It lies on the Vistula river."),
    Document("krakow", "Krakow lies on the Vistula too. Wawel castle stands in Krakow."),
    Document("gdansk", "Gdansk is a port on the Baltic Sea, at the mouth of the Vistula."),
    Document("poznan", "Poznan lies on the Warta river, west of Warsaw."),
]
QUESTION = "Which river does Warsaw lie on?"


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_every_public_engine_method_is_a_read_or_a_checked_write() -> None:
    assert _public(Engine) == READS | WRITES, "classify the new method (and run it below)"


def test_remindrag_saves_by_composition_not_by_overriding() -> None:
    own = {n for n in vars(ReMindRAG) if not n.startswith("_")}
    assert own & _public(Engine) == set()  # its own methods: wiring, save / load / copy


def _state(store: Any) -> tuple[dict, dict]:
    return store.counts(), store.export_memory()


def test_every_public_write_reaches_the_folder_when_it_returns(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    rag = ReMindRAG(embeddings=HashEmbedder(64), store=folder)
    done: set[str] = set()
    seen = [_state(rag.store)]

    def check(name: str) -> None:
        """The folder, opened anew, holds what the engine's store holds; it changed."""
        other = SQLiteGraphStore.open(folder)
        try:
            counts, memory = _state(other)
        finally:
            other.close()
        here = _state(rag.store)
        assert counts == here[0], name
        assert sorted(memory) == sorted(here[1]), name
        for e, row in memory.items():
            assert np.allclose(row, here[1][e], atol=1e-6), name
        assert (counts, memory) != seen[-1], f"{name} changed nothing"
        seen.append((counts, memory))
        done.add(name)

    rag.insert(DOCS[:2])
    check("insert")
    asyncio.run(rag.ainsert(DOCS[2:3]))
    check("ainsert")
    rag.insert_stream(iter(DOCS[3:]))
    check("insert_stream")
    target = rag.store.document_chunks("krakow")[0].id
    taught = rag.retrieve(QUESTION, k=2).trace_id
    rag.memorize(taught, supporting=[target])
    check("memorize")
    r = rag.retrieve("Where is Wawel castle?", k=2)
    asyncio.run(rag.amemorize(r.trace_id, supporting=[rag.store.document_chunks("gdansk")[0].id]))
    check("amemorize")
    rag.feedback(rag.retrieve("Which sea is Gdansk on?", k=2).trace_id, helpful=False)
    check("feedback")
    rag.teach([{"question": "Which river is Poznan on?", "doc_ids": ["poznan"]}])
    check("teach")
    asyncio.run(rag.ateach([{"question": "What is the capital of Poland?", "doc_ids": ["warsaw"]}]))
    check("ateach")
    rag.decay_memory(0.5)
    check("decay_memory")
    rag.export_memory(tmp_path / "memory.json")
    rag.reset_memory()
    check("reset_memory")
    rag.import_memory(tmp_path / "memory.json")
    check("import_memory")
    held = rag.forget_edges(sorted(rag.memory_vectors())[:1])
    check("forget_edges")
    rag.restore_memory(held)
    check("restore_memory")
    rag.forget_trace(taught)
    check("forget_trace")
    rag.delete(["poznan"])
    check("delete")
    rag.close()
    assert done == WRITES


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("memorize", ["trace_id", "answer", "supporting", "cited", "llm"]),
        ("amemorize", ["trace_id", "answer", "supporting", "cited", "llm"]),
        ("feedback", ["trace_id", "helpful", "chunk_ids"]),
        ("teach", ["pairs", "progress", "overrides"]),
        ("ateach", ["pairs", "progress", "overrides"]),
        ("insert", ["documents", "progress", "on_batch"]),
        ("ainsert", ["documents", "progress", "on_batch"]),
    ],
)
def test_public_signatures_are_spelled_out(name: str, params: list[str]) -> None:
    sig = inspect.signature(getattr(ReMindRAG, name))
    assert list(sig.parameters)[1:] == params
    kinds = {p.name: p.kind for p in sig.parameters.values()}
    assert inspect.Parameter.VAR_POSITIONAL not in kinds.values()
    # only teach's configuration overrides are free keywords
    free = [n for n, k in kinds.items() if k is inspect.Parameter.VAR_KEYWORD]
    assert free == (["overrides"] if name.endswith("teach") else [])


@pytest.mark.parametrize(
    "pair", [("memorize", "amemorize"), ("teach", "ateach"), ("insert", "ainsert")]
)
def test_async_twins_take_what_their_sync_methods_take(pair: tuple[str, str]) -> None:
    sync, twin = (inspect.signature(getattr(ReMindRAG, n)) for n in pair)
    assert sync.parameters == twin.parameters
