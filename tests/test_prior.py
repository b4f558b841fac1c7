"""The first pass's prior (core/prior.py): hybrid lexical + dense candidates and a personalised
PageRank from the question's entities, on a fresh graph with no memory."""

from __future__ import annotations

import numpy as np
import pytest

from remindrag_integrations import ReMindRAG
from remindrag_integrations.core.prior import is_name
from remindrag_integrations.testing import HashEmbedder

pytestmark = pytest.mark.packaged_embedder  # run again under drift by make test

DOCS = {
    "derrickson": "Scott Derrickson is an American director. Scott Derrickson directed Sinister.",
    "sinister": "Sinister is a 2012 horror film. Sinister stars Ethan Hawke as a writer.",
    "xj": "The Jaguar XJ220 is a two-seater sports car produced by Jaguar.",
}
FILLER = [
    "Which actors starred in films that directors made? Many actors starred in many films.",
    "An actor starred in the film that a director directed, said the film critic.",
    "The film that the director directed starred a famous actor from the theatre.",
    "Directors direct films and actors star in films; critics write about films.",
    "A documentary film about actors and directors was shown at the festival.",
]
QUESTION = "Which actor starred in the film Scott Derrickson directed?"


@pytest.fixture(scope="module")
def engine() -> ReMindRAG:
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    docs = [(k, v, {"kind": "fact"}) for k, v in DOCS.items()]
    docs += [(f"filler{i}", t, {"kind": "filler"}) for i, t in enumerate(FILLER)]
    eng.insert(docs)
    return eng


def _docs(retrieval) -> list[str]:
    return [rc.chunk.doc_id for rc in retrieval.chunks]


def test_the_graph_brings_the_second_hop_that_cosine_misses(engine: ReMindRAG) -> None:
    plain = engine.retrieve(QUESTION, k=3, prior={"enabled": False})
    hybrid = engine.retrieve(QUESTION, k=3)
    assert "sinister" not in _docs(plain)  # cosine alone prefers the wordy fillers
    assert _docs(hybrid)[0] == "derrickson" and "sinister" in _docs(hybrid)
    ev = hybrid.trace.rank_evidence
    sinister = next(rc.chunk.id for rc in hybrid.chunks if rc.chunk.doc_id == "sinister")
    assert ev[sinister]["graph"] > 0 and ev[sinister]["lexical"] < 0.5
    fillers = [rc.chunk.id for rc in hybrid.chunks if rc.chunk.doc_id.startswith("filler")]
    assert all(ev[c]["graph"] < ev[sinister]["graph"] for c in fillers)
    assert "prior" in hybrid.trace.timings_ms


def test_a_rare_word_is_found_by_the_lexical_half(engine: ReMindRAG) -> None:
    r = engine.retrieve("Who produced the XJ220?", k=2)
    top = r.chunks[0]
    assert top.chunk.doc_id == "xj"
    assert r.trace.rank_evidence[top.chunk.id]["lexical"] == pytest.approx(1.0)


def test_prior_off_ranks_by_cosine_alone(engine: ReMindRAG) -> None:
    r = engine.retrieve(QUESTION, k=5, prior={"enabled": False})
    scores = [rc.rank_score for rc in r.chunks if rc.source != "dense_fill"]
    assert scores == sorted(scores, reverse=True)
    assert all("graph" not in e for e in r.trace.rank_evidence.values())
    assert "prior" in r.trace.timings_ms  # measured (near 0) either way


def test_the_prior_never_spreads_through_a_filtered_out_document(engine: ReMindRAG) -> None:
    r = engine.retrieve(QUESTION, k=5, filter={"kind": "filler"})
    assert set(_docs(r)) <= {f"filler{i}" for i in range(len(FILLER))}
    r = engine.retrieve(QUESTION, k=5, filter={"$or": [{"kind": "filler"}, {"kind": "fact"}]})
    assert "sinister" in _docs(r)
    # without derrickson's document the mass still flows from the question's entity to
    # Sinister along their relation edge (entities always pass a filter, as in the walk),
    # never into the filtered-out passage
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    eng.insert([(k, v, {"keep": k != "derrickson"}) for k, v in DOCS.items()])
    r = eng.retrieve(QUESTION, k=3, filter={"keep": True})
    assert "derrickson" not in _docs(r)
    top = r.chunks[0]
    assert top.chunk.doc_id == "sinister" and r.trace.rank_evidence[top.chunk.id]["graph"] == 1.0


def test_function_words_make_no_name() -> None:
    assert not is_name("Which") and not is_name("the of")
    assert is_name("Scott Derrickson") and is_name("The Beatles")


