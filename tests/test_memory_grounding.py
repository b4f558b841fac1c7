"""Memory learns only from grounded answers: with no LLM the answer decides what ``memorize``
writes, on every path an app takes (the engine, the retriever, the MCP ``remember`` tool,
LangChain's callback wherever it is attached, LlamaIndex's handler).

The corpus: three capitals on their rivers, embedded by the deterministic HashEmbedder (the
support is read from the texts, so nothing here hinges on a near-tie of scores)."""

from __future__ import annotations

import asyncio
import inspect
import warnings
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest
from capitals import QUESTION, TEXTS
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from remindrag_integrations import Document, ReMindMemoryCallback, ReMindRAG, ReMindRetriever
from remindrag_integrations.core.config import RECOMMENDED_MIN_SCORE, RetrievalConfig
from remindrag_integrations.core.memory.grounding import (
    abstains,
    grounded_in,
    key_words,
    names_held,
)
from remindrag_integrations.faces.llama_index.events import ReMindMemoryEventHandler
from remindrag_integrations.testing import HashEmbedder

# refusals as chat models write them over a retrieval prompt (Qwen2.5, Llama 3, Mistral,
# GPT-4o-mini, SmolLM2 and Gemma replies seen on this library's answer prompt and elsewhere)
ABSTAINING = [
    "I don't know.",
    "I do not know the answer to that.",
    "I don’t know",  # a typographic apostrophe
    "The context does not mention which river flows through Warsaw.",
    "The provided context does not contain information about the river.",
    "The passages provided do not mention a river.",
    "The answer is not in the context.",
    "I cannot answer this question based on the given passages.",
    "I'm sorry, but I couldn't find any information about that in the provided context.",
    "Based on the provided context, there is no information about Warsaw's river.",
    "There is no mention of a river in the text.",
    "No information.",
    "Insufficient information to answer.",
    "It is not possible to determine the answer from the given context.",
    "The answer cannot be determined from the context.",
    "The given text doesn't specify the river.",
    "None of the passages mention it.",
    "I don't have enough information to answer that question.",
    "Not mentioned in the passages.",
    "Unknown.",
    "N/A",
    "",
    "   \n",
]
COMMITTING = [
    "The Vistula.",
    "Yes.",
    "No, he was American.",
    "In the context of the war, he did not have children.",
    "The film was not released in France until 1999.",
    "There is no evidence he married.",
    "He had no children.",
    "The data does not include 2020 figures.",
    "No data was lost.",
]


@pytest.mark.parametrize("answer", ABSTAINING)
def test_refusals_abstain(answer: str) -> None:
    assert abstains(answer)


@pytest.mark.parametrize("answer", COMMITTING)
def test_answers_that_commit_do_not_abstain(answer: str) -> None:
    assert abstains(answer) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  Cafe\tMUSIC  ", "cafe music"),
        ("Caf\u00e9 Mu\u0308sic", "cafe music"),  # precomposed and combining accents
        ("Jos\u00e9\u2019s  \u2018band\u2019", "jose's 'band'"),
        ("Stra\u00dfe \ufb01ne", "strasse fine"),  # casefold and NFKD's compatibility forms
    ],
)
def test_normal_takes_accents_off_and_leaves_ascii_as_it_was(text: str, expected: str) -> None:
    from remindrag_integrations.core.memory.grounding import normal

    assert normal(text) == expected


def test_the_answer_is_grounded_in_the_passage_holding_its_words() -> None:
    passages = [(k, v) for k, v in TEXTS.items()]
    assert key_words("The Vistula river, which flows through Warsaw.", QUESTION) == {"vistula"}
    assert grounded_in("The Vistula.", QUESTION, passages) == ["warsaw.txt"]
    assert grounded_in("The Seine.", QUESTION, passages) == ["paris.txt"]
    assert grounded_in("The Danube.", QUESTION, passages) == []  # in no passage
    assert grounded_in("Yes.", QUESTION, passages) == []  # adds no word to the question
    # a multi-part answer: each passage holding part of it
    both = grounded_in("The Vistula; in Paris, the Seine.", QUESTION, passages)
    assert set(both) == {"warsaw.txt", "paris.txt"}
    # a word every passage holds tells none apart
    assert grounded_in("The capital.", "Which river?", passages) == []


