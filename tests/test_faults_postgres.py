"""The fault suite on PostgreSQL: exactly-once memorize across processes, atomic document
updates in one transaction, and text PostgreSQL cannot store as typed errors."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from typing import Any

import pg_fixture
import pytest

from remindrag_integrations import (
    ConfigError,
    Document,
    InvalidDocumentError,
    InvalidQueryError,
    ReMindRAG,
)
from remindrag_integrations.errors import EmbeddingError
from remindrag_integrations.stores.postgres import PostgresGraphStore
from remindrag_integrations.testing import HashEmbedder

pytestmark = pytest.mark.postgres
pg_dsn = pg_fixture.pg_dsn
make_pg_store = pg_fixture.make_pg_store

DIM = 32
TEXTS = [
    ("d1", "Scott Derrickson is an American director. He directed Sinister in Los Angeles."),
    ("d3", "Sinister is a horror film. Ethan Hawke starred in Sinister."),
]


def _engine(store: Any, embedder: Any = None) -> ReMindRAG:
    return ReMindRAG(embeddings=embedder or HashEmbedder(DIM), store=store)


def _memorize_in_process(dsn: str, ns: str, trace_id: str, barrier: Any, out: Any) -> None:
    eng = _engine(PostgresGraphStore(dsn, namespace=ns, pool_size=1))
    barrier.wait()
    out.put(eng.memorize(trace_id, answer="Scott Derrickson.").applied)  # grounded in d1


def test_a_trace_is_memorized_once_across_processes(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    eng = _engine(make_pg_store("claims"))
    eng.insert([Document(i, t) for i, t in TEXTS])
    r = eng.retrieve("Who directed Sinister?", navigator={"min_similarity": -1.0})
    ctx = mp.get_context("spawn")
    n = 4
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [
        ctx.Process(target=_memorize_in_process, args=(pg_dsn, "claims", r.trace_id, barrier, out))
        for _ in range(n)
    ]
    for p in procs:
        p.start()
    applied = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sum(applied) == 1
    assert eng.memorize(r.trace_id).skipped_reason == "already memorized"


class _FailingEmbedder(HashEmbedder):
    fail = False

    def embed(self, texts):  # type: ignore[no-untyped-def]
        if self.fail:
            raise RuntimeError("embedding service down")
        return super().embed(texts)


def test_a_failed_update_keeps_the_old_version_on_postgres(
    make_pg_store: Callable[..., PostgresGraphStore],
) -> None:
    emb = _FailingEmbedder(DIM)
    eng = _engine(make_pg_store("atomic"), emb)
    eng.insert([Document(i, t) for i, t in TEXTS])
    r = eng.retrieve("Who directed Sinister?", navigator={"min_similarity": -1.0})
    assert eng.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks]).applied
    before = (eng.store.counts(), eng.store.export_memory(), eng.store.document_hash("d1"))
    emb.fail = True
    with pytest.raises(EmbeddingError, match="embedding service down"):
        eng.insert([Document("d1", "Scott Derrickson directed Doctor Strange in 2016.")])
    assert (eng.store.counts(), eng.store.export_memory(), eng.store.document_hash("d1")) == before
    emb.fail = False
    eng.insert([Document("d1", "Scott Derrickson directed Doctor Strange in 2016.")])
    assert (
        "Doctor Strange"
        in eng.store.get_chunk(
            next(
                c.chunk.id for c in eng.retrieve("Doctor Strange").chunks if c.chunk.doc_id == "d1"
            )
        ).text
    )


def test_text_postgres_cannot_store_is_a_typed_error(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore]
) -> None:
    eng = _engine(make_pg_store("nul"))
    eng.insert([Document(i, t) for i, t in TEXTS])
    before = eng.store.counts()
    for query in ("Alice\x00", "Al\ud800ice"):
        with pytest.raises(InvalidQueryError):
            eng.retrieve(query)
    for doc in (
        Document("x", "text with \x00 inside"),
        Document("x\x00", "text"),
        Document("x", "text", {"k": "v\x00"}),
        Document("x", "text", {"k": float("nan")}),
        Document("x", "lone \ud800 surrogate"),
    ):
        with pytest.raises(InvalidDocumentError):
            eng.insert([doc])
    with pytest.raises(ConfigError):
        PostgresGraphStore(pg_dsn, namespace="bad\x00ns")
    assert eng.store.counts() == before
