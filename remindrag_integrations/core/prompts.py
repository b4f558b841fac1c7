"""Prompt templates (plain constants a user can replace) and pure parse functions.

Every parser either returns a well-formed result or raises :class:`LLMOutputError`. Replies are
read as plain text: JSON may sit in a code fence or among chatter.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError, LLMOutputError
from .ids import CHUNK_ID_TEXT, EDGE_ID_RE, NODE_ID_RE

EXTRACTION_PROMPT = """Extract a knowledge graph from the text below.

1. "title": a short title (at most 12 words) that summarises the text.
2. "entities": named entities: people, organisations, places, works, events, objects and
   specific concepts with a clear identity. Each entity is a short standalone name, never a
   clause, a number or a date alone, and never joined with "and" / "or".
3. "triples": relations between those entities as [subject, sentence, object], where the
   sentence states the relation completely ("Scott Derrickson directed Sinister.").

Reply with JSON only:
{{"title": "...", "entities": ["...", "..."], "triples": [["subject", "sentence", "object"]]}}

Text:
{text}
"""

PRE_QUERY_PROMPT = """Decide whether answering the question needs facts from a document collection,
and split it into at most {max_subquestions} self-contained sub-question(s) that together answer it
(give the question itself when it needs no splitting).

Question: {query}

Reply with JSON only: {{"need_retrieval": true, "subquestions": ["..."]}}
"""

TRAVERSAL_PROMPT = """You are walking a knowledge graph to collect the text passages that answer a
question. Entity nodes are names; passage nodes hold a text passage, and going to one reads it.
At each step either stop, when the passages read so far answer the question, or go to one of
the numbered choices listed at the end: a neighbour of the current node, or a node visited
earlier that still has unexplored neighbours.

Question: {query}

The walk so far:
{walk}

{choices}
{feedback}
Reply with JSON only: {{"enough": true}} to stop, or {{"enough": false, "go": <choice number>}}.
"""

FILTER_PROMPT = """A search over a knowledge graph collected the chunks and edges below for a question,
and an answer was written from them. Name the chunks and edges that directly support or refute
the answer or give key evidence for the question. Leave out redundant or off-topic ones, and
prefer chunks: they hold the complete information.

Question: {query}
Answer: {answer}

Chunks:
{chunks}

Edges (id | from | relation | to):
{edges}

Reply with JSON only: {{"chunks": ["<chunk id>", ...], "edges": ["<edge id>", ...]}}
"""

ANSWER_PROMPT = """Answer the question using only the context below. Cite the chunks you used by
their ids in square brackets, like [c-0123abcd45]. If the context does not contain the answer,
say that you do not know.

Context:
{chunks}

Relations:
{triples}