def test_the_zero_token_walk_follows_the_prior(engine: ReMindRAG) -> None:
    r = engine.retrieve(QUESTION, k=3)
    first = r.trace.seeds[0]
    assert first.startswith("a-")
    seed_doc = engine.store.get_node(first).doc_id
    assert seed_doc in {"derrickson", "sinister"}
    assert np.isfinite([rc.score for rc in r.chunks]).all()


def test_the_readme_prior_example_runs(capsys: pytest.CaptureFixture[str]) -> None:

    from doc_pages import PAGES, python_blocks

    found = [
        (p, b)
        for p in PAGES
        for b in python_blocks(p.read_text("utf-8"))
        if "rank_evidence" in b and "prior=" in b
    ]
    ((page, block),) = found
    exec(compile(block, page.name, "exec"), {})  # noqa: S102 - our own docs
    out = capsys.readouterr().out
    assert "'lexical'" in out and "'graph'" in out


def test_a_corpus_of_stop_words_and_single_letters_still_answers() -> None:
    """bm25s cannot index a corpus without one indexable word; the prior must not crash on
    it (it did: ``ValueError: max() arg is an empty sequence`` on the first query)."""
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    eng.insert([("x", "a b", {}), ("y", "c d", {})])
    r = eng.retrieve("a", k=2)
    assert sorted(rc.chunk.doc_id for rc in r.chunks) == ["x", "y"]
    eng.insert([("z", "Zebras graze.", {})])  # the next index has a word: found by it
    assert eng.retrieve("zebras", k=1).chunks[0].chunk.doc_id == "z"


CHAIN = {  # the question names the car; the answer is two hops further
    "xj": "The Jaguar XJ220 is a sports car. The Jaguar XJ220 was made by Browns Lane Motors.",
    "browns": "Browns Lane Motors is a car maker. Browns Lane Motors was founded by William Lyons.",
    "lyons": "William Lyons was a British engineer. William Lyons was born in Blackpool.",
    "other": "Coventry Works is a car maker. Coventry Works was founded by Henry Ford.",
    "ford": "Henry Ford was an American engineer. Henry Ford was born in Dearborn.",
}
CHAIN_FILLER = [
    "Many founders of companies were born abroad, in a town far away.",
    "A car company made cars in a town where its workers were born.",
    "An engineer in England made a sports car for a race.",
    "The founder of the firm was born abroad, far from any town.",
]
CHAIN_QUESTION = "Where was the founder of the company that made the Jaguar XJ220 born?"


def test_the_feedback_round_follows_the_bridge_entity() -> None:
    """The second PageRank round restarts at the entities of the best first-round passages
    (here "Browns Lane Motors", named by the XJ220 passage, not by the question): the second
    and third hop gain graph mass and the second hop overtakes a wordy filler."""
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    eng.insert([(k, v, {}) for k, v in CHAIN.items()])
    eng.insert([(f"filler{i}", t, {}) for i, t in enumerate(CHAIN_FILLER)])

    def graph(r, doc: str) -> float:
        ev = r.trace.rank_evidence
        return next(ev[rc.chunk.id]["graph"] for rc in r.chunks if rc.chunk.doc_id == doc)

    one = eng.retrieve(CHAIN_QUESTION, k=6, prior={"feedback": 0.0})
    two = eng.retrieve(CHAIN_QUESTION, k=6, prior={"feedback_rounds": 1})  # feedback 1.0, one round
    assert _docs(one)[:2] == ["xj", "filler3"] and _docs(two)[:3] == ["xj", "browns", "filler3"]
    assert graph(two, "browns") > graph(one, "browns") > 0
    assert graph(two, "lyons") > graph(one, "lyons") > 0
    assert "ford" not in _docs(two)[:3] and "other" not in _docs(two)[:3]  # no path to them
    # the default: the question chains two links ("of", "that"), so a second round starts at
    # the founder the maker's passage names, and the third hop overtakes the filler too
    three = eng.retrieve(CHAIN_QUESTION, k=6)
    assert _docs(three)[:3] == ["xj", "browns", "lyons"]
    assert graph(three, "lyons") > graph(two, "lyons")


LONG_CHAIN = {  # four hops: car -> maker -> founder -> town -> county
    **CHAIN,
    "blackpool": "Blackpool is a seaside town. Blackpool lies in Lancashire County.",
    "dearborn": "Dearborn is a city. Dearborn lies in Wayne County.",
}
LONG_QUESTION = (
    "In which county is the town where the founder of the company that made the Jaguar "
    "XJ220 was born?"
)


