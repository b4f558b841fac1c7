"""PostgreSQL and the embedded store over the same graph rank the same passages, save for the
lexical half of the prior (issue 49): PostgreSQL's is full-text ``ts_rank``, the embedded
store's BM25 (docs/postgres.md). With the lexical half off, or with PostgreSQL's lexical
search answered by the embedded store's BM25, every question of the two real-text samples
gets the same ranked chunks from both: seed search, graph, title hop, memory and ties agree."""

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


def test_postgres_ranks_as_the_embedded_store_but_for_its_full_text_rank(
    make_pg_store: Callable[..., PostgresGraphStore],
    musique: Rows,
    hotpot: Rows,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mem = InMemoryGraphStore()
    embedded = ReMindRAG(embeddings=HashEmbedder(32), store=mem)
    embedded.insert(
        [
            Document(pid, f"{r['title']}. {r['text']}")
            for _, rows in (musique, hotpot)
            for pid, r in sorted(rows.items())
        ]
    )
    pg = make_pg_store("vs-embedded")
    _copy(mem, pg)
    postgres = ReMindRAG(embeddings=HashEmbedder(32), store=pg)
    questions = [q["question"] for qs, _ in (musique, hotpot) for q in qs]
    no_lexical = embedded.retrieval_config.prior.model_copy(update={"lexical_weight": 0.0})
    for q in questions:  # no lexical half: the same passages in the same order
        assert _ranked(postgres, q, prior=no_lexical) == _ranked(embedded, q, prior=no_lexical), q
    default_differs = sum(_ranked(postgres, q) != _ranked(embedded, q) for q in questions)
    monkeypatch.setattr(
        PostgresGraphStore,
        "lexical_search",
        lambda self, text, k, where=None: mem.lexical_search(text, k, where),
    )
    for q in questions:  # BM25 as the lexical half of both: the same again
        assert _ranked(postgres, q) == _ranked(embedded, q), q
    # and it is the lexical half that made the difference (not a test of its size)
    assert default_differs > 0
