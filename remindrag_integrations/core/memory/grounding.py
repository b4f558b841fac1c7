"""What an answer is grounded in, read from the answer itself with no LLM call (docs/method.md
§3.1): whether it abstains, and, when it cites nothing, which retrieved passages hold it.

**Abstaining.** An answer abstains when it is empty, or when it says anywhere that it cannot
answer or that the passages do not hold the answer. The phrasings are the refusals small and
large chat models write over a retrieval prompt ("I don't know", "The context does not
mention ...", "The provided passages do not contain information about ...", "I'm sorry, but
I couldn't find ...", "There is no information about ...", "... is not mentioned in the
text", "Insufficient information.", "Unknown.", "N/A"); :data:`ABSTAIN_RULES` lists them by
family. A hedge anywhere counts: memory learns from answers that commit, and an answer that
says part of it is missing is not one to replay. So do partial refusals ("The passages talk
about the frame and gears but not its price.", "... says nothing about ...") and guesses (an
answer opening with "Maybe", "Probably", "Perhaps", "I think", "It might be", or saying
"I'm guessing", "my best guess"): none of these rules flags a gold answer of the bundled
question sets (452), a committed Qwen2.5-1.5B answer recorded in tests/data, and one of
12,026 encyclopedic sentences of the corpora (itself a quoted guess), and none of the
3,441 passages read whole. Such an answer writes
nothing, whatever it cites.

**Grounding.** The answer's *key words* are its content words (lower-cased, accents and a
plural or possessive ``s`` dropped; function words and the words answers wrap a reply in,
such as "context" or "based", left out) that the question does not already hold: what the
answer adds. A key word held by more than half of the retrieved passages, and by more than
two, tells none apart and is set aside. The support is then picked greedily: the
passages holding the most key words not yet covered (every passage that holds exactly those
words: "A spirit." is grounded in each passage that names a spirit), again and again while
one adds a word. The answer is grounded when the picked passages hold at least
half of its key words (:data:`MIN_COVERAGE`); otherwise, or when it adds no key word (a bare
"Yes."), it is grounded in no passage and memorize writes nothing. "The Vistula." is grounded
in the passage that names the Vistula, never in the top passage about Paris.

**An on-topic question.** An answer that cites nothing is taken as grounded only when the
question is one the corpus holds: its relevance (the first passage's score, which needs both
the meaning and the question's own words: ``core/pipeline.py::combined``) reaches
``memory.uncited_min_score`` (the documented cutoff, 0.525 with the packaged embedder), and
the retrieved passages name the question's most specific name, its longest
(:func:`names_held`). Off-corpus questions otherwise wrote memory whenever their answer's
words ("1993", "New York City", "Medal of Honor") happened to stand in some unrelated
passage (RESULTS §13). The relevance is checked in ``memorize.py``; this module reads texts.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from ..entity_words import FUNCTION_WORDS
from ..extract_rules import rule_based_extraction
from ..ids import NODE_ID_TEXT, norm_name
from ..text import word_list

MIN_COVERAGE = 0.5  # share of the answer's key words the support must hold

_NOT = r"(?:does not|doesn't|do not|don't|did not|didn't|does n't|do n't)"
_SOURCE = (
    r"(?:context|contexts|passages?|documents?|texts?|sources?|information|excerpts?|"
    r"snippets?|articles?|chunks?|knowledge base|search results?|retrieved results?)"
)
_SAY = (
    r"(?:mention|contain|provide|include|say|specify|state|give|discuss|address|indicate|"
    r"answer|cover|describe|list|offer|have|reveal|tell|name|identify|support)"
)
# the rest of a sentence: a period ends it only after a word of two letters or more and
# before a space ("u.s.", "g. stanley", "6.8 inches" do not)
_CLAUSE = r"(?:[^.;]|\.(?!\s)|(?<=\b\w)\.)*?"
_WHERE = rf"(?:the |these |those |this |any |my )?(?:provided |given |above |available |retrieved )?{_SOURCE}"

ABSTAIN_RULES: tuple[tuple[str, str], ...] = (
    # the speaker does not know or cannot say
    ("does not know", r"\bi (?:do not|don't|dont|really don't) know\b|\bidk\b|\bno idea\b"),
    (
        "not sure",
        r"\bi(?: am|'m) not (?:\w+ly |100% |quite )?(?:sure|certain|able|confident|positive)\b",
    ),
    (
        "cannot answer",
        r"\b(?:i|we) (?:cannot|can't|can not|could not|couldn't|am unable to|'m unable to|was "
        r"unable to|am not able to|'m not able to) (?:\w+ )?(?:answer|determine|find|locate|say|"
        r"tell|provide|confirm|verify|identify|infer|know|give|help|see)\b",
    ),
    (
        "cannot be determined",
        r"\b(?:cannot|can't|can not|could not|couldn't) be (?:determined|answered|found|"
        r"inferred|identified|confirmed|established|known)\b|\b(?:impossible|not possible) to "
        r"(?:determine|answer|say|tell|know|identify)\b|\bunable to (?:answer|determine|find|"
        r"identify|provide|locate)\b|\bunanswerable\b",
    ),
    (
        "I don't have",
        r"\bi (?:do not|don't) have (?:\w+ )?(?:information|data|details|access|knowledge)\b",
    ),
    # the passages do not hold it
    (
        "the passages do not say",
        rf"\b{_WHERE}(?: (?:provided|given|above|here|shown|retrieved|available|you \w+))?"
        rf"(?: to me)? {_NOT} (?:\w+ly )?{_SAY}\b|\bnone of {_WHERE} (?:\w+ly )?{_SAY}s?\b",
    ),
    (
        "not in the passages",
        rf"\bnot (?:\w+ly )?(?:mentioned|found|stated|specified|provided|available|given|"
        rf"included|present|covered|addressed|discussed|listed|described|contained|known|"
        rf"indicated|named)? ?(?:in|within|by|from|anywhere in) {_WHERE}\b",
    ),
    (
        "no information",
        r"(?:^|\bthere (?:is|are|was|were)|\bthere's|\bi (?:have|found|see|could find|can find)|"
        r"\b(?:contains?|provides?|gives?|offers?|has|have|includes?|with))\s+no (?:relevant |"
        r"specific |such |further |additional |explicit |direct |clear |mention |information )?"
        r"(?:information|mention|answer|details?|reference|indication)\b",
    ),
    (
        "not enough information",
        r"\b(?:insufficient|not enough|lacks? (?:the )?|missing) (?:information|context|data|"
        r"details)\b",
    ),
    (
        "unclear from the passages",
        rf"\b(?:unclear|not clear|unspecified) (?:from|in|based on) {_WHERE}\b",
    ),
    # a partial answer: the passages hold part of what was asked and not the rest
    (
        "the passages hold only part",
        rf"\b{_WHERE}\b{_CLAUSE}\bbut (?:not|nothing|no|(?:\w+ )?{_NOT} (?:\w+ly )?{_SAY})\b|"
        r"\b(?:says?|mentions?|tells?|gives?) nothing (?:about|on|of|regarding)\b|"
        r"\b(?:only )?(?:partially|partly) (?:answers?|covers?|address(?:es)?)\b",
    ),
    # a guess: the speaker does not commit to it
    (
        "a guess",
        r"^(?:maybe|perhaps|probably|possibly|presumably|likely|my guess|i guess|i think|i "
        r"believe|i suppose|i assume|i would guess|i'd guess|i would say|i'd say|it (?:might|"
        r"could|may) be)\b|\bi(?:'m| am) (?:just |only )?guessing\b|\b(?:just |only )?a "
        r"(?:wild |rough |best |educated )?guess\b|\bmy (?:best )?guess\b|\bat a guess\b",
    ),
)
_RULES = tuple((name, re.compile(rx)) for name, rx in ABSTAIN_RULES)
# a whole answer that is only one of these (after dropping punctuation) abstains
BARE_ABSTENTIONS = frozenset(
    {
        "unknown",
        "n a",
        "na",
        "no answer",
        "not known",
        "not available",
        "not specified",
        "not mentioned",
        "not stated",
        "not found",
        "not applicable",
        "cannot answer",
        "can't answer",
        "cannot say",
        "can't say",
        "no information",
        "no data",
        "unsure",
        "uncertain",
        "none found",
    }
)

# words answers wrap a reply in ("Based on the context, ...", "The answer is ...")
ANSWER_WORDS = frozenset(
    """
    answer answers answered based context contexts passage passages document documents text
    provided given mentioned mention mentions states stated says said according information
    source sources cite cited citation question questions chunk chunks
    """.split()
)
_NODE_ID = re.compile(rf"\b{NODE_ID_TEXT}\b")  # a cited id is no word of the answer
_CITED = re.compile(rf"\s*\[?\s*\b{NODE_ID_TEXT}\b\s*\]?")


def normal(text: str) -> str:
    """Lower case, straight apostrophes, no accents, one space between words."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    if not text.isascii():  # ASCII has no accent to take off
        text = unicodedata.normalize("NFKD", text)
        text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return " ".join(text.casefold().split())