def test_more_feedback_rounds_reach_a_further_hop() -> None:
    """Each round restarts also at the bridge entities of the best passages no earlier round
    read: the second round goes from the founder's passage to his town, whose passage (the
    fourth hop, naming nothing the question names) gains graph mass it had not had."""
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    eng.insert([(k, v, {}) for k, v in LONG_CHAIN.items()])
    eng.insert([(f"filler{i}", t, {}) for i, t in enumerate(CHAIN_FILLER)])

    def graph(r, doc: str) -> float:
        ev = r.trace.rank_evidence
        return next((ev[rc.chunk.id]["graph"] for rc in r.chunks if rc.chunk.doc_id == doc), 0.0)

    one = eng.retrieve(LONG_QUESTION, k=9, prior={"feedback_rounds": 1})
    two = eng.retrieve(LONG_QUESTION, k=9, prior={"feedback_rounds": 2, "feedback_by_links": False})
    assert graph(two, "blackpool") > graph(one, "blackpool")
    assert _docs(two).index("blackpool") < _docs(one).index("blackpool")
    assert graph(two, "dearborn") == graph(one, "dearborn") == 0.0  # no path to it
    # by links: this question chains 4 links ("which", "where", "of", "that"): both rounds
    linked = eng.retrieve(
        LONG_QUESTION, k=9, prior={"feedback_rounds": 2, "feedback_by_links": True}
    )
    assert linked.trace.rank_evidence == two.trace.rank_evidence
    # one link ("of"): one round, however many are allowed
    short = "Where was the founder of Browns Lane Motors born?"
    capped = eng.retrieve(short, k=9, prior={"feedback_rounds": 2, "feedback_by_links": True})
    assert (
        capped.trace.rank_evidence
        == eng.retrieve(short, k=9, prior={"feedback_rounds": 1}).trace.rank_evidence
    )
    assert (
        capped.trace.rank_evidence
        != eng.retrieve(
            short, k=9, prior={"feedback_rounds": 2, "feedback_by_links": False}
        ).trace.rank_evidence
    )


@pytest.mark.parametrize(
    "field, bad",
    [
        ("feedback_rounds", 0),
        ("feedback_rounds", 11),
        ("feedback_by_links", "yes"),
    ],
)
def test_the_feedback_fields_refuse_bad_values(field: str, bad: object) -> None:
    from remindrag_integrations import ConfigError

    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    with pytest.raises(ConfigError):
        eng.retrieve("anything", prior={field: bad})


# --- the title hop: a passage's text names another page's title ----------------------------
SOUNDTRACK = (
    "Natural Born Killers (soundtrack)\nThe soundtrack of the film Natural Born Killers was "
    "produced by Trent Reznor of Nine Inch Nails in a hotel room."
)
REZNOR = "Trent Reznor\nMichael Trent Reznor (born May 17, 1965) is an American singer."
TITLED_FILLER = [
    "The soundtrack album of the film was produced in a studio and released in the year after.",
    "A film soundtrack is produced by a record producer; the film was born of a novel.",
    "Natural history films are produced for television; one was born in a hotel.",
    "The killers in the film were born in the year the soundtrack was produced.",
    "The year a film is released and the year its soundtrack is produced can differ.",
    "Born in a small town, the producer worked on the soundtrack of a film in one year.",
]
SOUNDTRACK_QUESTION = (
    "The soundtrack of the film Natural Born Killers was produced by a man born in what year?"
)


def _titled(metadata: bool) -> ReMindRAG:
    """The two pages and the fillers, titled by metadata or by their first line alone."""
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    rows = [("nbk", SOUNDTRACK), ("reznor", REZNOR)]
    rows += [(f"filler{i}", f"Filler {i}\n{t}") for i, t in enumerate(TITLED_FILLER)]
    eng.insert([(d, t, {"title": t.split("\n")[0]} if metadata else {}) for d, t in rows])
    return eng


@pytest.mark.parametrize("metadata", [True, False], ids=["metadata title", "first line"])
def test_the_page_a_passage_names_by_its_title_is_the_second_hop(metadata: bool) -> None:
    """The soundtrack's text names "Trent Reznor", the title of a page that shares almost no
    word with the question; the extractor read "Trent Reznor of Nine Inch Nails" as one
    name, so no graph edge leads there. The title hop brings it right after the soundtrack."""
    eng = _titled(metadata)
    without = eng.retrieve(SOUNDTRACK_QUESTION, k=3, prior={"title_hop": 0.0})
    assert _docs(without)[0] == "nbk" and "reznor" not in _docs(without)
    r = eng.retrieve(SOUNDTRACK_QUESTION, k=3)
    assert _docs(r)[:2] == ["nbk", "reznor"]
    ev = r.trace.rank_evidence
    page, best = r.chunks[1].chunk.id, r.chunks[0].chunk.id
    assert ev[page]["graph"] == 0.0 and ev[page]["title"] > 0.5 * ev[best]["score"]
    assert all("title" not in ev[rc.chunk.id] for rc in r.chunks if rc.chunk.id != page)