Question: {query}
Answer:"""


@dataclass(frozen=True)
class Prompts:
    """The templates the engine uses; replace any of them, keeping its ``{placeholders}``
    and the JSON reply shape its parser expects."""

    extraction: str = EXTRACTION_PROMPT
    pre_query: str = PRE_QUERY_PROMPT
    traversal: str = TRAVERSAL_PROMPT
    filter: str = FILTER_PROMPT
    answer: str = ANSWER_PROMPT

    def __post_init__(self) -> None:
        for name, fields in _PLACEHOLDERS.items():
            template = getattr(self, name)
            try:
                template.format(**{f: "" for f in fields})
            except (KeyError, IndexError, ValueError) as exc:
                raise ConfigError(
                    f"prompt {name!r} must use only the placeholders {sorted(fields)}: {exc}"
                ) from exc
            missing = [f for f in fields if "{" + f + "}" not in template]
            if missing:
                raise ConfigError(f"prompt {name!r} lacks placeholder(s) {missing}")


_PLACEHOLDERS = {
    "extraction": ("text",),
    "pre_query": ("query", "max_subquestions"),
    "traversal": ("query", "walk", "choices", "feedback"),
    "filter": ("query", "answer", "chunks", "edges"),
    "answer": ("chunks", "triples", "query"),
}

_FENCE_RE = re.compile(r"```(?:[a-zA-Z_-]*)\s*\n?(.*?)```", re.DOTALL)
_MAX_SCAN_STARTS = 200


def extract_json(reply: str, want: type = dict) -> Any:
    """The first JSON value of type ``want`` in ``reply`` (whole reply, a fenced block, or an
    object embedded in prose). Raises :class:`LLMOutputError` when there is none; hostile
    replies (nesting too deep to parse, ``NaN``, lone surrogates, megabytes) raise it too."""
    if not isinstance(reply, str):
        raise LLMOutputError(f"expected a text reply, got {type(reply).__name__}")
    text = reply.strip()
    if not text:
        raise LLMOutputError("empty reply", reply)
    candidates = [text, *(m.group(1).strip() for m in _FENCE_RE.finditer(text))]
    for cand in candidates:
        value = _decode(cand, 0)
        if isinstance(value, want):
            return value
    opener = "{" if want is dict else "["
    starts = [i for i, ch in enumerate(text) if ch == opener][:_MAX_SCAN_STARTS]
    for i in starts:
        value = _decode(text, i)
        if isinstance(value, want):
            return value
    raise LLMOutputError(f"no JSON {want.__name__} in the reply", reply[:2000])


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _decode(text: str, start: int) -> Any:
    """The JSON value at ``text[start:]`` (trailing text allowed at an embedded start), or
    None when there is none."""
    try:
        if start == 0:
            return _DECODER.decode(text)
        return _DECODER.raw_decode(text, start)[0]
    except (ValueError, RecursionError):
        return None


def _str_list(value: Any, what: str, reply: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise LLMOutputError(f'"{what}" must be a list', reply)
    return [str(v).strip() for v in value if isinstance(v, str | int | float) and str(v).strip()]


def _clean_name(name: str, max_chars: int = 120) -> str:
    """A name or sentence from a reply: whitespace folded, control characters dropped, lone
    surrogates replaced (they cannot be encoded, stored or hashed), cut to ``max_chars``."""
    text = "".join(_clean_char(ch) for ch in str(name)[: 4 * max_chars])
    return " ".join(text.split())[:max_chars]


def _clean_char(ch: str) -> str:
    if "\ud800" <= ch <= "\udfff":
        return "\ufffd"
    return " " if ch < " " or ch == "\x7f" else ch


@dataclass(frozen=True)
class Extraction:
    title: str
    entities: list[str]
    triples: list[tuple[str, str, str]] = field(default_factory=list)


def parse_extraction(reply: str, max_entities: int = 40) -> Extraction:
    data = extract_json(reply)
    title = _clean_name(data.get("title") or "", 200)
    entities: list[str] = []
    seen: set[str] = set()
    for e in _str_list(data.get("entities"), "entities", reply):
        name = _clean_name(e)
        if name and name.lower() not in seen:
            seen.add(name.lower())
            entities.append(name)
    raw_triples = data.get("triples") or []
    if not isinstance(raw_triples, list):
        raise LLMOutputError('"triples" must be a list', reply)
    triples = []
    for t in raw_triples:
        if isinstance(t, dict):
            t = [t.get("subject"), t.get("sentence") or t.get("relation"), t.get("object")]
        if not (isinstance(t, list | tuple) and len(t) == 3 and all(isinstance(x, str) for x in t)):
            continue
        s, rel, o = (_clean_name(x, 400) for x in t)
        if s and rel and o and s.lower() != o.lower():
            triples.append((s, rel, o))
            for name in (s, o):
                if name.lower() not in seen:
                    seen.add(name.lower())
                    entities.append(name)
    return Extraction(title=title, entities=entities[:max_entities], triples=triples)


def parse_filter(reply: str) -> tuple[list[str], list[str]]:
    """(chunk ids, edge ids) named by the filter; ids of the wrong syntax are dropped."""
    data = extract_json(reply)
    chunks = [c for c in _str_list(data.get("chunks"), "chunks", reply) if NODE_ID_RE.match(c)]
    edges = [e for e in _str_list(data.get("edges"), "edges", reply) if EDGE_ID_RE.match(e)]
    return chunks, edges


def parse_pre_query(reply: str, max_subquestions: int) -> tuple[bool, list[str]]:
    data = extract_json(reply)
    need = data.get("need_retrieval", True)
    if isinstance(need, str):
        need = need.strip().lower() not in ("false", "no")
    subs = [_clean_name(s, 500) for s in _str_list(data.get("subquestions"), "subquestions", reply)]
    return bool(need), [s for s in subs if s][:max_subquestions]


_CITE_RE = re.compile(rf"\[?\b({CHUNK_ID_TEXT})\b\]?")


def cited_ids(reply: str) -> list[str]:
    """Every chunk id cited in an answer, in order, without repeats."""
    return list(dict.fromkeys(m.group(1) for m in _CITE_RE.finditer(reply or "")))


def parse_citations(reply: str, known: set[str]) -> list[str]:
    """Chunk ids cited in an answer, in order, restricted to ``known``."""
    return [c for c in cited_ids(reply) if c in known]
