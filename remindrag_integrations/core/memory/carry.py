"""What memory a changed document keeps (re-inserting a document id with new text).

- A chunk whose text did not change keeps its id (:func:`..ids.chunk_id` hashes the chunk's
  own text), so its anchor, its edges and their memory stay as they are.
- An edited chunk that is still the same passage inherits the memory of its predecessor: the
  removed chunk of the same document whose words overlap most with it, when the overlap
  (Jaccard of the two word sets) is at least :data:`SAME_PASSAGE`; each removed chunk passes
  its memory to at most one new chunk (best pairs first, then the nearer position).
- An edge of the removed chunk or anchor moves to the new edge with the same kind between the
  corresponding ends (contains, context, mention; a learned edge is made anew at the new
  anchor). The store applies the moves in the same atomic step that replaces the document
  (``GraphStore.add_graph(memory_moves=...)``); memory with nowhere to go is dropped with its
  edge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..ids import anchor_of, edge_id
from ..indexing import canonical_source, source_of
from ..store import GraphStore
from ..text import overlap, words
from ..types import Chunk, Edge

SAME_PASSAGE = 0.5  # least word overlap (Jaccard) of an edited chunk and its predecessor


def match_chunks(old: Sequence[Chunk], new: Sequence[Chunk]) -> dict[str, str]:
    """Removed chunk id -> the new chunk that inherits its memory (one document's chunks;
    unchanged chunks, present in both, are left out)."""
    new_ids = {c.id for c in new}
    old_ids = {c.id for c in old}
    gone = [c for c in old if c.id not in new_ids]
    fresh = [c for c in new if c.id not in old_ids]
    fw = {c.id: words(c.text) for c in fresh}
    pairs = []
    for o in gone:
        ow = words(o.text)
        for n in fresh:
            sim = overlap(ow, fw[n.id])
            if sim >= SAME_PASSAGE:
                pairs.append((-sim, abs(o.index - n.index), o.id, n.id))
    out: dict[str, str] = {}
    taken: set[str] = set()
    for _, _, o_id, n_id in sorted(pairs):
        if o_id not in out and n_id not in taken:
            out[o_id] = n_id
            taken.add(n_id)
    return out


def moves(
    store: GraphStore,
    changed: Sequence[str] | Mapping[str, Sequence[str]],
    chunks: Sequence[Chunk],
    edges: Sequence[Edge],
) -> tuple[dict[str, str], list[Edge]]:
    """For documents being replaced: old edge id -> new edge id for every edge of a removed
    chunk or anchor that has a successor, and the learned edges to make anew (they are not
    part of the new batch). ``chunks`` and ``edges`` are the new batch's. ``changed`` names
    the replaced documents, or maps each new document to the stored ones it replaces (its
    own old version and older ids of it: their chunks are matched as one document's)."""
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    olds = changed if isinstance(changed, Mapping) else {d: [d] for d in changed}
    nodes: dict[str, str] = {}
    removed: set[str] = set()
    fresh = {x for c in chunks for x in (c.id, anchor_of(c.id))}
    for doc, replaced in olds.items():
        old = [c for d in replaced for c in store.document_chunks(d)]
        removed |= {x for c in old for x in (c.id, anchor_of(c.id))} - fresh
        for o, n in match_chunks(old, by_doc.get(doc, [])).items():
            nodes[o], nodes[anchor_of(o)] = n, anchor_of(n)
    batch = {(e.kind, frozenset((e.u, e.v))): e.id for e in edges}
    out: dict[str, str] = {}
    made: list[Edge] = []
    for node in nodes:
        for e in store.neighbors(node):
            u, v = nodes.get(e.u, e.u), nodes.get(e.v, e.v)
            if e.id in out:
                continue
            new = batch.get((e.kind, frozenset((u, v))))
            if new is None and e.kind == "learned" and not {u, v} & removed:
                link = Edge(edge_id("learned", u, v), u, v, "learned", e.text)
                made.append(link)
                new = link.id
            if new is not None and new != e.id:
                out[e.id] = new
    return out, made


def to_siblings(store: GraphStore, doomed: Sequence[str]) -> dict[str, str]:
    """Old edge id -> edge id, for documents about to be deleted whose file (``source``) keeps
    other stored documents: each removed chunk passes its memory to the most similar chunk of
    those (:func:`match_chunks`), as an edited chunk does. LangChain's ``index()`` stores each
    piece of a file as a document of its own and deletes the pieces an edit replaced after
    adding their new versions: this is how their memory carries over. Only edges that exist
    at both ends are mapped; ``{}`` when no deleted document has such siblings. Deleting a
    document named by its file (or by nothing) reads nothing more than its chunks; else the
    stored documents' metadata is read once."""
    gone = set(doomed)
    own: dict[str, str] = {}  # a doomed document's file, when it is not named by that file
    read = {d: store.document_chunks(d) for d in gone}  # read once, reused below
    for d, chunks in read.items():
        src = source_of(chunks[0].metadata) if chunks else None
        if src and d not in (src, canonical_source(src)):
            own[d] = src
    if not own:  # documents named by their file (or by nothing): no siblings to read
        return {}
    listed = getattr(store, "documents", None)  # the shipped stores: (hash, metadata) by id
    if callable(listed):
        metas = {d: meta for d, (_, meta) in listed().items()}
    else:  # any other store: a document's metadata from its first chunk
        metas = {
            d: (chunks[0].metadata if (chunks := store.document_chunks(d)) else {})
            for d in store.document_ids()
        }
    sources = set(own.values())
    nodes: dict[str, str] = {}
    for src in sources:
        family = [d for d, meta in metas.items() if source_of(meta) == src]
        old = [c for d in family if d in gone for c in read[d]]
        new = [c for d in family if d not in gone for c in store.document_chunks(d)]
        if not old or not new:
            continue
        for o, n in match_chunks(old, new).items():
            nodes[o], nodes[anchor_of(o)] = n, anchor_of(n)
    out: dict[str, str] = {}
    for node, target in nodes.items():
        theirs = {(e.kind, frozenset((e.u, e.v))): e.id for e in store.neighbors(target)}
        for e in store.neighbors(node):
            u, v = nodes.get(e.u, e.u), nodes.get(e.v, e.v)
            new_id = theirs.get((e.kind, frozenset((u, v))))
            if new_id is not None and new_id != e.id and e.id not in out:
                out[e.id] = new_id
    return out