def abstains(answer: str | None) -> str | None:
    """The rule (:data:`ABSTAIN_RULES`) under which ``answer`` abstains, or ``None`` when it
    commits to an answer. ``None`` (no answer given) does not abstain: there is nothing to read."""
    if answer is None:
        return None
    text = normal(_CITED.sub(" ", answer))  # "the passages [c-1] do not say" reads as refusal
    if not word_list(text):
        return "empty answer"
    if " ".join(word_list(text)) in BARE_ABSTENTIONS:
        return "says only that it has no answer"
    for name, rx in _RULES:
        if rx.search(text):
            return name
    return None


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry content (see the module doc)."""
    words = (_stem(w) for w in word_list(_NODE_ID.sub(" ", normal(text))))
    return {
        w
        for w in words
        if (len(w) > 1 or w.isdigit()) and w not in FUNCTION_WORDS and w not in ANSWER_WORDS
    }


def key_words(answer: str, question: str) -> set[str]:
    """The answer's content words that the question does not hold: what the answer adds."""
    return content_words(answer) - content_words(question)


def question_names(question: str) -> list[str]:
    """The names the offline extractor finds in ``question`` (a span with a word that is no
    function word), normalised."""
    names = (norm_name(n) for n in rule_based_extraction(question).entities)
    return [n for n in names if any(w not in FUNCTION_WORDS for w in n.split())]


