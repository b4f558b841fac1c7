"""The offline (zero-token) entity extractor: one test per rule, on real sentences."""

from __future__ import annotations

import pytest

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.core.extract_rules import rule_based_extraction
from remindrag_integrations.errors import InvalidArgumentError
from remindrag_integrations.testing import HashEmbedder


def ents(text: str) -> list[str]:
    return rule_based_extraction(text).entities


def test_initials_and_abbreviations_stay_inside_the_name() -> None:
    text = (
        "Night of the Living Dead is a 1968 American horror film directed by George A. Romero. "
        "He later moved to St. Louis and joined the U.S. Army."
    )
    assert ents(text) == ["Night of the Living Dead", "George A. Romero", "St. Louis", "U.S. Army"]
    assert ents("J. R. R. Tolkien wrote The Hobbit.") == ["J. R. R. Tolkien", "Hobbit"]
    assert ents("She played Mrs. Robinson in The Graduate.") == ["Mrs. Robinson", "Graduate"]


def test_sentence_punctuation_ends_a_name_and_a_relation() -> None:
    x = rule_based_extraction("It was directed by George A. Romero. Pittsburgh hosted the shoot.")
    assert x.entities == ["George A. Romero", "Pittsburgh"]
    assert x.triples == []  # two sentences: no relation between their entities
    assert ents("It is located in Pittsburgh, Pennsylvania, U.S.") == [
        "Pittsburgh",
        "Pennsylvania",
        "U.S.",
    ]
    assert ents("Martin Luther King Jr. led the march.") == ["Martin Luther King Jr"]


def test_relation_text_is_the_whole_sentence_across_initials() -> None:
    x = rule_based_extraction("The film by George A. Romero premiered in Pittsburgh. It ran long.")
    assert x.triples == [
        (
            "George A. Romero",
            "The film by George A. Romero premiered in Pittsburgh.",
            "Pittsburgh",
        )
    ]


def test_bare_numbers_and_dates_are_no_entity() -> None:
    assert ents("The reservoir was enlarged in 2011 and 2012.") == []
    assert ents("Corinne Bailey Rae (born 26 February 1979) is a singer from Leeds.") == [
        "Corinne Bailey Rae",
        "Leeds",
    ]
    assert ents("In March 2011 the station closed.") == []
    assert ents("A giant of the 1st century BC lived in Rome.") == ["Rome"]


def test_a_title_or_abbreviation_alone_is_no_entity() -> None:
    assert ents("Dr. Who is a BBC show.") == ["BBC"]
    assert ents("No. 5 was made by Chanel Inc.") == ["No. 5", "Chanel Inc"]


def test_a_year_naming_an_event_stays_after_the() -> None:
    assert ents("The 2012 Summer Olympics were held in London.") == [
        "2012 Summer Olympics",
        "London",
    ]
    assert ents("In 2009 Smith was drafted by the 2009 NFL Draft.") == ["Smith", "2009 NFL Draft"]
    assert ents("Bill Clinton was the 42nd President of the United States.") == [
        "Bill Clinton",
        "President of the United States",
    ]


def test_numbers_continue_a_name() -> None:
    assert ents("The Apollo 11 crew landed in July 1969.") == ["Apollo 11"]


def test_x_and_y_is_two_entities() -> None:
    x = rule_based_extraction("Woodson Lake and Wood Hollow are reservoirs in Utah.")
    assert x.entities == ["Woodson Lake", "Wood Hollow", "Utah"]
    assert [(a, b) for a, _, b in x.triples] == [
        ("Woodson Lake", "Wood Hollow"),
        ("Wood Hollow", "Utah"),
    ]
    assert ents("Are Christopher Nolan and Sathish Kalathil both film directors?") == [
        "Christopher Nolan",
        "Sathish Kalathil",
    ]


def test_ampersand_and_name_particles_join_one_name() -> None:
    assert ents("Simon & Schuster published Ludwig van Beethoven and the Bank of America.") == [
        "Simon & Schuster",
        "Ludwig van Beethoven",
        "Bank of America",
    ]


def test_leading_function_words_and_question_words_go() -> None:
    assert ents("Which band was formed first, The Exies or Circus Diablo?") == [
        "Exies",
        "Circus Diablo",
    ]
    assert ents("However, the Treaty of Frankfurt ended it.") == ["Treaty of Frankfurt"]


def test_a_lone_nationality_adjective_is_no_entity() -> None:
    assert ents("Arthur? Arthur! is a 1969 British comedy film.") == ["Arthur"]
    assert ents("In 1994 American troops landed in Haiti.") == ["Haiti"]
    assert ents("He fought in the American Civil War and met the South African team.") == [
        "American Civil War"
    ]
    assert ents("The pro-Soviet faction lost.") == []


def test_possessives() -> None:
    assert ents("Romero's film was released by Walter Reade Organization (WRO).") == [
        "Romero",
        "Walter Reade Organization",
        "WRO",
    ]
    assert ents("Arthur's Magazine was published in Philadelphia.") == [
        "Arthur's Magazine",
        "Philadelphia",
    ]
    assert ents("The Beatles’ album Abbey Road was recorded at EMI Studios.") == [
        "Beatles",
        "Abbey Road",
        "EMI Studios",
    ]


def test_quoted_titles_are_one_entity() -> None:
    assert ents('"Pride and Prejudice" is a novel by Jane Austen.') == [
        "Pride and Prejudice",
        "Jane Austen",
    ]
    assert ents("The song “Yesterday,” recorded by the Beatles, topped the charts.") == [
        "Yesterday",
        "Beatles",
    ]
    assert ents('He called it "a masterpiece of the genre".') == []  # not a title


