"""Scores with a meaning: the score a framework sees is a relevance in [0, 1] on which one cutoff
(``RECOMMENDED_MIN_SCORE``) tells an on-topic passage from an off-topic one, whatever the question
and the corpus; ``min_score`` abstains, and an abstained retrieval writes no memory. With the
packaged embedder (``embeddings=None``), the frameworks' own idioms, and margins around the cutoff
rather than exact floats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core import Document as LIDocument
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine

from remindrag_integrations import ReMindRAG, ReMindRetriever
from remindrag_integrations.app.cli import main as cli_main
from remindrag_integrations.core.calibration import combined, coverage, relevance
from remindrag_integrations.core.config import RECOMMENDED_MIN_SCORE, RetrievalConfig
from remindrag_integrations.core.errors import ConfigError
from remindrag_integrations.core.types import Trace
from remindrag_integrations.testing import HashEmbedder

CUT = RECOMMENDED_MIN_SCORE
MARGIN = 0.05  # every check stays this far from the cutoff: no test reads a float's last bits

RIVERS = {
    "thames.txt": "The Thames is the river that flows through London, England. It rises in "
    "the Cotswolds and reaches the North Sea through a long estuary east of the city.",
    "seine.txt": "The Seine flows through Paris before it reaches the English Channel at Le "
    "Havre. Its banks in Paris are a World Heritage Site.",
    "danube.txt": "The Danube is Europe's second-longest river. It flows through Vienna, "
    "Bratislava, Budapest and Belgrade on its way to the Black Sea.",
    "vistula.txt": "The Vistula is the longest river in Poland. It flows through Krakow and "
    "Warsaw and reaches the Baltic Sea near Gdansk.",
    "carbonara.txt": "Spaghetti carbonara: cook the pasta in salted water, fry the guanciale, "
    "whisk eggs with grated pecorino and black pepper, and toss everything off the heat.",
}
ON_TOPIC = "Which river flows through London?"
OFF_TOPIC = "What is the boiling point of mercury?"


def lc_documents() -> list[LCDocument]:
    """The corpus as a loader gives it, split by LangChain's splitter."""
    docs = [LCDocument(page_content=t, metadata={"source": s}) for s, t in RIVERS.items()]
    return RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=0).split_documents(docs)


@pytest.fixture(scope="module")
def retriever() -> ReMindRetriever:
    return ReMindRetriever.from_documents(lc_documents())  # the packaged embedder


def source(doc: LCDocument) -> str:
    return str(doc.metadata["source"])


# --- what the score is -------------------------------------------------------------------------
def test_scores_are_relevances_in_0_1_falling_with_the_rank(retriever: ReMindRetriever) -> None:
    for q in (ON_TOPIC, OFF_TOPIC, "How do I make carbonara?"):
        docs = retriever.invoke(q, k=5)
        scores = [d.metadata["remindrag"]["score"] for d in docs]
        assert all(0.0 <= s <= 1.0 for s in scores), scores
        assert scores == sorted(scores, reverse=True)  # a framework that sorts keeps our order
        ranks = [d.metadata["remindrag"]["rank_score"] for d in docs]
        assert ranks[0] > 1.0  # the fused rank score is kept, unbounded as before
    nodes = retriever.retrieve(ON_TOPIC)
    assert [n.score for n in nodes] == [n.node.metadata["remindrag"]["score"] for n in nodes]


def test_one_cutoff_tells_on_topic_from_off_topic(retriever: ReMindRetriever) -> None:
    on = retriever.invoke(ON_TOPIC, k=5)
    assert source(on[0]) == "thames.txt"
    assert on[0].metadata["remindrag"]["score"] >= CUT + MARGIN
    recipe = next(d for d in on if source(d) == "carbonara.txt")
    assert recipe.metadata["remindrag"]["score"] <= CUT - MARGIN  # was 1.12-ish relative
    off = retriever.invoke(OFF_TOPIC, k=5)
    assert max(d.metadata["remindrag"]["score"] for d in off) <= CUT - MARGIN
    cooking = retriever.invoke("How do I make carbonara?", k=5)
    assert source(cooking[0]) == "carbonara.txt"
    assert cooking[0].metadata["remindrag"]["score"] >= CUT + MARGIN
    assert all(d.metadata["remindrag"]["score"] <= CUT - MARGIN for d in cooking[1:])


