"""Memory users can count on: what is taught comes back, edits keep memory, the answer's citations
teach. Hash embedder (and the real HotpotQA sample), offline, seconds."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import numpy as np
import pg_fixture
import pytest

from remindrag_integrations import Document, IndexConfig, ReMindRAG, ReMindRetriever
from remindrag_integrations.app.cli import main as cli_main
from remindrag_integrations.app.html_trace import render_trace
from remindrag_integrations.app.memory_view import render_memory_view
from remindrag_integrations.errors import UnknownNodeError
from remindrag_integrations.testing import HashEmbedder, ScriptedLLM

pytestmark = pytest.mark.packaged_embedder  # run again under drift by make test

pg_dsn = pg_fixture.pg_dsn
own_pg_database = pg_fixture.own_pg_database

PARTS = [
    "Orla Quist founded the Brindle Lamp Works in Varnholt. The works made brass lamps.",
    "The Brindle Lamp Works later moved to Osterby. Its lamps were sold across Danmar.",
]
QUESTION = "Where did the Brindle Lamp Works move to?"


def two_chunks(second: str = PARTS[1]) -> Document:
    return Document("lamps", PARTS[0] + " " + second)


def _pg(request: pytest.FixtureRequest, namespace: str) -> object:
    """A PostgreSQL store in a database of its own (its 64-dimension rows would change the
    query plans other tests read)."""
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    store = PostgresGraphStore(request.getfixturevalue("own_pg_database"), namespace=namespace)
    request.addfinalizer(store.close)
    return store


def engine(store: object = None) -> ReMindRAG:
    rag = ReMindRAG(
        embeddings=HashEmbedder(64), store=store, index_config=IndexConfig(chunk_tokens=20)
    )
    rag.insert([two_chunks(), Document("other", "Kell Arden paints harbours in Tamsk.")])
    return rag


def _teach_second_chunk(rag: ReMindRAG) -> list[str]:
    chunks = rag.store.document_chunks("lamps")
    assert len(chunks) == 2
    report = rag.teach([{"question": QUESTION, "chunk_ids": [c.id for c in chunks]}])
    assert report.taught == 1
    return [c.id for c in chunks]


def _replays(rag: ReMindRAG, want: str) -> bool:
    r = rag.retrieve(QUESTION, k=3)
    return r.trace.stop_reason == "replay" and want in [rc.chunk.id for rc in r.chunks]


@pytest.mark.parametrize(
    "backend", ["embedded", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_an_edit_keeps_the_unchanged_chunk_and_moves_the_edited_ones_memory(
    backend: str, request: pytest.FixtureRequest
) -> None:
    store = _pg(request, "trust") if backend == "postgres" else None
    rag = engine(store)
    first, second = _teach_second_chunk(rag)
    touched = rag.store.touched_edges()
    rag.insert([two_chunks("The Brindle Lamp Works later moved to Osterby in 1902.")])
    now = [c.id for c in rag.store.document_chunks("lamps")]
    assert now[0] == first and now[1] != second  # the unchanged chunk kept its identity
    stats = rag.memory_stats()
    assert stats.moved > 0 and stats.dropped == 0 and stats.kept > 0
    assert rag.store.touched_edges() == touched
    assert _replays(rag, now[1])  # the edited passage is still remembered
    # identical content again: nothing is re-indexed, memory unchanged
    before = rag.store.export_memory()
    assert (
        rag.insert([two_chunks("The Brindle Lamp Works later moved to Osterby in 1902.")]).documents
        == 0
    )
    assert rag.store.export_memory() == before
    # a rewrite that is no longer the same passage drops that chunk's memory, says so
    rag.insert([two_chunks("Nothing here is about anything said before, at all, really.")])
    assert rag.memory_stats().dropped > 0
    rag.delete(["lamps"])
    assert all(not e.startswith(("k-", "x-")) for e in rag.store.export_memory())


def test_the_retriever_and_the_cli_keep_memory_through_an_edit(tmp_path: Path) -> None:
    retriever = ReMindRetriever(engine=engine())
    _, second = _teach_second_chunk(retriever.engine)
    retriever.add_documents([two_chunks("The Brindle Lamp Works later moved to Osterby, by rail.")])
    assert retriever.engine.memory_stats().moved > 0
    assert _replays(retriever.engine, retriever.engine.store.document_chunks("lamps")[1].id)

    docs = tmp_path / "docs"
    docs.mkdir()
    policy = docs / "policy.txt"
    policy.write_text("Refunds are paid within 14 days of a return. Returns need a receipt.")
    store = str(tmp_path / "store")
    assert cli_main(["index", str(docs), "--store", store]) == 0
    rag = ReMindRAG.load(store)
    (chunk,) = rag.store.document_chunks(rag.store.document_ids()[0])
    rag.teach([{"question": "How soon are refunds paid?", "chunk_ids": [chunk.id]}])
    rag.save(store)
    touched = rag.store.touched_edges()
    policy.write_text("Refunds are paid within 30 days of a return. Returns need a receipt.")
    assert cli_main(["index", str(docs), "--store", store]) == 0
    after = ReMindRAG.load(store)
    assert after.store.touched_edges() == touched
    got = after.retrieve("How soon are refunds paid?", k=1)
    assert "30 days" in got.chunks[0].chunk.text and got.trace.stop_reason == "replay"


def test_a_thumbs_up_and_supporting_ids_come_back_and_unknown_ids_write_nothing() -> None:
    rag = engine()
    rag.retrieval_config = rag.retrieval_config.with_overrides(k=2)  # "comes back": in the top k
    rag.insert([Document("far", "Omega Zeta sells blue lamps in Quux.")])
    (far,) = rag.store.document_chunks("far")
    r = rag.retrieve(QUESTION)
    assert far.id not in [rc.chunk.id for rc in r.chunks]
    with pytest.raises(UnknownNodeError):
        rag.feedback(r.trace_id, True, ["c-0000000000"])
    assert rag.store.touched_edges() == 0
    w = rag.feedback(r.trace_id, True, [far.id])
    assert w.applied and w.not_found == [] and w.linked
    assert far.id in [rc.chunk.id for rc in rag.retrieve(QUESTION).chunks]
    # the learned edge is an edge like any other to the exports
    g = rag.to_networkx()
    kinds = {d["kind"] for _, _, d in g.edges(data=True)}
    assert "learned" in kinds
    after = rag.retrieve(QUESTION)
    page = render_trace(rag.store, after.trace)  # drawn dotted, replayed
    assert re.search(r'data-added="replay" data-memory="" data-kind="learned"', page)
    view = render_memory_view(rag.store, [rag.trace(r.trace_id)])
    assert 'data-kind="learned"' in view
    r2 = rag.retrieve("Who paints harbours?")
    w2 = rag.memorize(r2.trace_id, supporting=[far.id])
    assert w2.applied and far.id in [
        rc.chunk.id for rc in rag.retrieve("Who paints harbours?").chunks
    ]


def test_the_answer_citations_are_the_support() -> None:
    rag = engine()
    r = rag.retrieve(QUESTION, k=3)
    ids = [rc.chunk.id for rc in r.chunks]
    last = ids[-1]
    w = rag.memorize(r.trace_id, answer=f"It moved to Osterby [{last}] [c-feedbeef00].")
    assert w.applied and w.supporting_chunks == [last]
    assert w.ignored_citations == ["c-feedbeef00"]
    again = rag.retrieve(QUESTION, k=3)
    got = {rc.chunk.id: rc for rc in again.chunks}
    assert got[last].source == "replay" and again.trace.stop_reason == "replay"
    assert got[last].rank_score > r.chunks[-1].rank_score + 1.0  # memory vouches for it
    # memorize_judge="filter": with an LLM the citations are not read, the LLM filter judges
    rag2 = engine()
    rag2.retrieval_config = rag2.retrieval_config.with_overrides(memorize_judge="filter")
    r2 = rag2.retrieve(QUESTION, k=3)
    first = r2.trace.chunk_ids[0]
    judge = ScriptedLLM(lambda _: json.dumps({"chunks": [first], "edges": []}))
    w2 = rag2.memorize(r2.trace_id, answer=f"x [{last}]", cited=[last], llm=judge)
    assert w2.applied and w2.supporting_chunks == [first] and len(judge.prompts) == 1
    # with no LLM there is no judge to ask: the answer's citations decide all the same
    rag3 = engine()
    rag3.retrieval_config = rag3.retrieval_config.with_overrides(memorize_judge="filter")
    w3 = rag3.memorize(rag3.retrieve(QUESTION, k=3).trace_id, answer=f"x [{last}]")
    assert w3.applied and w3.supporting_chunks == [last]


@pytest.mark.parametrize(
    "backend", ["embedded", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_an_edit_racing_memory_writes_loses_none(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Writers add to the edited chunk's contains edge, named by its id before any edit, while
    the document is edited again and again: every write lands, on the edge or on the
    successor the edit moved its memory to."""
    store = _pg(request, "race") if backend == "postgres" else None
    rag = engine(store)
    old = "k-" + rag.store.document_chunks("lamps")[1].id[2:]
    one = np.zeros(64, dtype=np.float32)
    one[0] = 1 / 64  # exact in float32: the sum is exact too
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(4):
                rag.store.update_memory([old], lambda cur: cur + one)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def edit() -> None:
        for n in range(5):
            rag.insert([two_chunks(f"The Brindle Lamp Works later moved to Osterby, take {n}.")])

    pool = [threading.Thread(target=write) for _ in range(6)] + [threading.Thread(target=edit)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    now = "k-" + rag.store.document_chunks("lamps")[1].id[2:]
    assert now != old
    assert rag.store.memory([now])[0][0] == pytest.approx(24 / 64)


def test_both_frameworks_hooks_learn_from_what_the_answer_used() -> None:
    """LangChain: the callback passes the final answer, whose [c-…] citation is the support.
    LlamaIndex: the handler passes the synthesized answer; citing nothing, it is grounded in
    the source node that holds its words (not in every node it was written from)."""
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.runnables import RunnableLambda
    from llama_index.core.base.llms.types import CompletionResponse
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from remindrag_integrations import ReMindMemoryCallback, ReMindMemoryEventHandler

    r = ReMindRetriever(engine=engine(), k=3)
    cited = r.invoke(QUESTION)[-1].id
    model = FakeListChatModel(responses=[f"It moved to Osterby [{cited}]."])
    chain = r | RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs)) | model
    cb = ReMindMemoryCallback(r)
    chain.invoke(QUESTION, config={"callbacks": [cb]})
    (write,) = cb.writes
    assert write.applied and write.supporting_chunks == [cited]

    class Says(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: object) -> object:
            return CompletionResponse(text="It moved to Osterby.")

    r2 = ReMindRetriever(engine=engine(), k=3)
    qe = RetrieverQueryEngine.from_args(r2, llm=Says())
    with ReMindMemoryEventHandler(r2) as handler:
        resp = qe.query(QUESTION)
    (write,) = handler.writes
    assert len(resp.source_nodes) > 1
    osterby = [n.node.node_id for n in resp.source_nodes if "Osterby" in n.node.get_content()]
    assert write.applied and write.supporting_chunks == osterby
