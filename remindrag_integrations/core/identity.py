"""Documents named by their content (no id, no source): the same text is the same document,
and an edit of one is refused rather than stored beside its old version (docs/retriever.md,
"Documents without an id or a source").

A document given without an id and without a loader's ``source`` gets the id ``doc-`` + a
hash of its text (:func:`derived`). Given again unchanged it is the same document (skipped);
changed, it would be a second document with the old version still stored and returned. An
edit cannot be told from a new document by its name, so before anything is written the
passages of such a new document are compared with the passages of the stored documents that
are also named by their content: when the words of the shorter of two passages are at least
:data:`SAME_WORDS` within the longer (a word changed, a sentence inserted, the same text
split again at another size), the new one is taken for an edit and the insert raises
:class:`DocumentIdentityError` naming both documents (``IndexConfig.unnamed_edits="add"``
stores it beside instead). Passages under :data:`MIN_WORDS` distinct words (FAQ lines,
titles) are never compared. On real passages split at 200 characters, distinct passages
that pass this test are rare: 1 of 2,900 (HotpotQA), 5 of 1,265 (2Wiki), 78 of 4,670
(MuSiQue, whose corpus repeats paragraphs under several titles): RESULTS §13.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from .errors import DocumentIdentityError
from .ids import hex_id
from .store import ChunkBatchStore, GraphStore, LexicalStore
from .text import words
from .types import Chunk, Document

DERIVED = re.compile(r"^doc-[0-9a-f]{16}$")
"""The form of an id made from a document's content (:func:`derived`)."""
MIN_WORDS = 12
"""Passages with fewer distinct words are not compared (two short lines share most words)."""
SAME_WORDS = 0.9
"""Least share of the shorter passage's distinct words found in the longer one for the two to
be taken for versions of one passage."""
CANDIDATES = 5
"""Stored passages read per new passage (the lexical search's best)."""
UNION = 3
"""Stored documents a new one is compared with (the first its passages find)."""


def derived(text: str) -> str:
    """The id of a document named by its content."""
    return "doc-" + hex_id(text, n=16)


def contained(a: frozenset[str], b: frozenset[str]) -> float:
    """The share of the smaller word set's words found in the other."""
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def _excerpt(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def refuse_unnamed_edits(
    store: GraphStore,
    fresh: Sequence[Document],
    chunks: Sequence[Chunk],
    named: Collection[str],
) -> None:
    """Raise :class:`DocumentIdentityError` when a new document named by its content looks
    like an edit of other stored documents named by their content (none given in this
    insert): its words are at least :data:`SAME_WORDS` within the words of the (at most
    :data:`UNION`) stored ones its passages find first, or one of them is that much within
    it. Costs nothing when the insert has no such document or the store holds none; else one
    lexical search per new passage and a read of the documents found."""
    new = {d.id for d in fresh if DERIVED.match(d.id) and store.document_hash(d.id) is None}
    if not new or not isinstance(store, LexicalStore):
        return
    given = set(named)
    stored = {d for d in store.document_ids() if DERIVED.match(d) and d not in given}
    if not stored:
        return
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        if c.doc_id in new:
            by_doc.setdefault(c.doc_id, []).append(c)
    cache: dict[str, tuple[frozenset[str], str]] = {}
    for doc_id, mine in by_doc.items():
        words_of = frozenset().union(*(words(c.text) for c in mine))
        if len(words_of) < MIN_WORDS:
            continue
        found: list[str] = []
        for c in mine:
            hits = [cid for cid, _ in store.lexical_search(c.text, CANDIDATES)]
            got = (
                store.get_chunks(hits)
                if isinstance(store, ChunkBatchStore)
                else [store.get_chunk(h) for h in hits]
            )
            found += [h.doc_id for h in got if h.doc_id in stored]
        ranked = list(dict.fromkeys(found))[:UNION]
        for d in ranked:
            if d not in cache:
                theirs = store.document_chunks(d)
                cache[d] = (
                    frozenset().union(*(words(t.text) for t in theirs)),
                    theirs[0].text if theirs else "",
                )
        union = frozenset().union(*(cache[d][0] for d in ranked)) if ranked else frozenset()
        alone = [
            d
            for d in ranked
            if len(cache[d][0]) >= MIN_WORDS and contained(words_of, cache[d][0]) >= SAME_WORDS
        ]
        if alone or (union and len(words_of & union) / len(words_of) >= SAME_WORDS):
            olds = tuple(alone or ranked)
            raise DocumentIdentityError(
                f"a document without an id or source ({doc_id}, {_excerpt(mine[0].text)!r}) "
                f"repeats stored document(s) {', '.join(olds)} ({_excerpt(cache[olds[0]][1])!r}), "
                "which have none either: it looks like an edit of them, and an edit of a "
                "document without an id cannot be told from a new one. Give documents ids "
                "(LangChain Document(id=...) or metadata['source'], LlamaIndex "
                "Document(id_=...) or filename_as_id=True, from_texts(ids=...)), or delete "
                f"the old version first: delete({list(olds)!r}); or, if they are different "
                "documents, IndexConfig(unnamed_edits='add'). Nothing was written.",
                new=doc_id,
                stored=olds,
            )
