"""PostgreSQL and the embedded store over the same graph rank the same passages (issue 49).

With the graph cache (the default) PostgreSQL's lexical half is the embedded store's BM25
over the cached chunk texts, so every question of the two real-text samples gets the same
ranked chunks from both, filtered or not: seed search, graph, title hop, memory, lexical
half and ties agree. Without the cache the lexical half is PostgreSQL's full-text
``ts_rank``: only that differs (docs/postgres.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pg_fixture
import pytest

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.stores import InMemoryGraphStore
from remindrag_integrations.stores.postgres import PostgresGraphStore
from remindrag_integrations.testing import HashEmbedder

pg_dsn = pg_fixture.pg_dsn
make_pg_store = pg_fixture.make_pg_store
pytestmark = pytest.mark.postgres
Rows = tuple[list[dict], dict[str, dict]]
ONLY_HOTPOT = {"sample": "hotpot"}


def _copy(src: InMemoryGraphStore, dst: PostgresGraphStore) -> None:
    nodes, edges = src.whole_graph()
    docs = src.documents()
    dst.add_graph(
        documents=[(d, h, m) for d, (h, m) in sorted(docs.items())],
        chunks=[c for d in sorted(docs) for c in src.document_chunks(d)],
        nodes=nodes,
        embeddings=src.node_embeddings([n.id for n in nodes]),
        edges=edges,
        entity_aliases={},
    )


def _ranked(eng: ReMindRAG, q: str, **kw: Any) -> list[str]:
    return [c.chunk.id for c in eng.retrieve(q, **kw).chunks]


def _embedded(musique: Rows, hotpot: Rows) -> InMemoryGraphStore:
    mem = InMemoryGraphStore()
    ReMindRAG(embeddings=HashEmbedder(32), store=mem).insert(
        [
            Document(pid, f"{r['title']}. {r['text']}", metadata={"sample": name})
            for name, (_, rows) in (("musique", musique), ("hotpot", hotpot))
            for pid, r in sorted(rows.items())
        ]
    )
    return mem


def _same_hits(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> bool:
    """The same chunks in the same order, their scores equal to float32 precision."""
    return [c for c, _ in got] == [c for c, _ in want] and all(
        abs(a - b) <= 1e-5 * max(1.0, abs(b)) for (_, a), (_, b) in zip(got, want)
    )


def test_postgres_ranks_as_the_embedded_store(
    make_pg_store: Callable[..., PostgresGraphStore], musique: Rows, hotpot: Rows
) -> None:
    mem = _embedded(musique, hotpot)
    embedded = ReMindRAG(embeddings=HashEmbedder(32), store=mem)
    pg = make_pg_store("vs-embedded")
    _copy(mem, pg)
    postgres = ReMindRAG(embeddings=HashEmbedder(32), store=pg)
    questions = [q["question"] for qs, _ in (musique, hotpot) for q in qs]
    for q in questions:  # the defaults: the same passages in the same order
        assert _ranked(postgres, q) == _ranked(embedded, q), q
    for q in questions[::4]:  # under a metadata filter too
        got = _ranked(postgres, q, filter=ONLY_HOTPOT)
        assert got == _ranked(embedded, q, filter=ONLY_HOTPOT), q
    # the lexical half itself: BM25's chunks, order and scores, from the graph cache
    cache = pg._graph_cache
    assert cache is not None and cache.texts is not None and cache.lexical_builds == 1
    with pg.snapshot() as view:
        for q in questions:
            want = mem.lexical_search(q, 40)
            assert want and _same_hits(view.lexical_search(q, 40), want), q
            want = mem.lexical_search(q, 40, ONLY_HOTPOT)
            assert want and _same_hits(view.lexical_search(q, 40, ONLY_HOTPOT), want), q
            # a filter scores as unfiltered (one scale): the passing chunks' own scores
            scores = dict(mem.lexical_search(q, 10_000))
            assert all(abs(s - scores[c]) < 1e-5 * max(1.0, s) for c, s in want), q
    assert _same_hits(pg.lexical_search(questions[0], 40), mem.lexical_search(questions[0], 40))
    assert cache.lexical_builds == 1  # no write: built once


def test_without_the_graph_cache_only_the_full_text_rank_differs(
    pg_dsn: str, make_pg_store: Callable[..., PostgresGraphStore], musique: Rows, hotpot: Rows
) -> None:
    mem = _embedded(musique, hotpot)
    embedded = ReMindRAG(embeddings=HashEmbedder(32), store=mem)
    _copy(mem, make_pg_store("vs-embedded-sql"))
    pg = PostgresGraphStore(pg_dsn, namespace="vs-embedded-sql", graph_cache=False)
    try:
        postgres = ReMindRAG(embeddings=HashEmbedder(32), store=pg)
        questions = [q["question"] for qs, _ in (musique, hotpot) for q in qs]
        no_lexical = embedded.retrieval_config.prior.model_copy(update={"lexical_weight": 0.0})
        for q in questions:  # no lexical half: the same passages in the same order
            got = _ranked(postgres, q, prior=no_lexical)
            assert got == _ranked(embedded, q, prior=no_lexical), q
        with pg.snapshot() as view:
            ranks = [view.lexical_search(q, 40) for q in questions]
        assert sum(not _same_hits(r, mem.lexical_search(q, 40)) for q, r in zip(questions, ranks))
        default_differs = sum(_ranked(postgres, q) != _ranked(embedded, q) for q in questions)
        assert default_differs > 0  # the full-text rank's (not a test of its size)
    finally:
        pg.close()
