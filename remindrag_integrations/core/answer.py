"""Answers from a retrieval: the LLM answer with citations, or in zero-token mode the retrieved
sentence closest to the question."""

from __future__ import annotations

import numpy as np

from .errors import LLMError
from .prompts import ANSWER_PROMPT, parse_citations
from .steps import Embed, Step, ask
from .text import split_sentences
from .types import Answer, Retrieval


def llm_answer(query: str, retrieval: Retrieval, template: str = ANSWER_PROMPT) -> Step:
    known = {rc.chunk.id for rc in retrieval.chunks}
    context = "\n\n".join(f"[{rc.chunk.id}] {rc.chunk.text}" for rc in retrieval.chunks)
    triples = "\n".join(f"- {t.relation}" for t in retrieval.triples) or "(none)"
    prompt = template.format(chunks=context, triples=triples, query=query)
    try:
        text = yield from ask(
            "answer", prompt, {"query": query, "chunks": [rc.chunk.id for rc in retrieval.chunks]}
        )
    except LLMError as exc:
        raise LLMError(f"answer generation failed (trace {retrieval.trace_id}): {exc}") from exc
    return Answer(text.strip(), parse_citations(text, known), retrieval)


def extractive_answer(query: str, retrieval: Retrieval) -> Step:
    """The retrieved sentence closest to the question, cited."""
    sents = [
        (rc.chunk.id, rc.chunk.text[s:e])
        for rc in retrieval.chunks
        for s, e in split_sentences(rc.chunk.text)
    ]
    vecs = yield Embed((query, *(" ".join(t.split()) for _, t in sents)))
    best = int(np.argmax(vecs[1:] @ vecs[0]))
    cid, text = sents[best]
    return Answer(f"{' '.join(text.split())} [{cid}]", [cid], retrieval)


def answer(query: str, retrieval: Retrieval, use_llm: bool, template: str = ANSWER_PROMPT) -> Step:
    if not retrieval.chunks:
        return Answer("I could not find anything relevant.", [], retrieval)
    if use_llm:
        return (yield from llm_answer(query, retrieval, template))
    return (yield from extractive_answer(query, retrieval))
