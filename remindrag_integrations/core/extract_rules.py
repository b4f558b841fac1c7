"""The offline extractor of zero-token mode: proper-name entities, and one relation per pair of
entities adjacent in a sentence (the sentence is the relation text).

An entity is a run of capitalised words, joined by name particles ("Bank of America", "Ludwig
van Beethoven") or "&" ("Simon & Schuster"), with numbers allowed after its first word
("Apollo 11"). The rules, each tested in ``tests/test_extract_rules.py``:

- initials and abbreviations keep their period and do not end the sentence ("George A.
  Romero", "St. Louis", "U.S. Army"); any other punctuation ends a name;
- "and" is not a particle: "Woodson Lake and Wood Hollow" is two entities;
- leading function words go ("The Beatles" -> "Beatles", "Which Beatles album" -> "Beatles");
- bare numbers and dates are no entity ("1994", "2011 and 2012", "March 2011"); a leading
  year stays only after "the" ("the 2012 Summer Olympics"), where it names an event;
- a nationality adjective alone is no entity ("a 1994 American film" -> nothing), inside a
  name it stays ("American Civil War");
- a final possessive goes ("Romero's film" -> "Romero"), an inner one stays ("Arthur's
  Magazine"); a lowercase hyphen suffix that is an English word ends the name ("Los
  Angeles-based" -> "Los Angeles", "Vietnam-era", "Paris-born"), one romanised syllable
  (Chinese, Korean, ...) stays part of it ("Kim Jong-il", "Chiang Kai-shek");
- a short capitalised phrase in double quotes is one entity (a title: "Pride and Prejudice");
- a single capitalised word opening a sentence is dropped when the text also uses it in lower
  case ("Born in Paris, ... was born" -> "Paris").
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .entity_words import (
    ABBREVIATIONS,
    DEMONYMS,
    FUNCTION_WORDS,
    HYPHEN_ENGLISH,
    MONTHS_AND_DAYS,
    NAME_PARTICLES,
)
from .errors import InvalidArgumentError
from .prompts import Extraction
from .text import first_sentence

# a dotted acronym ("U.S.", "J.R.R."), a word (inner ' ’ & - kept: "O'Brien", "AT&T",
# "Coca-Cola"; a trailing apostrophe: "Jesus'"), or one other non-space character
_TOKEN_RE = re.compile(r"(?:[^\W\d_]\.){2,}|[^\W_](?:[\w'’&-]*[^\W_])?['’]?|\S")
_QUOTE_RE = re.compile(r"[\"“]([^\"“”\n]{1,120})[\"”]")
_LOWER_WORD_RE = re.compile(r"\b[a-z][a-z'-]*\b")
_YEAR_RE = re.compile(r"1\d{3}|20\d{2}")
_SENTENCE_END = {".", "!", "?"}
_MAX_TITLE_WORDS = 8
_MAX_NAME_WORDS = 10
_EDGE_WORDS = FUNCTION_WORDS | NAME_PARTICLES  # never the first or last word of a name
_NOT_TITLE = MONTHS_AND_DAYS | DEMONYMS | {"a", "an", "the"}
# one syllable of a romanised name (pinyin, Wade-Giles, Korean, ...): an optional onset (one
# consonant, a digraph, an aspiration mark, a glide), one to three vowels, an optional final
# n / ng / m / k / l / p / t / h: "shek", "il", "chul", "hwan", "t'ung", "young", "kuo".
# English attributive suffixes rarely have that shape: "based", "born", "era", "class",
# "style", "owned", "language", "speaking"
_VOWEL = "aeiouàáâãäåèéêëìíîïòóôõöùúûüāēīōūŏŭə"
_SYLLABLE_RE = re.compile(
    rf"(?:(?:ch|sh|zh|ts|tz|hs|jj|kk|pp|ss|tt|[bcdfghjklmnpqrstxz])['’]?[hwy]?|[wy])?"
    rf"[{_VOWEL}]{{1,3}}(?:ng|[nmklpth])?"
)


class _Tok(NamedTuple):
    text: str
    start: int
    abbrev: bool = False  # an initial / abbreviation / acronym with its period

    @property
    def cap(self) -> bool:
        return self.text[0].isupper()

    @property
    def num(self) -> bool:
        return self.text[0].isdigit()


def _tokens(line: str) -> list[_Tok]:
    out = []
    for m in _TOKEN_RE.finditer(line):
        word, end = m.group(0), m.end()
        if word.endswith("."):  # a dotted acronym
            out.append(_Tok(word, m.start(), True))
        elif end < len(line) and line[end] == "." and _is_abbreviation(word):
            out.append(_Tok(word + ".", m.start(), True))
        else:
            out.append(_Tok(word, m.start()))
    return _absorb_periods(out)


def _absorb_periods(toks: list[_Tok]) -> list[_Tok]:
    """Drop the period tokens that an abbreviation already carries."""
    out: list[_Tok] = []
    for t in toks:
        if t.text == "." and out and out[-1].abbrev and out[-1].start + len(out[-1].text) > t.start:
            continue
        out.append(t)
    return out


def _is_abbreviation(word: str) -> bool:
    if len(word) == 1:
        return word.isupper()  # an initial: "George A. Romero"
    return word[0].isupper() and word.lower() in ABBREVIATIONS or word == "vs"


def _sentences(line: str) -> list[list[_Tok]]:
    """The line's tokens cut into sentences at . ! ? (not at an abbreviation's period)."""
    out: list[list[_Tok]] = [[]]
    for t in _tokens(line):
        out[-1].append(t)
        if t.text in _SENTENCE_END:
            out.append([])
    return [s for s in out if s]


def _quoted_titles(line: str) -> list[tuple[int, int, str]]:
    """(start, end, title) of the short capitalised phrases in double quotes."""
    out = []
    for m in _QUOTE_RE.finditer(line):
        title = m.group(1).strip().rstrip(",.;:").strip()
        words = title.split()
        if words and (title[0].isupper() or title[0].isdigit()) and len(words) <= _MAX_TITLE_WORDS:
            lexical = [w.lower() for w in words if not w[0].isdigit()]
            if title[-1] not in "!?" and not all(w in _NOT_TITLE for w in lexical):
                out.append((m.start(), m.end(), title))
    return out


def _runs(sentence: list[_Tok], skip: list[tuple[int, int, str]]) -> list[tuple[list[_Tok], bool]]:
    """Candidate name runs of one sentence, each with whether "the" came right before it."""
    runs: list[tuple[list[_Tok], bool]] = []
    cur: list[_Tok] = []
    pending: list[_Tok] = []  # particles waiting for the next capitalised word
    prev = ""
    after_the = False

    def flush() -> None:
        nonlocal cur, pending
        if cur:
            runs.append((cur, after_the))
        cur, pending = [], []

    for t in sentence:
        quoted = bool(skip) and any(s <= t.start < e for s, e, _ in skip)
        head, _, tail = t.text.rpartition("-")
        if head and not t.cap and tail[:1].isupper():  # "post-World War II", "pro-Soviet"
            t = _Tok(tail, t.start + len(head) + 1)
        if not quoted and (t.cap or t.num and (cur or prev == "the")):
            if not cur:
                after_the = prev == "the"
            cur += [*pending, t]
            pending = []
            head, _, tail = t.text.rpartition("-")
            if t.cap and head and _ends_name(tail):  # "Los Angeles-based": ends here
                cur[-1] = _Tok(head, t.start)
                flush()
        elif cur and not quoted and (t.text in NAME_PARTICLES or t.text == "&"):
            pending.append(t)
        else:
            flush()
        prev = t.text.lower()
    flush()
    return runs


def _ends_name(suffix: str) -> bool:
    """Whether a lowercase hyphen suffix is English that ends the name before it ("-based",
    "-born", "-era") rather than a syllable of a romanised name ("-il", "-shek")."""
    if not suffix[:1].islower():
        return False
    word = suffix.lower()
    if word[-2:] in ("'s", "’s"):  # "Kim Il-sung's": the possessive goes later
        word = word[:-2]
    word = word.rstrip("'’")
    if word in FUNCTION_WORDS or word in HYPHEN_ENGLISH:
        return True
    return _SYLLABLE_RE.fullmatch(word) is None


def _clean(run: list[_Tok], after_the: bool) -> str:
    """The entity name of one run, or "" when the run names nothing."""
    words = [t.text for t in run]
    while words and words[0].lower() in _EDGE_WORDS:
        after_the = words[0].lower() == "the"
        words = words[1:]
    if not (after_the and words and _YEAR_RE.fullmatch(words[0])):
        while words and words[0][0].isdigit():
            words = words[1:]
    while words and (words[-1].lower() in _EDGE_WORDS or words[-1] == "&"):
        words = words[:-1]
    if not words:
        return ""
    if words[-1][-2:] in ("'s", "’s"):
        words[-1] = words[-1][:-2]
    words[-1] = words[-1].rstrip("'’")
    if words[-1].endswith(".") and words[-1].count(".") == 1:  # "World War I." at the end
        words[-1] = words[-1][:-1]
    lexical = [w.lower() for w in words if not w[0].isdigit()]
    if len(lexical) > _MAX_NAME_WORDS:  # a run of headings or a list, not one name
        return ""
    if not lexical or all(w in DEMONYMS or w in MONTHS_AND_DAYS for w in lexical):
        return ""
    if len(words) == 1 and words[0].rstrip(".").lower() in ABBREVIATIONS:
        return ""  # a title or abbreviation alone: "Dr", "Inc"
    name = " ".join(words)
    return name if len(name) >= 2 else ""


def _sentence_entities(
    sentence: list[_Tok], titles: list[tuple[int, int, str]], lower_words: set[str]
) -> list[str]:
    """The entities of one sentence, in text order."""
    lo, hi = sentence[0].start, sentence[-1].start + len(sentence[-1].text)
    inside = [q for q in titles if lo <= q[0] < hi]
    found = [(s, title) for s, _, title in inside]
    for run, after_the in _runs(sentence, inside):
        name = _clean(run, after_the)
        if not name:
            continue
        if _common_opener(sentence, run, name, lower_words):
            continue
        found.append((run[0].start, name))
    return [name for _, name in sorted(found, key=lambda p: p[0])]


def _common_opener(sentence: list[_Tok], run: list[_Tok], name: str, lower_words: set[str]) -> bool:
    """A single capitalised word that opens a sentence (not a heading line), is followed by a
    lowercase word and is also written in lower case in the text: "Born in Paris"."""
    if run[0] is not sentence[0] or " " in name or name.lower() not in lower_words:
        return False
    if sentence[-1].text not in _SENTENCE_END or len(sentence) < 2:
        return False  # a heading or title line ("Lilu (mythology)")
    return sentence[1].text[0].islower()


def rule_based_extraction(text: str, max_entities: int = 40) -> Extraction:
    """Entities and adjacent-pair relations of ``text`` without an LLM (zero-token mode, and
    the fallback of an unparseable LLM extraction). At most ``max_entities`` entities, first
    seen first; a name is kept in the spelling of its first mention."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"text must be a str, not {type(text).__name__}")
    if isinstance(max_entities, bool) or not isinstance(max_entities, int) or max_entities < 1:
        raise InvalidArgumentError(f"max_entities must be a positive int, not {max_entities!r}")
    lower_words = set(_LOWER_WORD_RE.findall(text))
    entities: dict[str, str] = {}
    triples: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        titles = _quoted_titles(line)
        for sentence in _sentences(line):
            names = list(dict.fromkeys(_sentence_entities(sentence, titles, lower_words)))
            for n in names:
                entities.setdefault(n.lower(), n)
            rel = _relation_text(line, sentence)
            triples += [(a, rel, b) for a, b in zip(names, names[1:]) if a.lower() != b.lower()]
    kept = list(entities.values())[:max_entities]
    keep = {k.lower() for k in kept}
    triples = [
        (entities[a.lower()], rel, entities[b.lower()])  # the first spelling, as the entities
        for a, rel, b in triples
        if a.lower() in keep and b.lower() in keep
    ]
    return Extraction(title=first_sentence(text), entities=kept, triples=triples)