def test_the_passages_must_name_the_questions_longest_name() -> None:
    q = (
        "The real life person that James Woods' character is based on in the television film "
        "In Love and War was awarded what medal?"  # names: "James Woods", "Love", "War"
    )
    lara = (
        "p1",
        "Salvador J. Lara was a U.S. Army veteran of World War II and recipient of "
        "the Medal of Honor.",
    )
    woods = ("p2", "In Love and War stars James Woods as James Stockdale.")
    assert not names_held(q, [lara])  # "War" alone: a common word, not what it asks about
    assert names_held(q, [lara, woods])
    assert names_held("Which river is the longest?", [lara])  # names nothing: nothing to tell


# --- the engine ----------------------------------------------------------------------------


def engine() -> ReMindRAG:
    rag = ReMindRAG(embeddings=HashEmbedder())
    rag.insert([Document(k, v) for k, v in TEXTS.items()])
    return rag


def doc_ids(rag: ReMindRAG, chunk_ids: list[str]) -> list[str]:
    return [rag.store.get_chunk(c).doc_id for c in chunk_ids]


@pytest.mark.parametrize(
    ("answer", "support"),
    [("The Vistula.", ["warsaw.txt"]), ("It is the Seine.", ["paris.txt"])],
)
def test_no_llm_the_answer_decides_the_support(answer: str, support: list[str]) -> None:
    rag = engine()
    r = rag.retrieve(QUESTION)
    assert {rc.chunk.doc_id for rc in r.chunks} == set(TEXTS)  # every passage came back
    w = rag.memorize(r.trace_id, answer=answer)
    assert w.applied and doc_ids(rag, w.supporting_chunks) == support
    assert w.penalised == []


def test_the_repeat_is_served_by_what_the_answer_was_grounded_in() -> None:
    rag = engine()
    w = rag.memorize(rag.retrieve(QUESTION).trace_id, answer="The Vistula.")
    again = rag.retrieve(QUESTION)
    assert w.applied and again.trace.stop_reason == "replay"
    assert again.chunks[0].chunk.doc_id == "warsaw.txt"


@pytest.mark.parametrize(
    "answer", ["I don't know", "The context does not mention it.", "", None, "The Danube."]
)
def test_an_abstaining_ungrounded_or_missing_answer_writes_nothing(answer: str | None) -> None:
    rag = engine()
    w = rag.memorize(rag.retrieve(QUESTION).trace_id, answer=answer)
    assert not w.applied and w.enhanced == [] and w.skipped_reason
    assert rag.memory_stats().touched_edges == 0
    reason = w.skipped_reason
    if answer is None:
        assert "answer=" in reason
    elif answer == "The Danube.":
        assert "grounded in no retrieved passage" in reason
    else:
        assert "abstains" in reason


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        # off-corpus questions (of another dataset) whose answers a passage holds by chance
        (
            "The Women's National Basketball League includes the Adelaide team formed in what year?",
            "1993",
        ),
        ("Scott Howell is a consultant who has worked with the mayor of what city?", "Paris"),
    ],
)
def test_an_uncited_answer_to_a_question_the_passages_do_not_name_writes_nothing(
    question: str, answer: str
) -> None:
    texts = {**TEXTS, "club.txt": "The rowing club of Rome was founded in 1993 by students."}
    unchecked = RetrievalConfig().with_overrides(memory={"uncited_min_score": 0.0})
    rag = ReMindRAG(embeddings=HashEmbedder(), retrieval_config=unchecked)  # names alone
    rag.insert([Document(k, v) for k, v in texts.items()])
    r = rag.retrieve(question)
    assert any(answer in rc.chunk.text for rc in r.chunks)  # a passage holds the answer
    w = rag.memorize(r.trace_id, answer=answer)
    assert not w.applied and "name nothing the question names" in (w.skipped_reason or "")
    assert rag.memory_stats().touched_edges == 0
    cited = next(rc.chunk.id for rc in r.chunks if answer in rc.chunk.text)
    assert rag.memorize(r.trace_id, answer=f"{answer} [{cited}]").applied  # a citation counts


