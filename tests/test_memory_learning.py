"""What memory learns: teach from known answers, rank what memory vouches for, never penalise
without a judge, stay bounded as memory saturates. Hash embedder, offline, seconds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remindrag_integrations import Document, ReMindRAG, ReMindRetriever, TeachPair, Trace
from remindrag_integrations.app.cli import main as cli_main
from remindrag_integrations.core.memory.math import memory_evidence, rank_scores, replay_bound
from remindrag_integrations.errors import InvalidTeachPairError
from remindrag_integrations.testing import HashEmbedder

pytestmark = pytest.mark.packaged_embedder  # run again under drift by make test

QUESTION = "Where was Person3 Alpha born?"


def corpus() -> list[Document]:
    return [
        Document(
            f"d{i}",
            f"Person{i} Alpha was born in City{i}. City{i} lies on River{i % 3}. "
            f"Beta{i} likes Gamma{i % 4}.",
        )
        for i in range(12)
    ]


@pytest.fixture()
def rag() -> ReMindRAG:
    engine = ReMindRAG(embeddings=HashEmbedder(64))
    engine.insert(corpus())
    return engine


def doc_of(rag: ReMindRAG, chunk_ids: list[str]) -> list[str]:
    return [rag.store.get_chunk(c).doc_id for c in chunk_ids]


# --- ranking: a small pure function ---------------------------------------------------------
def test_evidence_counts_only_memory_that_passes_replay() -> None:
    bound = replay_bound(0.1, 0.55)
    ev = memory_evidence(np.array([0.0, bound - 0.01, bound + 0.01, 0.9]), 0.1, 0.55)
    assert ev.tolist()[:2] == [0.0, 0.0]
    assert ev[2] == pytest.approx(bound + 0.01) and ev[3] == pytest.approx(0.9)


@given(
    st.lists(st.floats(0, 1), min_size=2, max_size=8),
    st.floats(0.51, 1.0),
    st.integers(0, 7),
)
def test_a_vouched_chunk_outranks_every_unvouched_one(
    cosines: list[float], evidence: float, which: int
) -> None:
    which %= len(cosines)
    cos = np.array(cosines, dtype=np.float32)
    cos[which] = 0.0  # even the least similar chunk, once memory vouches > 0.5 at weight 2
    ev = np.zeros(len(cos), dtype=np.float32)
    ev[which] = evidence
    scores = rank_scores(cos, ev, weight=2.0)
    assert int(np.argmax(scores)) == which
    # weight 0 is the cosine ranking
    assert np.allclose(rank_scores(cos, ev, weight=0.0), cos)


# --- teach ---------------------------------------------------------------------------------
def test_teach_makes_a_missed_passage_first_with_no_walk(rag: ReMindRAG) -> None:
    before = rag.retrieve(QUESTION, k=3)
    assert before.trace.decisions > 0
    missed = [d.id for d in corpus() if d.id not in [rc.chunk.doc_id for rc in before.chunks]]
    target = missed[-1]
    report = rag.teach([{"question": QUESTION, "doc_ids": [target]}])
    assert report.taught == 1 and report.problems == []
    after = rag.retrieve(QUESTION, k=3)
    assert after.chunks[0].chunk.doc_id == target
    assert after.trace.decisions == 0 and after.trace.stop_reason == "replay"
    parts = after.trace.rank_evidence[after.chunks[0].chunk.id]
    assert parts["memory"] > 0.5
    cfg = rag.retrieval_config
    first_pass = parts["cosine"] + cfg.prior.lexical_weight * parts["lexical"]
    first_pass += cfg.prior.graph_weight * parts["graph"]
    span = 1 + cfg.prior.lexical_weight + cfg.prior.graph_weight
    assert parts["score"] == pytest.approx(first_pass + span * parts["memory"], abs=1e-5)
    assert parts["cosine"] < max(rc.rank_score for rc in before.chunks)  # cosine alone: not first


def test_teach_resolves_ids_docs_and_texts_and_reports_what_it_could_not(rag: ReMindRAG) -> None:
    d5 = rag.retrieve("City5 River2", k=12).chunks
    cid = next(rc.chunk.id for rc in d5 if rc.chunk.doc_id == "d2")
    report = rag.teach(
        [
            TeachPair("Which river runs by City2?", chunk_ids=(cid,)),
            {"question": "What does Beta9 like?", "texts": ["beta9  LIKES gamma1"]},
            {"question": "Who is Nobody?", "doc_ids": ["nope"], "chunk_ids": ["c-00000000"]},
            {"question": "Who lives far away?", "texts": ["never written anywhere"]},
        ]
    )
    first, second, third, fourth = report.results
    assert doc_of(rag, first.reached) == ["d2"]
    assert doc_of(rag, second.chunks) == ["d9"] and second.reached == second.chunks
    assert sorted(third.not_found) == ["c-00000000", "nope"] and third.enhanced == 0
    assert fourth.not_found == ["never written anywhere"]
    assert report.taught == 2 and len(report.problems) == 2
    assert "not found: 'nope'" in report.summary()
    assert rag.memory_stats().writes_applied == 2 and rag.memory_stats().writes_skipped == 2


def test_teach_links_a_passage_beyond_the_bridge_depth(rag: ReMindRAG) -> None:
    """No graph path within memory.max_bridge_hops: a learned edge from the question's seeds to
    the passage's anchor holds the link, and the passage comes back."""
    rag.insert([Document("far", "Omega Zeta sells blue lamps in Quux. Quux is quiet.")])
    assert "far" not in [rc.chunk.doc_id for rc in rag.retrieve(QUESTION, k=5).chunks]
    report = rag.teach([{"question": QUESTION, "doc_ids": ["far"]}], memory={"max_bridge_hops": 1})
    (result,) = report.results
    assert result.reached == result.chunks and result.unreachable == [] and result.linked
    assert report.taught == 1
    learned = [rag.store.get_edge(e) for e in result.linked]
    assert {e.kind for e in learned} == {"learned"}
    after = rag.retrieve(QUESTION, k=5)
    assert "far" in [rc.chunk.doc_id for rc in after.chunks] and after.trace.stop_reason == "replay"
    assert set(result.linked) & set(after.trace.replayed_edges)
    # memory, not knowledge: the prior and the navigator never walk a learned edge
    other = rag.retrieve("Where was Person5 Alpha born?", k=5)
    assert "far" not in [rc.chunk.doc_id for rc in other.chunks]


