"""Zero-token extraction on worker processes (``IndexConfig.workers``, core/workers.py): the
graph is the same whatever the number of workers, and the same as the serial path (every
chunk extracted in the calling thread, before the embedding)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from graph_compare import graph, passages, same

from remindrag_integrations import IndexConfig, ReMindRAG
from remindrag_integrations.core import workers
from remindrag_integrations.testing import HashEmbedder


def build(n_workers: int | None, **cfg: Any) -> tuple[ReMindRAG, Any]:
    # batches of 60 documents, chunks of 64 tokens: several batches, each past MIN_POOL_CHUNKS;
    # a low synonym threshold, so that names merge (into the store's and the batch's own)
    index = IndexConfig(
        workers=n_workers, chunk_tokens=64, insert_batch_documents=60, synonym_threshold=0.6, **cfg
    )
    engine = ReMindRAG(embeddings=HashEmbedder(64), index_config=index)
    return engine, engine.insert(passages())


@pytest.fixture(scope="module")
def serial() -> tuple[dict[str, Any], Any]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workers, "MIN_POOL_CHUNKS", 10**9)  # every batch extracted at once, here
        engine, report = build(1)
    return graph(engine), report


class CountingProcess(workers._Process):
    started = 0

    def __init__(self) -> None:
        CountingProcess.started += 1
        super().__init__()


@pytest.mark.parametrize("n_workers", [1, 2])
def test_the_graph_is_the_same_with_1_and_2_workers_and_serially(
    serial: tuple[dict[str, Any], Any], n_workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workers, "_Process", CountingProcess)
    CountingProcess.started = 0
    engine, report = build(n_workers)
    expected, serial_report = serial
    assert report.chunks >= 2 * workers.MIN_POOL_CHUNKS and report.entities_merged > 0
    got = graph(engine)
    same(got, expected)
    assert (report.entities_added, report.entities_merged, report.relations) == (
        serial_report.entities_added,
        serial_report.entities_merged,
        serial_report.relations,
    )
    assert report.source_tokens == serial_report.source_tokens
    assert {e.kind for e in got["edges"]} >= {"contains", "mention", "relation", "context"}
    assert CountingProcess.started == (2 if n_workers == 2 else 0)  # for the whole insert


def test_a_worker_that_dies_leaves_the_insert_whole(
    serial: tuple[dict[str, Any], Any], monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    real = workers._Process.run

    def killed_first(self: workers._Process, texts: list[str], max_entities: int) -> Any:
        if self.proc.poll() is None and not getattr(killed_first, "done", False):
            killed_first.done = True  # type: ignore[attr-defined]
            self.proc.kill()  # a worker killed (out of memory, a signal)
            self.proc.wait()
        return real(self, texts, max_entities)

    monkeypatch.setattr(workers._Process, "run", killed_first)
    with caplog.at_level(logging.WARNING, logger="remindrag_integrations"):
        engine, _ = build(2)
    same(graph(engine), serial[0])
    assert "extraction worker process stopped" in caplog.text


def test_workers_that_cannot_start_leave_the_insert_whole(
    serial: tuple[dict[str, Any], Any], monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    def no_python(self: workers._Process) -> None:
        raise OSError("no such file")

    monkeypatch.setattr(workers._Process, "__init__", no_python)
    with caplog.at_level(logging.WARNING, logger="remindrag_integrations"):
        engine, _ = build(2)
    same(graph(engine), serial[0])
    assert "could not start" in caplog.text


def test_progress_counts_every_chunk_extracted() -> None:
    seen: list[tuple[int, int]] = []
    engine = ReMindRAG(
        embeddings=HashEmbedder(64),
        index_config=IndexConfig(workers=2, chunk_tokens=64, insert_batch_documents=1000),
    )
    report = engine.insert(passages(), progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (report.chunks, report.chunks)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


@pytest.mark.parametrize(("found", "expected"), [(1, 1), (2, 1), (4, 4), (16, 8)])
def test_workers_none_forks_one_per_cpu_from_4_cpus(
    found: int, expected: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workers, "cpus", lambda: found)
    assert workers.resolve(None) == expected
    assert workers.resolve(3) == 3  # a number given is used as given