# an off-corpus question that names something a passage names ("Hindi"), whose answer a
# passage holds by chance ("2011"): the names check passes, the question's relevance does not
CENSUS = (
    "Hindi is spoken as a native language by 41% of the population according to the 2011 census."
)
FILM_QUESTION = (
    "Do Lafzon Ki Kahani, a 2016 Hindi-language romantic drama, is a remake of a South Korean "
    "film released in which year?"
)


@pytest.mark.packaged_embedder
def test_an_uncited_answer_to_an_off_corpus_question_writes_nothing_even_when_names_match() -> None:
    rag = ReMindRAG()  # the packaged embedder: the relevance the cutoff was measured on
    rag.insert([Document(k, v) for k, v in {**TEXTS, "census.txt": CENSUS}.items()])
    r = rag.retrieve(FILM_QUESTION)
    assert any("2011" in rc.chunk.text for rc in r.chunks)  # a passage holds the answer
    assert r.chunks[0].score < RECOMMENDED_MIN_SCORE - 0.05  # off the corpus, with a margin
    w = rag.memorize(r.trace_id, answer="2011")
    assert not w.applied and "memory.uncited_min_score" in (w.skipped_reason or "")
    assert rag.memory_stats().touched_edges == 0
    census = next(rc.chunk.id for rc in r.chunks if "2011" in rc.chunk.text)
    # a citation earns no pass off the topic: the census passage does not name the film
    cited = rag.memorize(r.trace_id, answer=f"2011 [{census}]")
    assert not cited.applied and "citation alone teaches nothing" in (cited.skipped_reason or "")
    assert rag.memory_stats().touched_edges == 0
    # the same kind of answer to an on-topic question is grounded and writes
    on = rag.retrieve(QUESTION)
    assert on.chunks[0].score > RECOMMENDED_MIN_SCORE + 0.05
    w = rag.memorize(on.trace_id, answer="The Vistula.")
    assert w.applied and doc_ids(rag, w.supporting_chunks) == ["warsaw.txt"]


def test_supporting_stays_the_callers_word_and_citations_come_first() -> None:
    rag = engine()
    r = rag.retrieve(QUESTION)
    rome = next(rc.chunk.id for rc in r.chunks if rc.chunk.doc_id == "rome.txt")
    w = rag.memorize(r.trace_id, answer="I don't know", supporting=[rome])
    assert w.applied and w.supporting_chunks == [rome]
    rag2 = engine()
    r2 = rag2.retrieve(QUESTION)
    paris = next(rc.chunk.id for rc in r2.chunks if rc.chunk.doc_id == "paris.txt")
    w2 = rag2.memorize(r2.trace_id, answer=f"The Vistula [{paris}].")  # the cited one
    assert w2.supporting_chunks == [paris]
    # an abstaining answer writes nothing even where it cites a passage
    rag3 = engine()
    r3 = rag3.retrieve(QUESTION)
    w3 = rag3.memorize(r3.trace_id, answer=f"The passages [{paris}] do not mention it.")
    assert not w3.applied and "abstains" in w3.skipped_reason


