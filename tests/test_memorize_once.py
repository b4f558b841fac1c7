"""The memorize claim (``core/memory/memorize.py``) and the split between the method's
engine (``core/facade.py::Engine``: built parts only) and the public ``ReMindRAG`` (the
default wiring)."""

from __future__ import annotations

import threading

import pytest

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.core.facade import Engine
from remindrag_integrations.core.memory.memorize import Once
from remindrag_integrations.core.steps import Step
from remindrag_integrations.core.types import MemoryWrite
from remindrag_integrations.errors import InvalidArgumentError
from remindrag_integrations.stores import InMemoryGraphStore
from remindrag_integrations.testing import HashEmbedder

DOCS = [
    Document("paris", "Paris is the capital of France. The Louvre is in Paris."),
    Document("rome", "Rome is the capital of Italy. The Colosseum is in Rome."),
    Document("berlin", "Berlin is the capital of Germany. The Reichstag is in Berlin."),
]


def _engine(**config: object) -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder())
    eng.insert(DOCS)
    if config:
        eng.retrieval_config = eng.retrieval_config.with_overrides(**config)
    return eng


def test_threads_racing_on_one_trace_write_it_once() -> None:
    eng = _engine()
    r = eng.retrieve("Which city is the capital of France?")
    chunk = r.chunks[0].chunk.id
    barrier, results = threading.Barrier(8), []

    def work() -> None:
        barrier.wait()
        results.append(eng.memorize(r.trace_id, supporting=[chunk]))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    applied = [w for w in results if w.applied]
    assert len(applied) == 1
    assert {w.skipped_reason for w in results if not w.applied} == {"already memorized"}
    stats = eng.memory_stats()
    assert (stats.writes_applied, stats.writes_skipped) == (1, 7)
    assert eng.trace(r.trace_id).memorized


def _run(step: Step) -> MemoryWrite:
    """A step that asks for nothing, run to its result."""
    try:
        step.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the step asked for an LLM or an embedding")


def test_a_second_writer_is_turned_away_while_the_first_still_writes() -> None:
    eng = _engine()
    trace = eng.retrieve("Which city is the capital of France?").trace
    once, entered, release, ran = Once(), threading.Event(), threading.Event(), []

    def write(slow: bool) -> Step:
        ran.append(slow)
        if slow:
            entered.set()
            release.wait(10)
        return MemoryWrite(trace.trace_id, True, [], [], [], [])
        yield  # a step: a generator

    first: list[MemoryWrite] = []
    t = threading.Thread(
        target=lambda: first.append(_run(once.write(trace, eng.store, write(True))))
    )
    t.start()
    assert entered.wait(10)
    during = _run(once.write(trace, eng.store, write(False)))
    release.set()
    t.join()
    after = _run(once.write(trace, eng.store, write(False)))
    assert ran == [True] and first[0].applied and trace.memorized
    assert [w.skipped_reason for w in (during, after)] == ["already memorized"] * 2


def test_a_write_that_applies_nothing_leaves_the_trace_free() -> None:
    eng = _engine(self_memorize="off", memorize_judge="filter")
    r = eng.retrieve("Which city is the capital of Italy?")
    first = eng.memorize(r.trace_id)  # no LLM, no judge: nothing is written
    assert not first.applied and not eng.trace(r.trace_id).memorized
    second = eng.memorize(r.trace_id, supporting=[r.chunks[0].chunk.id])
    assert second.applied
    third = eng.memorize(r.trace_id, supporting=[r.chunks[0].chunk.id])
    assert (third.applied, third.skipped_reason) == (False, "already memorized")


def test_the_method_engine_takes_built_parts_and_the_public_one_wires_them() -> None:
    store = InMemoryGraphStore()
    core = Engine(None, HashEmbedder(), store)
    core.insert(DOCS)
    assert core.retrieve("Which city is the capital of Germany?").chunks
    with pytest.raises(InvalidArgumentError, match="ChatLLM"):  # a plain callable is wiring
        core.retrieve("Which city is the capital of Germany?", llm=lambda p: '{"enough": true}')
    public = ReMindRAG(embeddings=HashEmbedder(), store=store)
    r = public.retrieve("Which city is the capital of Germany?", llm=lambda p: '{"enough": true}')
    assert r.chunks and r.trace.stop_reason == "enough"
    assert repr(public).startswith("ReMindRAG(llm=None (zero-token)")
    assert repr(core).startswith("Engine(llm=None (zero-token)")