def test_the_title_hop_leaves_untitled_documents_alone(engine: ReMindRAG) -> None:
    """No document of the fixture has a title (no metadata title, one line each): the hop
    changes nothing."""
    on, off = engine.retrieve(QUESTION, k=5), engine.retrieve(QUESTION, k=5, prior={"title_hop": 0})
    assert [(rc.chunk.id, rc.rank_score) for rc in on.chunks] == [
        (rc.chunk.id, rc.rank_score) for rc in off.chunks
    ]
    assert all("title" not in e for e in on.trace.rank_evidence.values())


def test_what_counts_as_a_title_and_as_naming_it() -> None:
    from remindrag_integrations.core.prior import names_title, title_of
    from remindrag_integrations.core.types import Chunk

    def chunk(text: str, index: int = 0, **meta: str) -> Chunk:
        return Chunk("c-1", "d", index, text, 0, len(text), dict(meta))

    assert title_of(chunk("body", title=" Trent Reznor ")) == "Trent Reznor"
    assert title_of(chunk("Trent Reznor\nMichael Trent Reznor is a singer.")) == "Trent Reznor"
    assert title_of(chunk("Trent Reznor\nsecond chunk", index=1)) == ""  # not the first chunk
    assert title_of(chunk("One line, no text under it")) == ""
    assert title_of(chunk("x" * 101 + "\nmore")) == ""  # a paragraph, not a heading
    assert title_of(chunk("The of\nmore")) == ""  # function words name nothing
    assert names_title("produced by Trent Reznor of Nine Inch Nails", "Trent Reznor")
    assert not names_title("produced by Trent Reznors", "Trent Reznor")  # whole words only
    assert not names_title("produced by trent reznor", "Trent Reznor")  # case as written
    assert names_title("the film (Natural Born Killers).", "Natural Born Killers")


# --- a question that names only what every passage names (a long document's subject) -------
CITY = [
    "Eixample is the district with the highest population density of all.",
    "Barcelona hosted the Olympic Games in 1992, when Pasqual Maragall was mayor.",
    "Barcelona lies on the coast of Catalonia, between the Llobregat and the Besos.",
    "Antoni Gaudi built the Sagrada Familia in Barcelona over forty years.",
    "The port of Barcelona grew when the Drassanes shipyards opened.",
    "Barcelona became the capital of the County of Barcelona under Wilfred the Hairy.",
    "The Roman colony of Barcino was the first Barcelona, walled by Augustus.",
    "Ildefons Cerda planned the expansion of Barcelona beyond its walls.",
    "FC Barcelona plays at Camp Nou, the largest stadium in Barcelona and in Spain.",
    "Barcelona annexed Gracia and Sants, six towns that became its districts.",
    "The Liceu opera house of Barcelona burned down and was rebuilt.",
    "Barcelona has a metro of twelve lines run by TMB, and trams.",
    "The Gothic Quarter is the oldest part of Barcelona.",
    "Barcelona holds the Mobile World Congress every spring.",
    "Picasso lived in Barcelona as a young painter.",
    "The Ramblas run from Placa de Catalunya to the sea in Barcelona.",
    "Montjuic is a hill over the harbour of Barcelona.",
    "Barcelona was bombed during the Spanish Civil War.",
    "The Palau de la Musica Catalana is a concert hall in Barcelona.",
    "The Universal Exposition of 1888 was held in Barcelona.",
]
CITY_QUESTION = "Which district of Barcelona has the highest population density?"


def test_a_question_naming_only_a_common_entity_leans_on_its_words() -> None:
    """Every passage but the answer names "Barcelona", the question's only name: the PageRank
    from it lifts whichever passages sit best in the graph, each by up to the whole graph
    weight, over the one passage that holds the question's words. With ``hub_mentions`` the
    graph part counts 5 / its ~19 mentions, and the answer leads."""
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    eng.insert([(f"c{i}", t, {}) for i, t in enumerate(CITY)])
    off = eng.retrieve(CITY_QUESTION, k=5, prior={"hub_mentions": 0})
    on = eng.retrieve(CITY_QUESTION, k=5)
    assert _docs(off)[0] != "c0" and _docs(on)[0] == "c0"

    def scales(r) -> set[float]:  # what the graph part counted, from the parts of the trace
        out = set()
        for rc in r.chunks:
            e = r.trace.rank_evidence[rc.chunk.id]
            if e.get("graph", 0) > 0 and "seat" not in e and "title" not in e:
                rest = rc.rank_score - e["cosine"] - 0.2 * e["lexical"]
                out.add(round(rest / e["graph"], 3))
        return out

    assert scales(off) == {1.0}
    (scale,) = scales(on)  # one scale for the whole question
    assert 0.2 < scale < 0.35  # 5 / the mentions of "Barcelona"


