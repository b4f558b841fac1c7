"""The peers of ``bench run`` (LlamaIndex QueryFusionRetriever, LangChain EnsembleRetriever,
langchain-graph-retriever) on the harness's chunks and embedder: tests/data samples, the hash
embedder, seconds. Each skips, saying which extra installs it, where its packages are missing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness import peers
from benchmarks.harness.cli import main
from benchmarks.harness.data import Dataset
from benchmarks.harness.resources import make_embedder
from benchmarks.harness.runner import Bench
from remindrag_integrations.core.errors import ReMindError
from remindrag_integrations.core.types import Chunk

DATA = Path(__file__).resolve().parents[1] / "data"


def need(method: str) -> None:
    for module in peers.REQUIRES[method]:
        pytest.importorskip(module, reason=f"{method} needs the 'peers' extra ({module})")


@pytest.fixture()
def hotpot_ds(hotpot: tuple[list[dict], dict[str, dict]]) -> Dataset:
    qs, rows = hotpot
    return Dataset("hotpotqa_train100_sample", qs[:4], rows)


@pytest.mark.parametrize("setting", ["pooled", "per-question"])
def test_every_peer_runs_through_bench_run(setting: str, tmp_path: Path) -> None:
    for m in peers.PEERS:
        need(m)
    out = tmp_path / "run.json"
    methods = ["bm25", *peers.PEERS]
    argv = ["run", "--data", str(DATA), "--set", "hotpotqa_train100_sample", "--limit", "4"]
    argv += ["--embedder", "hash", "--embed-cache", "", "--setting", setting, "--k", "5"]
    assert main([*argv, "--methods", ",".join(methods), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["methods"] == methods
    raw = json.loads((tmp_path / "raw" / "run.json").read_text())
    chunk_ids = {c.id for kb in _kbs(setting) for c in kb.chunks}
    for m in peers.PEERS:
        s = res["summary"][m]
        assert s["n"] == 4 and 0.0 <= s["recall@2"] <= s["recall@5"] <= 1.0
        assert s["latency_ms"]["retrieve"]["p50"] > 0.0  # timed like the other baselines
        recs = [r for r in raw["records"] if r["method"] == m]
        for r in recs:
            assert set(r["retrieved"]) <= chunk_ids  # the harness's chunks, by their ids
            assert len(set(r["retrieved"])) == len(r["retrieved"])
            if m != "lc_graph":  # the two hybrids always fill k
                assert len(r["retrieved"]) == 5
            else:  # the graph returns what the traversal reached, at most k
                assert 1 <= len(r["retrieved"]) <= 5
    graph = [r for r in raw["records"] if r["method"] == "lc_graph"]
    assert any(len(r["retrieved"]) == 5 for r in graph)


def _kbs(setting: str) -> list:
    from benchmarks.harness.data import load_dataset

    ds = load_dataset("hotpotqa_train100_sample", DATA).head(4)
    return Bench(ds, setting, "none", make_embedder("hash")).unique_kbs()


def test_the_frameworks_see_the_harness_vectors() -> None:
    need("lc_ensemble")
    need("li_fusion")
    emb = make_embedder("hash")
    texts = ["Paris is the capital of France.", "The Seine flows through Paris."]
    want = emb.embed(texts)
    lc = peers.langchain_embeddings(emb)
    assert np.allclose(lc.embed_documents(texts), want, atol=1e-6)
    assert np.allclose(lc.embed_query(texts[0]), want[0], atol=1e-6)
    li = peers.llama_index_embedding(emb)
    assert np.allclose(li.get_text_embedding_batch(texts), want, atol=1e-6)
    assert np.allclose(li.get_query_embedding(texts[1]), want[1], atol=1e-6)


def _chunk(cid: str, title: str, body: str) -> Chunk:
    text = f"{title}\n{body}"
    return Chunk(cid, cid, 0, text, 0, len(text), {"title": title})


def test_mentions_are_other_titles_named_as_whole_words() -> None:
    chunks = [
        _chunk("a", "Paris", "Paris is the capital of France; the Seine crosses it."),
        _chunk("b", "France", "A country whose capital is Paris. Parisian food is famed."),
        _chunk("c", "Paris Hilton", "An American media personality, born in New York City."),
        _chunk("d", "Seine", "A river."),
    ]
    got = dict(zip("abcd", peers.mentions(chunks)))
    assert got["a"] == ["France", "Seine"]  # its own title is not a mention
    assert got["b"] == ["Paris"]  # "Parisian" is not "Paris"
    assert got["c"] == []  # the title line "Paris Hilton" names nothing
    assert got["d"] == []


def test_graph_edges_run_both_ways_from_the_mentions() -> None:
    need("lc_graph")
    chunks = [
        _chunk("a", "Ada Lovelace", "A mathematician who worked with Charles Babbage."),
        _chunk("b", "Charles Babbage", "An engineer who designed the Analytical Engine."),
        _chunk("c", "Analytical Engine", "A proposed mechanical computer."),
        _chunk("d", "Lord Byron", "A poet; Ada Lovelace was his daughter."),
        _chunk("e", "Unrelated", "Nothing links here."),
    ]
    emb = make_embedder("hash")
    peer = peers.LangChainGraph(chunks, emb, start_k=1, max_depth=2)
    got = [c.id for c in peer.retrieve(chunks[0].text, emb.embed([chunks[0].text])[0], 5)]
    assert got[0] == "a"  # the one start passage: the query is its text
    # one hop: the passage it names (b) and the passage naming it (d); two hops: c
    assert set(got) == {"a", "b", "c", "d"}
    shallow = peers.LangChainGraph(chunks, emb, start_k=1, max_depth=1)
    one_hop = [c.id for c in shallow.retrieve(chunks[0].text, None, 5)]
    assert set(one_hop) == {"a", "b", "d"}


def test_the_graph_peer_top_five_is_what_k_five_returns(hotpot_ds: Dataset) -> None:
    need("lc_graph")
    emb = make_embedder("hash")
    bench = Bench(hotpot_ds, "pooled", "none", emb)
    kb = bench.unique_kbs()[0]
    peer = peers.LangChainGraph(kb.chunks, emb, start_k=4)
    for q in hotpot_ds.questions:
        ten = [c.id for c in peer.retrieve(q["question"], None, 10)]
        five = [c.id for c in peer.retrieve(q["question"], None, 5)]
        assert five == ten[:5]


def test_a_missing_extra_is_named_before_indexing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        if name.startswith("langchain_graph"):
            return None
        if name.startswith("llama_index.retrievers"):  # a missing parent package raises
            raise ModuleNotFoundError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert not peers.available("li_fusion") and not peers.available("lc_graph")
    argv = ["run", "--data", str(DATA), "--set", "hotpotqa_train100_sample", "--embedder", "hash"]
    assert main([*argv, "--methods", "bm25,lc_graph"]) == 2
    err = capsys.readouterr().err
    assert "lc_graph" in err and "remindrag-integrations[peers]" in err
    with pytest.raises(peers.PeerMissing, match=r"\[peers\]") as raised:
        peers.make_peer("lc_graph", [], make_embedder("hash"))
    assert isinstance(raised.value, ReMindError)
    assert main([*argv, "--methods", "bm25,colbert"]) == 2
    assert "unknown method(s) colbert" in capsys.readouterr().err