def test_relevance_is_the_questions_best_falling_by_the_square_root_of_the_share() -> None:
    got = relevance(0.8, [2.0, 0.5, 0.6, -0.1])
    assert got[0] == pytest.approx(0.8)
    assert got[1] == pytest.approx(0.4)  # 0.8 * sqrt(0.5 / 2)
    assert got[2] == pytest.approx(0.4)  # never above a passage returned before it
    assert got[3] == 0.0
    assert relevance(0.5, []) == []


def test_the_questions_relevance_needs_its_meaning_and_its_words() -> None:
    words = {"vistula", "warsaw", "flow"}  # content words: plural s dropped, "which" left out
    texts = ["The Vistula flows through Krakow.", "Warsaw is the capital of Poland."]
    assert coverage(words, texts) == pytest.approx(1.0)
    assert coverage(words, texts[:1]) == pytest.approx(3 / 4)  # (2 held + 1) / (3 + 1)
    assert coverage(words, ["A recipe for carbonara."]) == pytest.approx(1 / 4)
    assert coverage(set(), texts) is None
    assert combined(0.64, 0.25) == pytest.approx(0.4)  # the geometric mean
    assert combined(0.9, 0.0) == 0.0
    assert combined(0.6, None) == pytest.approx(0.6)  # no content word: the meaning alone


def test_a_question_about_names_the_corpus_lacks_scores_below_the_cutoff(
    retriever: ReMindRetriever,
) -> None:
    """Close in meaning (a river, a city), but the corpus names neither: off the corpus."""
    q = (
        "Which river flows through Ljubljana and Zagreb, in Slovenia and Croatia, and which "
        "dams stand on it?"
    )
    docs = retriever.invoke(q, k=5)
    assert docs and docs[0].metadata["remindrag"]["score"] <= CUT - MARGIN
    named = retriever.invoke("Which cities does the Danube flow through?", k=5)
    assert source(named[0]) == "danube.txt"
    assert named[0].metadata["remindrag"]["score"] >= CUT + MARGIN


# --- the frameworks' cutoffs ----------------------------------------------------------------
def test_langchain_similarity_score_threshold(retriever: ReMindRetriever) -> None:
    cut = ReMindRetriever(
        engine=retriever.engine,
        search_type="similarity_score_threshold",
        search_kwargs={"score_threshold": CUT, "k": 5},
    )
    assert cut.invoke(OFF_TOPIC) == []
    kept = cut.invoke(ON_TOPIC)
    assert "thames.txt" in {source(d) for d in kept}
    assert "carbonara.txt" not in {source(d) for d in kept}
    assert all(d.metadata["remindrag"]["score"] >= CUT for d in kept)
    assert cut.invoke(OFF_TOPIC, score_threshold=0.0)  # per call, as search_kwargs
    with pytest.raises(ConfigError, match="score_threshold"):
        ReMindRetriever(engine=retriever.engine, search_type="similarity_score_threshold")
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        ReMindRetriever(engine=retriever.engine, search_kwargs={"score_threshold": 1.5})
    with pytest.raises(ConfigError, match="mmr"):
        ReMindRetriever(engine=retriever.engine, search_type="mmr")


def test_llamaindex_similarity_postprocessor(retriever: ReMindRetriever) -> None:
    engine = RetrieverQueryEngine.from_args(
        retriever,
        llm=MockLLM(),
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=CUT)],
    )
    with retriever.memory_event_handler() as handler:
        off = engine.query(OFF_TOPIC)
        assert off.source_nodes == []
        assert handler.writes == []  # no passage used, no memory
        on = engine.query(ON_TOPIC)
    assert "thames.txt" in {n.node.metadata["source"] for n in on.source_nodes}
    assert "carbonara.txt" not in {n.node.metadata["source"] for n in on.source_nodes}


def test_llamaindex_nodes_from_a_sentence_splitter() -> None:
    docs = [LIDocument(text=t, metadata={"file_name": s}) for s, t in RIVERS.items()]
    nodes = SentenceSplitter(chunk_size=256, chunk_overlap=0).get_nodes_from_documents(docs)
    r = ReMindRetriever.from_documents(nodes, similarity_top_k=5)
    kept = SimilarityPostprocessor(similarity_cutoff=CUT).postprocess_nodes(
        r.retrieve("Which river reaches the Baltic Sea near Gdansk?")
    )
    assert [n.node.metadata["file_name"] for n in kept][:1] == ["vistula.txt"]
    assert (
        SimilarityPostprocessor(similarity_cutoff=CUT).postprocess_nodes(r.retrieve(OFF_TOPIC))
        == []
    )