def test_the_retriever_memorize_reads_the_answer() -> None:
    r = ReMindRetriever.from_texts(list(TEXTS.values()), embeddings=HashEmbedder())
    r.invoke(QUESTION)
    w = r.memorize(answer="The Vistula.")
    assert w.applied and [r.engine.store.get_chunk(c).text for c in w.supporting_chunks] == [
        TEXTS["warsaw.txt"]
    ]
    r.invoke("Which river flows through Rome?")
    assert not r.memorize(answer="I do not know.").applied


# --- MCP -----------------------------------------------------------------------------------


@pytest.fixture
def mcp_store(tmp_path: Path) -> Path:
    from remindrag_integrations.app.cli import main

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in TEXTS.items():
        (docs / name).write_text(text, encoding="utf-8")
    assert main(["index", str(docs), "--store", str(tmp_path / "store")]) == 0
    return tmp_path / "store"


def test_mcp_remember_takes_the_answers_passage(mcp_store: Path) -> None:
    from remindrag_integrations.app.mcp_service import StoreService

    args = Namespace(store=str(mcp_store), namespace="default", llm="none", cache=None)
    service = StoreService(Namespace(**vars(args), no_cache=True))
    found = service.search(QUESTION)
    by_chunk = {p["chunk_id"]: p["doc_id"] for p in found["passages"]}
    wrote = service.remember(found["trace_id"], "The Vistula.")
    assert wrote["applied"]
    assert [Path(by_chunk[c]).name for c in wrote["supporting_chunks"]] == ["warsaw.txt"]
    other = service.search("Which river flows through Rome?")
    refused = service.remember(other["trace_id"], "I don't know.")
    assert not refused["applied"] and "abstains" in refused["skipped_reason"]


def test_mcp_search_min_score_abstains_and_remember_writes_nothing(mcp_store: Path) -> None:
    from remindrag_integrations.app.mcp_server import _search
    from remindrag_integrations.app.mcp_service import StoreService

    args = Namespace(store=str(mcp_store), namespace="default", llm="none", cache=None)
    service = StoreService(Namespace(**vars(args), no_cache=True))
    assert "min_score" in inspect.signature(_search(service)).parameters  # the tool's schema
    found = service.search(QUESTION, min_score=0.99)  # no passage reaches it
    assert found["passages"] == [] and found["abstained"]
    assert found["stop_reason"] == "below_min_score"
    wrote = service.remember(found["trace_id"], "The Vistula.")
    assert not wrote["applied"] and "abstained" in wrote["skipped_reason"]
    kept = service.search(QUESTION, min_score=0.0)  # 0: every question answers
    assert kept["passages"] and not kept["abstained"]


# --- LangChain: the callback wherever it is attached ----------------------------------------

PROMPT = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")


