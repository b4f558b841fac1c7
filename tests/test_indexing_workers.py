"""Zero-token extraction on worker processes (``IndexConfig.workers``, core/workers.py): the
graph is the same whatever the number of workers, and the same as the serial path (every
chunk extracted in the calling thread, before the embedding)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from remindrag_integrations import IndexConfig, ReMindRAG
from remindrag_integrations.core import workers
from remindrag_integrations.testing import HashEmbedder

DATA = Path(__file__).parent / "data" / "hotpotqa_train100_sample.corpus.jsonl"
pytestmark = pytest.mark.skipif(not workers.can_fork(), reason="worker processes need fork")


def passages() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    return [(r["pid"], r["text"]) for r in rows]


def graph(engine: ReMindRAG) -> dict[str, Any]:
    """Every node and edge with its kind and text, the node vectors and the edge memory."""
    nodes, edges = engine.store.whole_graph()
    nodes, edges = sorted(nodes, key=lambda n: n.id), sorted(edges, key=lambda e: e.id)
    return {
        "nodes": nodes,
        "edges": edges,
        "vectors": engine.store.node_embeddings([n.id for n in nodes]),
        "memory": engine.store.memory([e.id for e in edges]),
        "aliases": {n.id: n.aliases for n in nodes if n.aliases},
    }


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


def same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["nodes"] == b["nodes"]
    assert a["edges"] == b["edges"]
    assert a["aliases"] == b["aliases"]
    np.testing.assert_array_equal(a["vectors"], b["vectors"])
    np.testing.assert_array_equal(a["memory"], b["memory"])


class CountingPool(workers.ProcessPoolExecutor):
    started: list[int] = []

    def __init__(self, n: int, **kw: Any) -> None:
        CountingPool.started.append(n)
        super().__init__(n, **kw)


@pytest.mark.parametrize("n_workers", [1, 2])
def test_the_graph_is_the_same_with_1_and_2_workers_and_serially(
    serial: tuple[dict[str, Any], Any], n_workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workers, "ProcessPoolExecutor", CountingPool)
    CountingPool.started = []
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
    batches = -(-len(passages()) // 60)
    assert CountingPool.started == ([2] * batches if n_workers == 2 else [])  # one per batch


def test_a_worker_that_dies_leaves_the_insert_whole(
    serial: tuple[dict[str, Any], Any], monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    parent, real = os.getpid(), workers.extract_one

    def dies_in_a_worker(text: str, max_entities: int) -> Any:
        if os.getpid() != parent:
            os._exit(1)  # a worker killed (out of memory, a signal)
        return real(text, max_entities)

    monkeypatch.setattr(workers, "extract_one", dies_in_a_worker)  # the workers fork with it
    with caplog.at_level(logging.WARNING, logger="remindrag_integrations"):
        engine, _ = build(2)
    same(graph(engine), serial[0])
    assert "extraction worker process stopped" in caplog.text


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