@pytest.mark.parametrize(
    "bad",
    [
        {"question": "", "doc_ids": ["d1"]},
        {"question": "Who?"},
        {"question": "Who?", "doc_ids": "d1"},
        {"question": "Who?", "doc_ids": ["d1"], "answer": "x"},
        ["Who?", "d1"],
    ],
)
def test_a_bad_pair_raises_before_anything_is_written(rag: ReMindRAG, bad: object) -> None:
    good = {"question": QUESTION, "doc_ids": ["d7"]}
    with pytest.raises(InvalidTeachPairError, match="pair 2"):
        rag.teach([good, bad])  # type: ignore[list-item]
    assert rag.store.touched_edges() == 0


def test_async_teach_and_the_retriever_teach_the_same(rag: ReMindRAG) -> None:
    other = ReMindRAG(embeddings=HashEmbedder(64))
    other.insert(corpus())
    pairs = [{"question": QUESTION, "doc_ids": ["d7"]}]
    a = asyncio.run(rag.ateach(pairs))
    b = ReMindRetriever(engine=other).teach(pairs)
    assert a.results == b.results
    assert rag.store.export_memory() == other.store.export_memory()


def test_teach_never_penalises(rag: ReMindRAG) -> None:
    rag.teach([{"question": QUESTION, "doc_ids": ["d7"]}])
    kept = rag.store.export_memory()
    rag.teach([{"question": "What does Beta9 like?", "doc_ids": ["d9"]}])
    now = rag.store.export_memory()
    q = rag.embedder.embed([QUESTION])[0]
    q = q / np.linalg.norm(q)
    for edge, v in kept.items():  # what the first pair taught still points its way
        assert float(np.dot(now[edge], q)) >= float(np.dot(v, q)) - 1e-6


# --- self-memorization without a judge -------------------------------------------------------
def test_self_memorize_cache_repeats_the_walk_for_free_and_penalises_nothing(
    rag: ReMindRAG,
) -> None:
    rag.retrieval_config = rag.retrieval_config.with_overrides(self_memorize="cache")
    first = rag.retrieve(QUESTION, k=5)
    write = rag.memorize(first.trace_id)
    assert write.applied and write.penalised == []
    again = rag.retrieve(QUESTION, k=5)
    assert again.trace.decisions == 0
    assert [rc.chunk.id for rc in again.chunks] == [rc.chunk.id for rc in first.chunks]


def test_no_answer_and_no_llm_writes_nothing_by_default(rag: ReMindRAG) -> None:
    """memorize(trace) with no answer, no supporting ids and no LLM has nothing to judge: it
    writes nothing (it used to enhance the two top passages) and says what to pass."""
    first = rag.retrieve(QUESTION, k=5)
    write = rag.memorize(first.trace_id)
    assert not write.applied and write.enhanced == []
    assert "answer=" in write.skipped_reason and "self_memorize" in write.skipped_reason
    assert rag.memory_stats().touched_edges == 0


