"""The engine end to end on real HotpotQA passages, with scripted LLMs that read the prompts."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from remindrag_integrations import Document, IndexConfig, InvalidDocumentError, ReMindRAG, Trace
from remindrag_integrations.core.indexing import make_chunks
from remindrag_integrations.core.memory import math as mem
from remindrag_integrations.errors import ExtractionError, UnknownNodeError, UnknownTraceError
from remindrag_integrations.testing import BrokenLLM, HashEmbedder, OracleLLM, ScriptedLLM


def build(question: dict, rows: dict, llm=None) -> tuple[ReMindRAG, OracleLLM, set[str]]:
    docs = [
        Document(pid, rows[pid]["title"] + "\n" + rows[pid]["text"])
        for pid in question["context_pids"]
    ]
    oracle = OracleLLM()
    eng = ReMindRAG(llm=llm or oracle, embeddings=HashEmbedder())
    eng.insert(docs)
    gold = {
        c.id
        for d in docs
        if d.id in question["gold_pids"]
        for c in make_chunks(d, eng.index_config)
    }
    oracle.store, oracle.gold = eng.store, {question["question"]: gold}
    return eng, oracle, gold


def memory_snapshot(eng: ReMindRAG) -> dict:
    return {k: np.asarray(v, dtype=np.float32) for k, v in eng.store.export_memory().items()}


def test_memory_replay_replaces_traversal_on_the_same_question(hotpot) -> None:
    qs, rows = hotpot
    checked = 0
    for q in qs:
        eng, _, gold = build(q, rows)
        first = eng.answer(q["question"], llm_navigation="always")  # the oracle walks every one
        t1 = first.retrieval.trace
        seeded = {"c-" + s[2:] for s in t1.seeds}
        if t1.traversal_calls == 0 or not gold <= set(t1.chunk_ids) or gold <= seeded:
            continue  # the seeds alone held the gold chunks: nothing to learn here
        checked += 1
        write = eng.memorize(first.trace_id, answer=first.text)
        assert write.applied and set(write.supporting_chunks) == gold
        second = eng.answer(q["question"], llm_navigation="always")
        t2 = second.retrieval.trace
        assert t2.stop_reason == "replay" and t2.traversal_calls == 0
        assert t2.replayed_edges
        assert gold <= {rc.chunk.id for rc in second.retrieval.chunks}
        assert set(second.citations) == set(first.citations) == gold
        # the whole traversal stage is saved; the answer prompt is the same size
        saved = t1.tokens["traversal"]
        assert saved > 300
        assert t2.tokens["answer"] == t1.tokens["answer"]
        query_cost_1 = sum(t1.tokens.values()) - t1.tokens["memorize"]  # memorize runs after
        assert query_cost_1 - sum(t2.tokens.values()) == saved
    assert checked >= 3


def test_the_walk_reaches_gold_chunks_the_seeds_missed(hotpot) -> None:
    qs, rows = hotpot
    gains = 0
    for q in qs:
        eng, _, gold = build(q, rows)
        r = eng.retrieve(q["question"])
        seeds_only = {
            c for c, s in r.trace.parents.items() if c.startswith("c-") and s[0] in r.trace.seeds
        }
        gains += len((gold & set(r.trace.chunk_ids)) - seeds_only)
        assert r.trace.stop_reason in ("enough", "max_hops", "exhausted", "no_progress")
    assert gains >= 3


def test_broken_llm_degrades_gracefully_and_changes_nothing(hotpot) -> None:
    qs, rows = hotpot
    eng, _, _ = build(qs[0], rows)
    r0 = eng.retrieve(qs[0]["question"])
    eng.memorize(r0.trace_id, supporting=r0.trace.chunk_ids)
    before, counts = memory_snapshot(eng), eng.store.counts()
    broken = BrokenLLM()
    r = eng.retrieve(
        qs[0]["question"],
        llm=broken,
        verify_replay=True,
        on_invalid_move="stop",
        llm_navigation="always",
    )
    assert r.chunks, "seed and replay results still come back"
    assert r.trace.stop_reason in ("invalid_llm_output", "max_iterations")
    assert any(m.action == "invalid" for m in r.trace.moves)
    assert r.trace.llm_calls["traversal"] == 2  # one ask, one re-ask that says why
    w = eng.memorize(r.trace_id, llm=broken)
    assert not w.applied and w.skipped_reason
    a = eng.answer(qs[0]["question"], llm=broken)
    assert a.retrieval.chunks
    assert memory_snapshot(eng).keys() == before.keys()
    assert all(np.array_equal(before[k], v) for k, v in memory_snapshot(eng).items())
    assert eng.store.counts() == counts


def test_unusable_replies_fall_back_to_the_zero_token_choice(hotpot) -> None:
    qs, rows = hotpot
    eng, _, _ = build(qs[0], rows)
    # room for several fallbacks in a row (the default bounds end an idle walk after 3)
    r = eng.retrieve(
        qs[0]["question"], llm=BrokenLLM(), llm_navigation="always", max_idle_decisions=6
    )
    t = r.trace
    assert t.stop_reason not in ("invalid_llm_output", "")
    assert t.fallbacks >= 1 and t.unusable_replies >= 2 * t.fallbacks
    walked = [m for m in t.moves if m.action == "forward" and m.note.startswith("fallback:")]
    fallback_targets = {m.node_id for m in t.moves if m.note.startswith("fallback:") and m.node_id}
    assert walked and len(fallback_targets) >= 2  # the walk goes on, choice after choice
    again = Trace.from_dict(t.to_dict())
    assert (again.fallbacks, again.unusable_replies) == (t.fallbacks, t.unusable_replies)


def test_timeouts_are_typed_and_lose_nothing(hotpot) -> None:
    qs, rows = hotpot
    eng, _, _ = build(qs[1], rows)
    counts = eng.store.counts()

    def slow(prompt: str) -> str:
        time.sleep(0.5)
        return '{"enough": true}'

    r = eng.retrieve(qs[1]["question"], llm=slow, llm_timeout=0.05, llm_navigation="always")
    assert r.trace.stop_reason.startswith("llm_error") and "no reply within" in r.trace.stop_reason
    assert r.chunks
    new = [Document("new", "Paris is the capital of France.")]
    slow_engine = ReMindRAG(
        llm=slow,
        embeddings=HashEmbedder(),
        store=eng.store,
        retrieval_config=eng.retrieval_config.with_overrides(llm_timeout=0.05),
    )
    with pytest.raises(ExtractionError, match="no reply within"):
        slow_engine.insert(new)
    with pytest.raises(ExtractionError, match="new"):
        ReMindRAG(llm=BrokenLLM(), embeddings=HashEmbedder(), store=eng.store).insert(new)
    assert eng.store.counts() == counts
    fallback = ReMindRAG(
        llm=BrokenLLM(),
        embeddings=HashEmbedder(),
        store=eng.store,
        index_config=IndexConfig(on_extraction_error="fallback"),
    )
    report = fallback.insert(new)
    assert report.fallback_chunks == 1 and report.entities_added >= 1


def test_bad_documents_are_rejected_before_anything_is_written() -> None:
    eng = ReMindRAG(embeddings=HashEmbedder(), index_config=IndexConfig(max_document_chars=1000))
    for bad in (
        [Document("", "text")],
        [Document("a", "x. " * 600)],
        [Document("a", "one."), Document("a", "two.")],
        [42],
    ):
        with pytest.raises(InvalidDocumentError):
            eng.insert([Document("ok", "Fine text about Paris."), *bad])
        assert eng.store.counts()["documents"] == 0
    # an empty document is skipped and named in the report, not a failure of the insert
    report = eng.insert([Document("ok", "Fine text about Paris."), Document("a", "   ")])
    assert report.documents == 1 and report.empty_documents == ("a",)
    assert eng.store.document_ids() == ["ok"]


def test_unknown_ids_are_typed_errors(hotpot) -> None:
    qs, rows = hotpot
    eng, _, _ = build(qs[0], rows)
    with pytest.raises(UnknownTraceError):
        eng.memorize("no-such-trace")
    with pytest.raises(UnknownNodeError):
        eng.store.get_node("e-ffffffffff")
    with pytest.raises(UnknownNodeError):
        eng.store.neighbors("a-0000000000")


def test_async_twins_match_sync(hotpot) -> None:
    qs, rows = hotpot
    eng, _, _ = build(qs[2], rows)

    async def run() -> list:
        return await asyncio.gather(*(eng.aretrieve(q["question"]) for q in qs[:4]))

    results = asyncio.run(run())
    for q, r in zip(qs, results):
        s = eng.retrieve(q["question"])
        assert [c.chunk.id for c in s.chunks] == [c.chunk.id for c in r.chunks]
        assert s.trace.llm_calls == r.trace.llm_calls


def test_async_llm_does_not_block_the_loop() -> None:
    ticks: list[float] = []

    async def llm(prompt: str) -> str:
        await asyncio.sleep(0.05)
        return '{"title": "t", "entities": ["Paris"], "triples": []}'

    async def ticker() -> None:
        for _ in range(10):
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.01)

    async def main() -> None:
        eng = ReMindRAG(llm=llm, embeddings=HashEmbedder())
        await asyncio.gather(
            eng.ainsert([Document(f"d{i}", f"Paris fact {i}.") for i in range(6)]), ticker()
        )

    asyncio.run(main())
    assert len(ticks) == 10  # the ticker ran while the LLM calls were pending


def test_concurrent_memorize_loses_no_update(hotpot) -> None:
    qs, rows = hotpot
    eng, _, gold = build(qs[0], rows)
    q = qs[0]["question"]
    traces = [eng.retrieve(q, memory={"max_replay_nodes": 0}) for _ in range(24)]
    edges = set(traces[0].trace.subgraph_edges)
    assert all(set(t.trace.subgraph_edges) == edges for t in traces)
    barrier = threading.Barrier(8)

    def work(chunk: list) -> None:
        barrier.wait()
        for t in chunk:
            eng.memorize(t.trace_id, supporting=sorted(gold))

    threads = [threading.Thread(target=work, args=(traces[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert eng.memory_stats().writes_applied == 24
    effective = traces[0].trace.memory_result or eng.trace(traces[0].trace_id).memory_result
    q_hat = mem.unit(np.asarray(traces[0].trace.query_embedding, dtype=np.float32))
    expected = np.zeros_like(q_hat)
    for _ in range(24):
        expected = mem.enhance(expected, q_hat)
    for eid in effective["enhanced"]:
        assert np.allclose(eng.store.memory([eid])[0], expected, atol=1e-5)


def test_pre_query_decomposition_seeds_each_subquestion(hotpot) -> None:
    qs, rows = hotpot
    eng, oracle, _ = build(qs[1], rows)

    def llm(prompt: str) -> str:
        if prompt.startswith("Decide whether"):
            return '{"need_retrieval": true, "subquestions": ["Christopher Nolan", "Sathish Kalathil"]}'
        return oracle.fn(prompt)

    r = eng.retrieve(qs[1]["question"], llm=llm, pre_query=True, max_subquestions=2)
    assert r.trace.subquestions == ["Christopher Nolan", "Sathish Kalathil"]
    assert r.trace.llm_calls["pre_query"] == 1
    assert len(r.trace.seeds) >= 3

    def no(prompt: str) -> str:
        return '{"need_retrieval": false, "subquestions": []}'

    r = eng.retrieve("What is 2 + 2?", llm=no, pre_query=True)
    assert r.chunks == [] and r.trace.stop_reason == "no_retrieval_needed"


def test_feedback_thumbs_down_penalises(hotpot) -> None:
    qs, rows = hotpot
    eng, _, gold = build(qs[0], rows)
    r = eng.retrieve(qs[0]["question"])
    eng.memorize(r.trace_id, supporting=sorted(gold))
    r2 = eng.retrieve(qs[0]["question"])
    assert r2.trace.stop_reason == "replay"
    q_hat = np.asarray(r2.trace.query_embedding, dtype=np.float32)
    before = {e: float(eng.store.memory([e])[0] @ q_hat) for e in r2.trace.replayed_edges}
    w = eng.feedback(r2.trace_id, helpful=False)
    assert w.applied and set(w.penalised) == set(r2.trace.subgraph_edges)
    for e, s in before.items():
        assert 0 <= float(eng.store.memory([e])[0] @ q_hat) < s


def test_scripted_llm_records_prompts_and_counts_tokens() -> None:
    llm = ScriptedLLM(
        lambda p: (
            '{"title": "Paris", "entities": ["Paris", "France"], '
            '"triples": [["Paris", "Paris is in France.", "France"]]}'
        )
    )
    eng = ReMindRAG(llm=llm, embeddings=HashEmbedder())
    report = eng.insert([Document("d", "Paris is the capital of France.")])
    assert report.costs.llm_calls["extraction"] == 1 == len(llm.prompts)
    assert report.costs.tokens["extraction"] > 100
    assert report.relations == 1 and report.entities_added == 2


def test_thumbs_up_on_a_chunk_the_walk_missed_teaches_a_path(hotpot) -> None:
    qs, rows = hotpot
    taught = 0
    for q in qs:
        eng = ReMindRAG(embeddings=HashEmbedder())  # zero-token walk
        eng.insert(
            [Document(p, rows[p]["title"] + "\n" + rows[p]["text"]) for p in q["context_pids"]]
        )
        r = eng.retrieve(q["question"], k=3, fill_to_k=False, navigator={"enough_chunks": 1})
        gold_chunks = [
            n.chunk_id
            for n in eng.store.get_nodes(
                [
                    a
                    for a, _ in eng.store.search(
                        np.asarray(r.trace.query_embedding, dtype=np.float32), 10**6, ("anchor",)
                    )
                ]
            )
            if n.doc_id in q["gold_pids"]
        ]
        missed = [c for c in gold_chunks if c and c not in r.trace.chunk_ids]
        if not missed:
            continue
        w = eng.feedback(r.trace_id, helpful=True, chunk_ids=missed)
        if not w.applied:
            continue  # not within memory.max_bridge_hops hops of the subgraph
        taught += 1
        again = eng.retrieve(q["question"], k=10, fill_to_k=False)
        assert set(w.supporting_chunks) <= {rc.chunk.id for rc in again.chunks}
        assert again.trace.replayed_edges
    assert taught >= 3


def test_async_retrieval_keeps_store_round_trips_off_the_loop(hotpot) -> None:
    from remindrag_integrations.stores import InMemoryGraphStore

    on_loop: list[str] = []

    class RemoteStore(InMemoryGraphStore):
        """Records neighbour lookups (a database round trip in a real store) made on the
        event loop's own thread."""

        def neighbors(self, node_id: str):  # type: ignore[no-untyped-def]
            try:
                asyncio.get_running_loop()
                on_loop.append(node_id)
            except RuntimeError:  # no loop in this thread: a worker thread, as it should be
                pass
            return super().neighbors(node_id)

    qs, rows = hotpot
    eng, oracle, _ = build(qs[0], rows)
    remote = RemoteStore()
    remote.__dict__.update(eng.store.__dict__)
    eng.store = oracle.store = remote
    r = asyncio.run(eng.aretrieve(qs[0]["question"]))
    assert r.trace.decisions >= 1 and r.chunks
    assert on_loop == []


@pytest.mark.parametrize("query", ["", "   ", None, 42])
def test_bad_queries_are_typed_errors(query) -> None:
    from remindrag_integrations import InvalidQueryError

    eng = ReMindRAG(embeddings=HashEmbedder())
    eng.insert([Document("d", "Paris is the capital of France.")])
    with pytest.raises(InvalidQueryError):
        eng.retrieve(query)
    with pytest.raises(InvalidQueryError):
        asyncio.run(eng.aretrieve(query))
