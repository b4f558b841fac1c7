"""Documents named by their content (no id, no source): the same text is the same document,
and an edit of one is refused rather than stored beside its old version (docs/retriever.md,
"Document ids").

A document given without an id and without a loader's ``source`` gets the id ``doc-`` + a
hash of its text (:func:`derived`). Given again unchanged it is the same document (skipped);
changed, it would be a second document with the old version still stored and returned. An
edit cannot be told from a new document by its name, so before anything is written the
passages of such a new document are compared with the passages of the stored documents that
are also named by their content: a passage sharing at least :data:`SAME_PASSAGE` of its words
(Jaccard, as an edited chunk inherits memory in :mod:`.memory.carry`) with one of theirs is
an edit, and the insert raises :class:`DocumentIdentityError` naming both documents. Short
passages (under :data:`MIN_WORDS` distinct words: FAQ lines, titles) are never compared.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from .errors import DocumentIdentityError
from .ids import hex_id
from .store import ChunkBatchStore, GraphStore, LexicalStore
from .text import overlap, words
from .types import Chunk, Document

DERIVED = re.compile(r"^doc-[0-9a-f]{16}$")
"""The form of an id made from a document's content (:func:`derived`)."""
MIN_WORDS = 12
"""Passages with fewer distinct words are not compared (two short lines share most words)."""
SAME_PASSAGE = 0.5
"""Least word overlap (Jaccard) of two passages taken for one edited (as
:data:`.memory.carry.SAME_PASSAGE`)."""
CANDIDATES = 5
"""Stored passages read per new passage (the lexical search's best)."""


def derived(text: str) -> str:
    """The id of a document named by its content."""
    return "doc-" + hex_id(text, n=16)


def _excerpt(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def refuse_unnamed_edits(
    store: GraphStore,
    fresh: Sequence[Document],
    chunks: Sequence[Chunk],
    named: Collection[str],
) -> None:
    """Raise :class:`DocumentIdentityError` when a new document named by its content has a
    passage that overlaps a passage of another stored document named by its content (one not
    given in this insert). Costs nothing when the insert has no such document or the store
    holds none; else one lexical search per new passage."""
    new = {d.id for d in fresh if DERIVED.match(d.id) and store.document_hash(d.id) is None}
    if not new or not isinstance(store, LexicalStore):
        return
    given = set(named)
    stored = {d for d in store.document_ids() if DERIVED.match(d) and d not in given}
    if not stored:
        return
    for c in chunks:
        if c.doc_id not in new:
            continue
        mine = words(c.text)
        if len(mine) < MIN_WORDS:
            continue
        hits = [cid for cid, _ in store.lexical_search(c.text, CANDIDATES)]
        found = (
            store.get_chunks(hits)
            if isinstance(store, ChunkBatchStore)
            else [store.get_chunk(h) for h in hits]
        )
        for old in found:
            if old.doc_id not in stored:
                continue
            theirs = words(old.text)
            if len(theirs) >= MIN_WORDS and overlap(mine, theirs) >= SAME_PASSAGE:
                raise DocumentIdentityError(
                    f"a document without an id or source ({c.doc_id}, "
                    f"{_excerpt(c.text)!r}) overlaps stored document {old.doc_id} "
                    f"({_excerpt(old.text)!r}), which has none either: an edit of a document "
                    "without an id cannot be told from a new one. Give documents ids "
                    "(LangChain Document(id=...) or metadata['source'], LlamaIndex "
                    "Document(id_=...) or filename_as_id=True, from_texts(ids=...)), or "
                    f"delete the old version first: delete([{old.doc_id!r}]). Nothing was "
                    "written.",
                    new=c.doc_id,
                    stored=(old.doc_id,),
                )