def _relation_text(line: str, sentence: list[_Tok]) -> str:
    start, last = sentence[0].start, sentence[-1]
    rel = " ".join(line[start : last.start + len(last.text)].split())
    return rel if len(rel) <= 300 else rel[:299] + "…"


# the words that turn a noun phrase into a link to another one: "the director OF the film",
# "the city WHERE he was born", "the band WHOSE singer", "Romero'S film"
_LINK_RE = re.compile(r"\b(?:of|where|which|whose|who|whom|that|when)\b|['’]s\b", re.IGNORECASE)
# an "of" after these picks from a set or names a kind ("one of the stars", "the name of the
# band", "what kind of plane"): the same thing, no hop to another
_NO_HOP_OF = re.compile(
    r"\b(?:one|two|three|some|any|each|all|many|most|several|both|none|either|neither|part|"
    r"member|members|name|names|kind|kinds|type|types|sort|form|number)\s+of\b",
    re.IGNORECASE,
)


def question_links(question: str, names: list[str] | tuple[str, ...] = ()) -> int:
    """How many links a question chains outside its ``names`` and its first word: each is
    one more hop between the name it gives and the passage that answers ("Who was in charge
    of the country where the composer of Aschenbrodel was a citizen?" has 3: "of", "where",
    "of"; a name's own "of", as in "Bank of America", and an "of" that picks from a set or
    names a kind, as in "one of the stars" or "the name of the band", are not counted)."""
    if not isinstance(question, str):
        raise InvalidArgumentError(f"question must be a str, not {type(question).__name__}")
    text = question
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, " ")
    rest = _NO_HOP_OF.sub(" ", text).split(maxsplit=1)
    return len(_LINK_RE.findall(rest[1])) if len(rest) > 1 else 0