def test_self_memorize_enhance_enhances_the_filter_chunks_only(rag: ReMindRAG) -> None:
    rag.retrieval_config = rag.retrieval_config.with_overrides(self_memorize="enhance")
    first = rag.retrieve(QUESTION, k=5)
    write = rag.memorize(first.trace_id)
    assert write.applied and write.penalised == [] and len(write.supporting_chunks) == 2
    again = rag.retrieve(QUESTION, k=5)
    assert again.trace.decisions == 0
    assert set(write.supporting_chunks) <= {rc.chunk.id for rc in again.chunks}


@pytest.mark.parametrize("policy", ["enhance", "full", "off"])
def test_self_memorize_policies(rag: ReMindRAG, policy: str) -> None:
    rag.retrieval_config = rag.retrieval_config.with_overrides(self_memorize=policy)
    write = rag.memorize(rag.retrieve(QUESTION, k=5).trace_id)
    if policy == "off":
        assert not write.applied and "self_memorize" in write.skipped_reason
    else:
        assert write.applied and len(write.supporting_chunks) <= 2
        assert bool(write.penalised) == (policy == "full")


def test_only_a_thumbs_down_penalises_unless_configured(rag: ReMindRAG) -> None:
    r = rag.retrieve(QUESTION, k=5)
    up = rag.feedback(r.trace_id, helpful=True, chunk_ids=[r.chunks[0].chunk.id])
    assert up.applied and up.enhanced and up.penalised == []
    r = rag.retrieve("What does Beta9 like?", k=5)
    down = rag.feedback(r.trace_id, helpful=False)
    assert set(down.penalised) == set(r.trace.subgraph_edges)
    rag.retrieval_config = rag.retrieval_config.with_overrides(named_support_penalises=True)
    r = rag.retrieve("Which river runs by City2?", k=5)
    judged = rag.memorize(r.trace_id, supporting=[r.chunks[0].chunk.id])
    assert judged.penalised  # docs/method.md §3: the rest of the subgraph


# --- bounded however saturated ---------------------------------------------------------------
def test_replay_stays_bounded_when_every_edge_remembers_the_query(rag: ReMindRAG) -> None:
    q = rag.embedder.embed([QUESTION])[0]
    q = (q / np.linalg.norm(q)).tolist()
    edges = {e for d in corpus() for e in _edges(rag, d.id)}
    rag.store.import_memory({e: q for e in edges})
    for cap in (0, 3, 10):
        r = rag.retrieve(QUESTION, k=5, memory={"max_replay_nodes": cap})
        replayed = [n for n in r.trace.parents if n not in r.trace.seeds]
        nodes = [n for n in replayed if not n.startswith("c-")]
        assert len(r.trace.replayed_edges) <= cap and len(nodes) <= cap


def _edges(rag: ReMindRAG, doc_id: str) -> list[str]:
    r = rag.retrieve(f"{doc_id}", k=12, memory={"max_replay_nodes": 0})
    nodes = list(r.trace.parents)
    return [e.id for n in nodes for e in rag.store.neighbors(n)]


# --- trace, CLI, bench -----------------------------------------------------------------------
def test_rank_evidence_survives_the_trace_round_trip(rag: ReMindRAG) -> None:
    rag.teach([{"question": QUESTION, "doc_ids": ["d7"]}])
    trace = rag.retrieve(QUESTION, k=3).trace
    back = Trace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert back.rank_evidence == trace.rank_evidence and back.rank_evidence


def test_cli_memory_teach(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"id": d.id, "text": d.text}) for d in corpus()))
    store = str(tmp_path / "store")
    assert cli_main(["index", str(docs), "--store", store]) == 0
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        json.dumps({"question": QUESTION, "doc_ids": ["d7"]})
        + "\n\n"
        + json.dumps({"question": "Who?", "doc_ids": ["missing"]})
        + "\n"
    )
    assert cli_main(["memory", "teach", str(pairs), "--store", store]) == 0
    out = capsys.readouterr().out
    assert "taught 1 of 2 pairs" in out and "not found: 'missing'" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": QUESTION, "doc_ids": ["d1"]}) + "\n{oops\n")
    assert cli_main(["memory", "teach", str(bad), "--store", store]) == 2
    assert "line 2: not JSON" in capsys.readouterr().err


def test_trace_page_shows_the_ranking_evidence(rag: ReMindRAG) -> None:
    from remindrag_integrations.app.html_trace import render_trace

    rag.teach([{"question": QUESTION, "doc_ids": ["d7"]}])
    r = rag.retrieve(QUESTION, k=3)
    page = render_trace(rag.store, r.trace)
    top = r.chunks[0]
    parts = r.trace.rank_evidence[top.chunk.id]
    row = f"<td>1</td><td>{top.chunk.id}</td><td>{top.chunk.doc_id}</td>"
    assert "<h2>Ranking</h2>" in page and row in page
    cells = f"<td>{parts['memory']:.3f}</td><td>{parts['score']:.3f}</td>"
    assert cells + f"<td>{parts['relevance']:.3f}</td>" in page  # the result's score, 0-1