def test_the_graph_scale_follows_the_most_specific_entity() -> None:
    from remindrag_integrations.core.config import RetrievalConfig
    from remindrag_integrations.core.prior import graph_scale

    cfg = RetrievalConfig.build()
    assert cfg.prior.hub_mentions == 5
    assert graph_scale({"e-hub": 1 / 25}, cfg) == pytest.approx(0.2)
    assert graph_scale({"e-hub": 1 / 25, "e-rare": 1 / 3}, cfg) == 1.0  # one specific name
    assert graph_scale({"e-near": 0.5 / 20}, cfg) == pytest.approx(0.125)  # linked at cos 0.5
    assert graph_scale({}, cfg) == 1.0  # no name: the spread restarts at the best passages
    off = RetrievalConfig.build(prior={"hub_mentions": 0})
    assert graph_scale({"e-hub": 1 / 25}, off) == 1.0


def test_the_passage_nearest_the_question_keeps_a_seat(engine: ReMindRAG) -> None:
    """Cosine alone ranks the wordy filler first; the fused score puts it third. With
    ``dense_seat`` 2 it is lifted to the second place's score and ranks right before it (the
    lift is the ``seat`` part); 0 leaves the fused order."""
    plain = engine.retrieve(QUESTION, k=5, prior={"enabled": False})
    nearest = plain.chunks[0].chunk.id
    off = engine.retrieve(QUESTION, k=5, prior={"dense_seat": 0})
    two = engine.retrieve(QUESTION, k=5, prior={"dense_seat": 2})
    ids = [rc.chunk.id for rc in off.chunks]
    assert ids.index(nearest) == 2
    assert [rc.chunk.id for rc in two.chunks] == [ids[0], nearest, ids[1], *ids[3:]]
    scores = [rc.rank_score for rc in two.chunks]
    assert scores == sorted(scores, reverse=True) and scores[1] == pytest.approx(scores[2])
    assert two.trace.rank_evidence[nearest]["seat"] > 0
    assert all("seat" not in e for c, e in two.trace.rank_evidence.items() if c != nearest)


def test_the_default_seat_keeps_the_nearest_passage_among_the_first_five() -> None:
    """The city corpus with the graph part at full weight: the PageRank from "Barcelona" fills
    the first eight places and the answer, the passage nearest the question by cosine, is not
    among them; the default seat (5) keeps it fifth, unread by the walk or not."""
    eng = ReMindRAG(llm=None, embeddings=HashEmbedder())
    eng.insert([(f"c{i}", t, {}) for i, t in enumerate(CITY)])
    full = {"hub_mentions": 0}
    without = eng.retrieve(CITY_QUESTION, k=8, prior={**full, "dense_seat": 0})
    assert "c0" not in _docs(without)
    r = eng.retrieve(CITY_QUESTION, k=8, prior=full)
    assert _docs(r)[:4] == _docs(without)[:4] and _docs(r)[4] == "c0"
    assert _docs(r)[5:] == _docs(without)[4:7]
    assert r.trace.rank_evidence[r.chunks[4].chunk.id]["seat"] > 0


def test_memory_takes_the_seat_away() -> None:
    """k = 5, seat 2, the nearest passage ranked 4th: it takes the 2nd place; when memory
    vouches for any candidate (a taught question), the order is memory's and the first
    pass's, without the seat."""
    from types import SimpleNamespace

    from remindrag_integrations.core.ranking import dense_seat

    scored = [("a", 3.0, "read"), ("b", 2.0, "read"), ("c", 1.0, "read"), ("d", 0.5, "read")]
    cos = {"a": 0.5, "b": 0.4, "c": 0.3, "d": 0.9}
    prior = SimpleNamespace(parts={c: {"cosine": x} for c, x in cos.items()}, score={})
    for vouched, order in ((False, "adbc"), (True, "abcd")):
        got, seat = dense_seat(2, prior, list(scored), {}, vouched)  # type: ignore[arg-type]
        assert "".join(c for c, _, _ in got) == order
        assert (seat is None) == vouched