def names_held(question: str, passages: Sequence[tuple[str, str]]) -> bool:
    """Whether the passages name what the question names: its longest name (the most words;
    any of them when several are as long), which is its most specific ("James Woods", not
    "War" of "In Love and War"). True when it names nothing: nothing to tell. A question
    whose longest name the retrieval did not find is one the corpus does not seem to hold
    (an off-corpus question): an answer that cites nothing is not taken as grounded in a
    passage that merely shares its words ("1993", "Medal of Honor")."""
    names = question_names(question)
    if not names:
        return True
    most = max(len(n.split()) for n in names)
    texts = [norm_name(text) for _, text in passages]
    return any(
        re.search(rf"\b{re.escape(n)}\b", t) for n in names if len(n.split()) == most for t in texts
    )


def grounded_in(answer: str, question: str, passages: Sequence[tuple[str, str]]) -> list[str]:
    """The ids of the ``passages`` (``(id, text)``, best-ranked first) that ``answer`` is
    grounded in, by the rule of the module doc; ``[]`` when it is grounded in none."""
    keys = key_words(answer, question)
    if not keys or not passages:
        return []
    held = {pid: content_words(text) & keys for pid, text in passages}
    n = len(passages)
    if n >= 3:  # a word most passages hold (more than two) tells none apart
        count = {w: sum(w in h for h in held.values()) for w in keys}
        common = {w for w, c in count.items() if c > n / 2 and c > 2}
        keys -= common
        held = {pid: h - common for pid, h in held.items()}
    if not keys:
        return []
    picked: list[str] = []
    covered: set[str] = set()
    while True:
        best = max(held, key=lambda pid: len(held[pid] - covered))  # the first: best-ranked
        gain = held[best] - covered
        if not gain:
            break
        picked += [pid for pid in held if held[pid] - covered == gain]  # all that hold it
        covered |= gain
    return picked if len(covered) >= MIN_COVERAGE * len(keys) else []