def format_docs(docs: list[LCDocument]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def lc_retriever() -> ReMindRetriever:
    return ReMindRetriever.from_texts(list(TEXTS.values()), embeddings=HashEmbedder())


def chain_of(retriever: Any, replies: list[str]) -> Any:
    return (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | PROMPT
        | FakeListChatModel(responses=replies)
        | StrOutputParser()
    )


def supported_texts(r: ReMindRetriever, cb: ReMindMemoryCallback) -> list[list[str]]:
    return [[r.engine.store.get_chunk(c).text for c in w.supporting_chunks] for w in cb.writes]


def test_callback_on_the_chain_writes_what_the_answer_is_grounded_in() -> None:
    r = lc_retriever()
    cb = ReMindMemoryCallback(r)
    chain = chain_of(r, ["The Vistula.", "I don't know."])
    assert chain.invoke(QUESTION, config={"callbacks": [cb]}) == "The Vistula."
    assert supported_texts(r, cb) == [[TEXTS["warsaw.txt"]]]
    chain.invoke("Which river flows through Rome?", config={"callbacks": [cb]})
    assert len(cb.writes) == 2 and not cb.writes[1].applied
    assert "abstains" in cb.writes[1].skipped_reason
    assert r.memory_stats().writes_applied == 1


def test_callback_on_the_chain_async_and_streamed() -> None:
    r = lc_retriever()
    cb = ReMindMemoryCallback(r)
    chain = chain_of(r, ["The Vistula."])
    cfg: Any = {"callbacks": [cb]}

    async def run() -> list[str]:
        out = [await chain.ainvoke(QUESTION, config=cfg)]
        out.append("".join([t async for t in chain.astream(QUESTION, config=cfg)]))
        return out

    assert asyncio.run(run()) == ["The Vistula.", "The Vistula."]
    assert "".join(chain.stream(QUESTION, config=cfg)) == "The Vistula."
    assert supported_texts(r, cb) == [[TEXTS["warsaw.txt"]]] * 3
    assert r.memory_stats().writes_applied == 3 and not cb.errors


def test_callback_attached_to_the_retriever_says_why_and_writes_with_the_answer() -> None:
    """LangChain shows a retriever's callbacks the retrieval, never the chain's answer: the
    callback says so once, keeps the trace waiting, and writes it when told the answer."""
    r = lc_retriever()
    cb = ReMindMemoryCallback(r)
    chain = chain_of(r.with_config(callbacks=[cb]), ["The Vistula.", "The Tiber."])
    with pytest.warns(UserWarning, match="attached to the retriever only"):
        answer = chain.invoke(QUESTION)
    assert cb.writes == [] and len(cb.waiting) == 1
    (w,) = cb.answered(answer)
    assert w.applied and supported_texts(r, cb) == [[TEXTS["warsaw.txt"]]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        answer = chain.invoke("Which river flows through Rome?")
    assert cb.answered(answer)[0].applied and cb.waiting == []
    assert supported_texts(r, cb)[1] == [TEXTS["rome.txt"]]


def test_callback_given_per_call_to_the_retriever_writes_with_the_next_answer() -> None:
    r = lc_retriever()
    cb = ReMindMemoryCallback(r)
    with pytest.warns(UserWarning, match="no answer to learn from yet"):
        docs = r.invoke(QUESTION, config={"callbacks": [cb]})
    assert cb.writes == [] and cb.waiting == [docs[0].metadata["remindrag"]["trace_id"]]
    llm = FakeListChatModel(responses=["The Vistula."])
    llm.invoke([HumanMessage(format_docs(docs) + "\n" + QUESTION)], config={"callbacks": [cb]})
    assert supported_texts(r, cb) == [[TEXTS["warsaw.txt"]]] and cb.waiting == []


# --- LlamaIndex ------------------------------------------------------------------------------


def says(text: str) -> MockLLM:
    """LlamaIndex's MockLLM, answering with ``text``."""

    class Says(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            return CompletionResponse(text=text)

    return Says()


def test_llamaindex_handler_learns_from_the_answer_not_from_every_source_node() -> None:
    r = lc_retriever()
    with ReMindMemoryEventHandler(r) as handler:
        RetrieverQueryEngine.from_args(r, llm=says("The Vistula.")).query(QUESTION)
        RetrieverQueryEngine.from_args(r, llm=says("I don't know.")).query(
            "Which river flows through Rome?"
        )
    first, second = handler.writes
    assert [r.engine.store.get_chunk(c).text for c in first.supporting_chunks] == [
        TEXTS["warsaw.txt"]
    ]
    assert not second.applied and "abstains" in second.skipped_reason


def test_traces_waiting_for_an_answer_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from remindrag_integrations.faces.langchain import callbacks

    monkeypatch.setattr(callbacks, "MAX_WAITING", 2)
    r = lc_retriever()
    cb = ReMindMemoryCallback(r)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ids = [
            r.invoke(q, config={"callbacks": [cb]})[0].metadata["remindrag"]["trace_id"]
            for q in (
                QUESTION,
                "Which river flows through Rome?",
                "Which river flows through Paris?",
            )
        ]
    assert cb.waiting == ids[1:]  # a search UI with no answer never grows it without bound