# --- abstain: min_score -------------------------------------------------------------------------
def test_min_score_abstains_and_writes_no_memory(retriever: ReMindRetriever) -> None:
    rag = retriever.engine
    before = rag.memory_stats().touched_edges
    r = rag.retrieve(OFF_TOPIC, min_score=CUT)
    assert r.chunks == [] and r.trace.abstained and r.trace.stop_reason == "below_min_score"
    assert r.trace.decisions == 0  # no walk for an off-corpus question
    w = rag.memorize(r.trace_id, answer="It boils at 356.7 degrees Celsius.")
    assert not w.applied and "min_score" in w.skipped_reason
    assert not rag.feedback(r.trace_id, helpful=True).applied
    assert rag.memory_stats().touched_edges == before
    assert rag.trace(r.trace_id).abstained  # kept with the trace, and where the store keeps it
    assert Trace.from_dict(json.loads(json.dumps(r.trace.to_dict()))).abstained
    a = rag.answer(OFF_TOPIC, min_score=CUT)
    assert a.citations == [] and "could not find" in a.text
    on = rag.retrieve(ON_TOPIC, min_score=CUT)
    assert on.chunks and on.chunks[0].chunk.doc_id == "thames.txt" and not on.trace.abstained
    assert len(on.chunks) == rag.retrieval_config.k  # an answered question keeps its k passages


def test_min_score_is_a_config_field_everywhere(retriever: ReMindRetriever) -> None:
    r = ReMindRetriever(engine=retriever.engine)
    assert r.invoke(OFF_TOPIC, min_score=CUT) == []
    assert r.invoke(OFF_TOPIC)  # off by default: k passages
    with pytest.raises(ConfigError):
        r.invoke(OFF_TOPIC, min_score=2.0)
    made = ReMindRetriever.from_texts(["The Thames flows through London."], min_score=CUT)
    assert made.engine.retrieval_config.min_score == CUT
    assert made.invoke(OFF_TOPIC) == []
    assert made.invoke(OFF_TOPIC, min_score=None)  # per call off again


def test_langchain_memory_callback_writes_nothing_off_topic(retriever: ReMindRetriever) -> None:
    cut = ReMindRetriever(engine=retriever.engine, search_kwargs={"score_threshold": CUT})
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    chain = (
        {"context": cut, "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=["I don't see it in the context."])
        | StrOutputParser()
    )
    cb = cut.memory_callback()
    chain.invoke(OFF_TOPIC, config={"callbacks": [cb]})
    assert [w for w in cb.writes if w.applied] == []
    assert not cut.memorize().applied  # the last trace abstained: nothing to learn


def test_a_store_keeps_min_score(tmp_path: Path) -> None:
    rag = ReMindRAG(embeddings=HashEmbedder(64), retrieval_config=RetrievalConfig(min_score=0.3))
    rag.insert(["The Thames flows through London."])
    rag.save(tmp_path / "kb")
    back = ReMindRAG.load(tmp_path / "kb", embeddings=HashEmbedder(64))
    assert back.retrieval_config.min_score == 0.3


# --- the command line ---------------------------------------------------------------------------
def ask(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert cli_main(["ask", *args, "--store", "kb"]) == 0
    return capsys.readouterr().out


def test_cli_ask_off_topic_says_nothing_relevant_and_memorises_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in RIVERS.items():
        (docs / name).write_text(text, encoding="utf-8")
    assert cli_main(["index", str(docs), "--store", "kb"]) == 0
    capsys.readouterr()
    out = json.loads(ask(capsys, OFF_TOPIC, "--json"))
    assert out["abstained"] and out["passages"] == [] and not out["memorized"]
    assert out["min_score"] == CUT and out["best_score"] <= CUT - MARGIN
    text = ask(capsys, OFF_TOPIC)
    assert "nothing relevant found" in text and "London" not in text
    on = json.loads(ask(capsys, ON_TOPIC, "--json"))
    assert not on["abstained"] and on["memorized"]
    assert on["passages"][0]["doc"].endswith("thames.txt")
    assert on["passages"][0]["score"] >= CUT + MARGIN
    forced = json.loads(ask(capsys, OFF_TOPIC, "--json", "--min-score", "0"))
    assert forced["passages"] and not forced["abstained"]