def test_parentheses_end_a_name_and_are_read_inside() -> None:
    assert ents("The Consejo Mundial de Lucha Libre (CMLL) held it in Mexico City.") == [
        "Consejo Mundial de Lucha Libre",
        "CMLL",
        "Mexico City",
    ]


def test_hyphens() -> None:
    assert ents("Warner Bros. is a Los Angeles-based studio.") == ["Warner Bros", "Los Angeles"]
    assert ents("The Franco-Prussian War ended; Coca-Cola was sold.") == [
        "Franco-Prussian War",
        "Coca-Cola",
    ]
    assert ents("Europe after post-World War II rebuilding.") == ["Europe", "World War II"]


def test_a_romanised_syllable_after_a_hyphen_stays_in_the_name() -> None:
    text = "Kim Jong-il succeeded Kim Il-sung in 1994; Kim Jong-chul is Kim Jong-il's son."
    assert ents(text) == ["Kim Jong-il", "Kim Il-sung", "Kim Jong-chul"]
    assert ents("Chiang Kai-shek fled to Taipei with Chiang Ching-kuo.") == [
        "Chiang Kai-shek",
        "Taipei",
        "Chiang Ching-kuo",
    ]
    assert ents("It was directed by Wong Kar-wai and scored by Hwang Yau-tai.") == [
        "Wong Kar-wai",
        "Hwang Yau-tai",
    ]
    assert ents("The band's guitarist Jung Joon-young met Uhm Ji-won.") == [
        "Jung Joon-young",
        "Uhm Ji-won",
    ]


def test_an_english_word_after_a_hyphen_still_ends_the_name() -> None:
    text = "A Vietnam-era film by a Paris-born director for a Hong Kong-owned firm."
    assert ents(text) == ["Vietnam", "Paris", "Hong Kong"]
    assert ents("The Nimitz-class carrier carried Oscar-winning Tamil-language films.") == [
        "Nimitz",
        "Oscar",
        "Tamil",
    ]
    # syllable-shaped English ("-run", "-out") is cut as before; "ray" is no syllable
    assert ents("The Taliban-run town had a Burnt-out church and a Blu-ray shop.") == [
        "Taliban",
        "Burnt",
        "Blu",
    ]


def test_a_common_word_opening_a_sentence_is_dropped_but_a_heading_is_kept() -> None:
    text = "Lilu (mythology)\nA lilu is a spirit. Born in Paris, she was born in Akkad."
    assert ents(text) == ["Lilu", "Paris", "Akkad"]


def test_a_run_of_headings_is_not_one_name() -> None:
    text = "Chairman Hu Qili First Secretary Yao Yilin First Vice Premier Yang Shangkun President"
    assert ents(text) == []


def test_max_entities_and_first_spelling() -> None:
    x = rule_based_extraction("Paris met Rome. PARIS met London. Berlin met Madrid.", 3)
    assert x.entities == ["Paris", "Rome", "London"]
    assert [(a, b) for a, _, b in x.triples] == [("Paris", "Rome"), ("Paris", "London")]


@pytest.mark.parametrize(
    "args", [(None,), (b"bytes",), ("text", 0), ("text", -1), ("text", 2.5), ("text", True)]
)
def test_bad_input_is_a_typed_error(args: tuple) -> None:
    with pytest.raises(InvalidArgumentError):
        rule_based_extraction(*args)


def test_empty_and_lowercase_text() -> None:
    assert rule_based_extraction("").entities == []
    assert rule_based_extraction("no names here at all.").entities == []


def test_zero_token_graph_holds_the_whole_names() -> None:
    docs = [
        Document(
            "d1",
            "Night of the Living Dead\nNight of the Living Dead is a 1968 American horror film "
            "directed by George A. Romero. It was shot in 2011 and 2012 near Woodson Lake and "
            "Wood Hollow.",
        ),
        Document("d2", "George A. Romero\nGeorge A. Romero was born in New York City."),
    ]
    rag = ReMindRAG(embeddings=HashEmbedder())
    rag.insert(docs)
    nodes, _ = rag.store.whole_graph()
    names = {n.name for n in nodes if n.kind == "entity"}
    assert {"George A. Romero", "Woodson Lake", "Wood Hollow", "New York City"} <= names
    assert not names & {"George A", "Romero", "2011 and 2012", "1968 American", "American"}
    hits = rag.retrieve("Where was George A. Romero born?", k=2)
    assert "New York City" in hits.chunks[0].chunk.text


def test_question_links_count_the_hops_outside_the_names() -> None:
    from remindrag_integrations.core.extract_rules import question_links

    three = "Who was in charge of the country where the composer of Aschenbrodel was a citizen?"
    assert question_links(three, ["Aschenbrodel"]) == 3
    assert question_links("What city was Kerry Saxby-Junna born in?", ["Kerry Saxby-Junna"]) == 0
    assert question_links("Where was Romero's wife born?", ["Romero"]) == 1  # the possessive
    # a name's own "of" is no link; the first word (the question word) never counts
    assert question_links("Who founded Bank of America?", ["Bank of America"]) == 0
    assert question_links("Who founded Bank of America?") == 1
    assert question_links("") == 0
    # "of" that picks from a set or names a kind is no hop
    band = "What is the name of the pop band founded by one of the stars of Aisa Yeh Jahaan?"
    assert question_links(band, ["Aisa Yeh Jahaan"]) == 1  # only "stars of"
    assert question_links("What kind of plane dropped the bomb?") == 0
    with pytest.raises(InvalidArgumentError):
        question_links(None)  # type: ignore[arg-type]
