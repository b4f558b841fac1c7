"""documents -> chunks -> extraction -> graph (docs/method.md §1).

The engine runs the extraction steps (one ``Ask`` per chunk) through an LLM or the rule-based
extractor, then :func:`prepare` embeds a batch's chunks and new names and :func:`graph_of`
turns them into nodes and edges, merging entities into the store's (docs/method.md §1).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .config import IndexConfig
from .errors import ExtractionError, InvalidDocumentError, LLMError, LLMOutputError
from .extract_rules import rule_based_extraction
from .ids import anchor_of, chunk_id, contains_edge_of, edge_id, entity_id, hex_id, norm_name
from .progress import offset_progress
from .prompts import EXTRACTION_PROMPT, Extraction, parse_extraction
from .protocols import Embedder
from .steps import Ask, Step, embed_checked
from .store import BatchSearchStore, GraphStore, find_entities
from .text import chunk_text, count_tokens, first_sentence
from .types import Chunk, Document, Edge, Node, NodeKind, Piece

MENTION_TEXT = "is mentioned in"
CONTEXT_TEXT = "continues in the next chunk"


SOURCE_KEYS = ("source", "file_path")
"""Where loaders name the file a document came from: LangChain's ``source``, LlamaIndex's
``file_path`` (``SimpleDirectoryReader``)."""


LIBRARY_KEY = "remindrag"
"""The metadata key the library keeps its own values under (``results.NAMESPACE``): a stored
chunk of a document given in pieces records there which piece it is (``"piece"``)."""

PIECE_SEPARATOR = "\n\n"  # between the pieces of a document's text


def content_hash(doc: Document) -> str:
    if doc.pieces:
        shape = [[p.text, list(p.at) if p.at else None] for p in doc.pieces]
        return "pieces-" + hashlib.sha256(json.dumps(shape).encode("utf-8")).hexdigest()
    return hashlib.sha256(doc.text.encode("utf-8")).hexdigest()


def canonical_source(value: str) -> str:
    """A document id made from a path, the same however the path was spelled: the resolved
    absolute path (``~`` expanded, symbolic links followed) when ``value`` names an existing
    file or folder, relative paths read from the current folder; anything else (a URL, a
    name, a file that is gone) unchanged."""
    if "://" in value:
        return value
    try:
        path = os.path.expanduser(value)
        if os.path.exists(path):
            return os.path.realpath(path)
    except (OSError, ValueError):  # a name no file system takes: not a path
        pass
    return value


def path_spellings(value: str) -> list[str]:
    """Ids ``value`` may stand for as a path, the file gone or not: itself, then its
    absolute and resolved forms (how :meth:`Engine.delete` finds a document by a path)."""
    out = [value, canonical_source(value)]
    if "://" not in value:
        try:
            path = os.path.expanduser(value)
            out += [os.path.abspath(path), os.path.realpath(path)]
        except (OSError, ValueError):
            pass
    return list(dict.fromkeys(out))


def of_pieces(doc_id: str, pieces: Sequence[Piece], aliases: Sequence[str] = ()) -> Document:
    """One document of its pieces: the text joined, the metadata all pieces share (a key with
    another value in one piece, such as a page number, is each piece's own)."""
    metas = [{k: v for k, v in p.metadata.items() if k != LIBRARY_KEY} for p in pieces]
    shared = dict(metas[0]) if metas else {}
    for m in metas[1:]:
        shared = {k: v for k, v in shared.items() if k in m and m[k] == v}
    text = PIECE_SEPARATOR.join(p.text for p in pieces)
    return Document(doc_id, text, shared, tuple(pieces), tuple(aliases))


def stored_pieces(chunks: Sequence[Chunk]) -> list[Piece] | None:
    """The pieces a stored document was given in, read back from its chunks (``None``: it
    was given whole). A piece chunked in several parts is put back together."""
    parts: dict[int, list[tuple[Chunk, dict[str, Any]]]] = {}
    for c in chunks:
        own = c.metadata.get(LIBRARY_KEY)
        info = own.get("piece") if isinstance(own, dict) else None
        if not isinstance(info, dict):
            return None
        parts.setdefault(int(info["n"]), []).append((c, info))
    out = []
    for n in sorted(parts):
        group = parts[n]
        first, info = group[0]
        offset = int(info["offset"])
        size = max(c.end for c, _ in group) - offset
        buf = [" "] * size
        for c, _ in group:
            buf[c.start - offset : c.end - offset] = c.text
        meta = dict(first.metadata)
        own = {k: v for k, v in meta.pop(LIBRARY_KEY).items() if k != "piece"}
        if own:
            meta[LIBRARY_KEY] = own
        at, parent = info.get("at"), info.get("parent")
        out.append(
            Piece(
                "".join(buf),
                meta,
                (int(at[0]), int(at[1])) if at else None,
                (str(parent[0]), str(parent[1])) if parent else None,
            )
        )
    return out


def stored_document(doc_id: str, chunks: Sequence[Chunk]) -> Document:
    """A stored document put back together from its chunks: given in pieces, the pieces
    joined (:func:`of_pieces`); given whole, its text from the chunks' places in it
    (characters no chunk holds, such as line breaks between chunks, as spaces) and its
    metadata."""
    pieces = stored_pieces(chunks)
    if pieces:
        return of_pieces(doc_id, pieces)
    ordered = sorted(chunks, key=lambda c: c.index)
    size = max(c.end for c in ordered)
    buf = [" "] * size
    for c in ordered:
        buf[c.start : c.end] = c.text
    meta = {k: v for k, v in ordered[0].metadata.items() if k != LIBRARY_KEY}
    return Document(doc_id, "".join(buf).strip(), meta)


def source_of(metadata: Any) -> str | None:
    """The file a loader's document came from (``source``, else ``file_path``), if named."""
    for key in SOURCE_KEYS:
        value = metadata.get(key) if isinstance(metadata, dict) else None
        if isinstance(value, str) and value.strip():
            return value
    return None


def describe(doc_id: Any, metadata: Any) -> str:
    """A document as errors and reports name it: its id, and the file it came from."""
    source = source_of(metadata)
    return f"document {doc_id!r}" + (f" ({source})" if source and source != doc_id else "")


def screen(docs: Sequence[Document]) -> tuple[list[Document], tuple[str, ...], int]:
    """``(kept, empty, duplicates)``: documents with no text are left out (named by their
    source, else id) and a document given again (same id, same text) is kept once; one bad
    page does not fail the whole insert."""
    kept: list[Document] = []
    empty: list[str] = []
    first: dict[str, Document] = {}
    duplicates = 0
    for d in docs:
        if d.pieces:  # its text and metadata made of its pieces (the document's own: each's)
            for p in d.pieces:
                if not isinstance(p, Piece) or not isinstance(p.text, str):
                    raise InvalidDocumentError(
                        f"{describe(d.id, d.metadata)}: a piece must be a Piece(text: str, metadata: dict)"
                    )
                if not isinstance(p.metadata, dict):
                    raise InvalidDocumentError(
                        f"{describe(d.id, d.metadata)}: a piece's metadata must be a dict"
                    )
            given = [replace(p, metadata={**d.metadata, **p.metadata}) for p in d.pieces]
            kept_pieces, places = [], set()
            for p in given:
                if isinstance(p.text, str) and not p.text.strip():
                    empty.append(source_of(p.metadata) or str(d.id))
                elif (p.text, p.at) in places:  # the same piece twice (a page loaded twice)
                    duplicates += 1
                else:
                    places.add((p.text, p.at))
                    kept_pieces.append(p)
            if not kept_pieces:
                continue
            d = of_pieces(d.id, kept_pieces, d.aliases)
        if isinstance(d.text, str) and not d.text.strip():
            empty.append(source_of(d.metadata) or str(d.id))
            continue
        if isinstance(d.id, str) and d.id in first and first[d.id].text == d.text:
            duplicates += 1
            continue
        if isinstance(d.id, str):
            first.setdefault(d.id, d)
        kept.append(d)
    return kept, tuple(empty), duplicates


def as_documents(items: Iterable[Any]) -> list[Document]:
    """Accept :class:`Document`, plain strings, or ``(id, text[, metadata])`` tuples."""
    docs = []
    for i, item in enumerate(items):
        if isinstance(item, Document):
            doc = item
        elif isinstance(item, str):
            doc = Document(id="doc-" + hex_id(item, n=16), text=item)
        elif isinstance(item, tuple) and len(item) in (2, 3):
            doc = Document(str(item[0]), item[1], dict(item[2]) if len(item) == 3 else {})
        else:
            raise InvalidDocumentError(
                f"item {i}: cannot index a {type(item).__name__}; a document is a "
                "Document(id, text, metadata), a str, or an (id, text[, metadata]) tuple"
            )
        docs.append(doc)
    return docs


def validate(docs: Sequence[Document], cfg: IndexConfig) -> None:
    seen: set[str] = set()
    for d in docs:
        if not isinstance(d.id, str) or not d.id.strip():
            raise InvalidDocumentError("a document id must be a non-empty string")
        name = describe(d.id, d.metadata)
        texts = [p.text for p in d.pieces] if d.pieces else [d.text]
        for text in texts:  # a document given in pieces: each piece is checked
            if not isinstance(text, str):
                raise InvalidDocumentError(f"{name}: text must be a string")
            if not text.strip():
                raise InvalidDocumentError(f"{name} is empty")
            if len(text) > cfg.max_document_chars:
                raise InvalidDocumentError(
                    f"{name} has {len(text):,} characters, over max_document_chars="
                    f"{cfg.max_document_chars:,}; split it or raise the limit"
                )
        if d.id in seen:
            raise InvalidDocumentError(
                f"{name}: its id appears twice in one insert with different texts; give each "
                "document its own id"
            )
        seen.add(d.id)


def make_chunks(doc: Document, cfg: IndexConfig) -> list[Chunk]:
    """The document's chunks; a document given in pieces is chunked piece by piece (a piece
    within ``chunk_tokens`` is one chunk), each chunk with its piece's metadata and which
    piece it is (under :data:`LIBRARY_KEY`), offsets into the joined text."""
    parts = (
        [(doc.text, 0, dict(doc.metadata))] if not doc.pieces else list(_piece_parts(doc.pieces))
    )
    seen: dict[str, int] = {}
    out: list[Chunk] = []
    for whole, offset, meta in parts:
        for s in chunk_text(whole, cfg.chunk_tokens, cfg.chunk_overlap):
            text = whole[s.start : s.end]
            seen[text] = seen.get(text, -1) + 1
            cid = chunk_id(doc.id, text, seen[text])
            start, end = offset + s.start, offset + s.end
            out.append(Chunk(cid, doc.id, len(out), text, start, end, dict(meta)))
    return out


def _piece_parts(pieces: Sequence[Piece]) -> Iterable[tuple[str, int, dict[str, Any]]]:
    offset = 0
    for n, p in enumerate(pieces):
        own = p.metadata.get(LIBRARY_KEY)
        info = {
            "n": n,
            "offset": offset,
            "at": list(p.at) if p.at else None,
            "parent": list(p.parent) if p.parent else None,
        }
        mine = {**(own if isinstance(own, dict) else {}), "piece": info}
        yield p.text, offset, {**p.metadata, LIBRARY_KEY: mine}
        offset += len(p.text) + len(PIECE_SEPARATOR)


def extraction_step(
    chunk: Chunk, cfg: IndexConfig, template: str = EXTRACTION_PROMPT, use_llm: bool = True
) -> Step:
    """One chunk's extraction: the LLM is asked (one re-ask on an unparseable reply), or in
    zero-token mode the rule-based extractor runs. Returns ``(Extraction, fell_back)``."""
    if not use_llm:
        return rule_based_extraction(chunk.text, cfg.max_entities_per_chunk), False
    prompt = template.format(text=chunk.text)
    problem = ""
    for attempt in range(2):
        ask_prompt = (
            prompt
            if attempt == 0
            else (
                prompt
                + f"\nYour previous reply could not be used ({problem}). Reply with the JSON "
                "object only.\n"
            )
        )
        try:
            reply = yield Ask("extraction", ask_prompt, {"text": chunk.text})
            return parse_extraction(reply or "", cfg.max_entities_per_chunk), False
        except (LLMOutputError, LLMError) as exc:
            problem = str(exc)
    if cfg.on_extraction_error == "fallback":
        return rule_based_extraction(chunk.text, cfg.max_entities_per_chunk), True
    raise ExtractionError(
        f"chunk {chunk.id} of {describe(chunk.doc_id, chunk.metadata)}: {problem}"
    )


@dataclass
class GraphBatch:
    chunks: list[Chunk]
    nodes: list[Node] = field(default_factory=list)
    embeddings: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    edges: list[Edge] = field(default_factory=list)
    aliases: dict[str, list[str]] = field(default_factory=dict)
    entities_added: int = 0
    entities_merged: int = 0
    relations: int = 0


@dataclass
class Prepared:
    """What a batch's graph is built from, made before it (:func:`prepare`): its chunks'
    extractions and vectors, the names it brings that were not known (``pending``, normalised
    key and first spelling) and their vectors, the known ones (``resolve``), and the batch's
    source tokens when the extraction counted them. ``checked``: made against the store as it
    is when the graph is built (else :func:`graph_of` checks the names again)."""

    chunks: list[Chunk]
    found: list[Extraction]
    chunk_vecs: np.ndarray
    resolve: dict[str, str]
    pending: list[tuple[str, str]]
    name_vecs: np.ndarray
    tokens: int | None = None
    checked: bool = True


def prepare(
    chunks: Sequence[Chunk],
    extractions: Sequence[Extraction] | Callable[[], Sequence[Extraction]],
    store: GraphStore,
    embedder: Embedder,
    cfg: IndexConfig,
    progress: Callable[[int, int], None] | None = None,
    earlier: set[str] | None = None,
) -> Prepared:
    """A batch's embedding side: the chunk texts embedded first, then the entity names not
    yet known, each distinct string once; ``extractions`` may be a function that waits for
    them (:mod:`.workers`: the extraction runs while the chunks are embedded), called once the
    chunks are. ``earlier``: the normalised names of the batches before this one in the same
    insert, which may not be written yet (embedding ahead, :func:`.insert.ahead`): they are
    taken as known, this batch's names are added to it, and the result is not ``checked``."""
    texts = [c.text for c in chunks]
    first = offset_progress(progress, 0, len(texts) + 1)  # the names' count is known after
    chunk_vecs = embed_unique(embedder, texts, cfg.embed_batch_size, store.dim, first)
    found = list(extractions() if callable(extractions) else extractions)
    resolve, pending = _known_entities(found, store, earlier or ())
    if earlier is not None:
        earlier.update(_names_of(found))
    names = [name for _, name in pending]
    total = len(texts) + len(names)
    dim = store.dim or (chunk_vecs.shape[1] if len(chunk_vecs) else None)
    name_vecs = _embed_names(names, texts, chunk_vecs, embedder, cfg, dim, progress)
    if progress is not None:
        progress(total, total)
    return Prepared(
        list(chunks), found, chunk_vecs, resolve, pending, name_vecs, checked=earlier is None
    )


def graph_of(p: Prepared, store: GraphStore, embedder: Embedder, cfg: IndexConfig) -> GraphBatch:
    """The batch's nodes and edges from what :func:`prepare` made. A ``p`` made ahead is
    checked against the store first: its names are looked up again (the batches before it
    are written now); when the names new to the store are not the ones it embedded (a
    replaced document removed some, another writer added some), they are embedded again
    here, as one call, as the serial insert would have."""
    resolve, pending, name_vecs = p.resolve, p.pending, p.name_vecs
    if not p.checked:
        resolve, pending = _known_entities(p.found, store)
        if pending != p.pending:
            texts = [c.text for c in p.chunks]
            dim = store.dim or (p.chunk_vecs.shape[1] if len(p.chunk_vecs) else None)
            names = [name for _, name in pending]
            name_vecs = _embed_names(names, texts, p.chunk_vecs, embedder, cfg, dim, None)
    batch = GraphBatch(chunks=list(p.chunks))
    resolve = dict(resolve)
    ent_nodes, ent_vecs = _merge_entities(pending, name_vecs, store, cfg, batch, resolve)
    rows: list[np.ndarray] = []
    for c, x, vec in zip(p.chunks, p.found, p.chunk_vecs):
        a_id = anchor_of(c.id)
        title = x.title or first_sentence(c.text)
        batch.nodes += [
            Node(a_id, "anchor", title, c.doc_id, c.id),
            Node(c.id, "chunk", c.id, c.doc_id, c.id),
        ]
        rows += [vec, vec]
        batch.edges.append(Edge(contains_edge_of(c.id), a_id, c.id, "contains", title))
        batch.edges += _entity_edges(x, a_id, resolve, batch)
    batch.edges += _context_edges(p.chunks)
    batch.nodes += ent_nodes
    rows += list(ent_vecs)
    width = p.chunk_vecs.shape[1] if len(p.chunk_vecs) else (store.dim or 0)
    batch.embeddings = np.stack(rows) if rows else np.zeros((0, width), dtype=np.float32)
    batch.edges = list({e.id: e for e in batch.edges}.values())
    return batch


def _embed_names(
    names: list[str],
    texts: list[str],
    text_vecs: np.ndarray,
    embedder: Embedder,
    cfg: IndexConfig,
    dim: int | None,
    progress: Callable[[int, int], None] | None,
) -> np.ndarray:
    """The names' rows: a name that is also a chunk's whole text takes that chunk's row, the
    others are embedded (:func:`embed_unique`)."""
    known = {t: i for i, t in enumerate(texts)}
    fresh = [n for n in names if n not in known]
    vecs = embed_unique(
        embedder,
        fresh,
        cfg.embed_batch_size,
        dim,
        offset_progress(progress, len(texts), len(texts) + len(names)),
    )
    width = next((v.shape[1] for v in (vecs, text_vecs) if len(v)), dim or 0)
    if len(fresh) == len(names) and (len(names) or vecs.shape[1] == width):
        return vecs
    out = np.zeros((len(names), width), dtype=np.float32)
    at = {n: i for i, n in enumerate(fresh)}
    for i, n in enumerate(names):
        out[i] = text_vecs[known[n]] if n in known else vecs[at[n]]
    return out


def _entity_edges(
    x: Extraction, a_id: str, resolve: dict[str, str], batch: GraphBatch
) -> list[Edge]:
    edges = []
    for name in x.entities:
        eid = resolve[norm_name(name)]
        edges.append(Edge(edge_id("mention", eid, a_id), eid, a_id, "mention", MENTION_TEXT))
    for s, sentence, o in x.triples:
        u, v = resolve[norm_name(s)], resolve[norm_name(o)]
        if u == v:
            continue
        a, b = sorted((u, v))
        edges.append(Edge(edge_id("relation", a, b, sentence), u, v, "relation", sentence))
        batch.relations += 1
    return edges


def _context_edges(chunks: Sequence[Chunk]) -> list[Edge]:
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    edges = []
    for doc_chunks in by_doc.values():
        doc_chunks.sort(key=lambda c: c.index)
        for prev, nxt in zip(doc_chunks, doc_chunks[1:]):
            a, b = anchor_of(prev.id), anchor_of(nxt.id)
            edges.append(Edge(edge_id("context", a, b), a, b, "context", CONTEXT_TEXT))
    return edges


def embed_unique(
    embedder: Embedder,
    texts: Sequence[str],
    batch_size: int,
    dim: int | None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """:func:`embed_checked` of each distinct text once, shortest first (batches of similar
    length pad little), rows returned in the order of ``texts``."""
    index: dict[str, int] = {}
    where = [index.setdefault(t, len(index)) for t in texts]
    unique = sorted(index, key=len)
    vecs = embed_checked(embedder, unique, batch_size, dim, progress)
    pos = {t: i for i, t in enumerate(unique)}
    order = np.array([pos[t] for t in index], dtype=np.int64)  # first-seen -> sorted row
    if not len(vecs):
        return vecs
    return vecs[order[np.asarray(where, dtype=np.int64)]]


def _names_of(extractions: Sequence[Extraction]) -> dict[str, str]:
    """Each normalised name of the extractions with the spelling first seen, in order."""
    names: dict[str, str] = {}
    for x in extractions:
        for n in [*x.entities, *(t[0] for t in x.triples), *(t[2] for t in x.triples)]:
            names.setdefault(norm_name(n), n)
    return names


def _known_entities(
    extractions: Sequence[Extraction], store: GraphStore, earlier: Collection[str] = ()
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Normalised names already in the store (exact match), and the others in first-seen
    order with the spelling first seen; names in ``earlier`` are neither (their batch is
    not written yet: :func:`graph_of` looks them up)."""
    names = _names_of(extractions)
    known = find_entities(store, list(names))  # one read for the batch
    resolve: dict[str, str] = {}
    pending = []
    for key, name in names.items():
        existing = known.get(key)
        if existing:
            resolve[key] = existing
        elif key not in earlier:
            pending.append((key, name))
    return resolve, pending


def _merge_entities(
    pending: list[tuple[str, str]],
    vecs: np.ndarray,
    store: GraphStore,
    cfg: IndexConfig,
    batch: GraphBatch,
    resolve: dict[str, str],
) -> tuple[list[Node], np.ndarray]:
    """Each pending name becomes a new entity or merges into the most similar one with cosine
    ≥ ``synonym_threshold``: the store's entities (one batched search) or this batch's earlier
    ones (blocked matrix products), which win a tie. Returns the new nodes and their rows."""
    store_best = search_many(store, vecs, ("entity",))
    targets = synonym_targets(vecs, store_best, cfg.synonym_threshold)
    new_nodes: list[Node] = []
    node_of: dict[int, str] = {}
    for i, ((key, name), target) in enumerate(zip(pending, targets)):
        if target is None:
            node_of[i] = entity_id(name)
            new_nodes.append(Node(node_of[i], "entity", name))
            resolve[key] = node_of[i]
            batch.entities_added += 1
            continue
        tid = node_of[target] if isinstance(target, int) else target
        resolve[key] = tid
        batch.aliases.setdefault(tid, []).append(name)
        batch.entities_merged += 1
    for node_i, node in enumerate(new_nodes):  # aliases of new entities go on the node
        extra = batch.aliases.pop(node.id, [])
        if extra:
            new_nodes[node_i] = Node(node.id, "entity", node.name, aliases=tuple(extra))
    rows = sorted(node_of)
    return new_nodes, vecs[rows] if rows else vecs[:0]


def search_many(
    store: GraphStore, vecs: np.ndarray, kinds: tuple[NodeKind, ...]
) -> list[tuple[str, float] | None]:
    """The best node of ``kinds`` for each row: the store's ``search_many`` when it has one
    (one batched search), else one ``search`` per row."""
    if isinstance(store, BatchSearchStore):
        found = store.search_many(vecs, 1, kinds)
    else:
        found = [store.search(v, 1, kinds) for v in vecs]
    return [hits[0] if hits else None for hits in found]


Target = str | int | None  # a store entity id, the index of an earlier accepted row, or new


def synonym_targets(
    vecs: np.ndarray,
    store_best: Sequence[tuple[str, float] | None],
    threshold: float,
    block: int = 512,
) -> list[Target]:
    """For each row in order: the store entity or earlier accepted row it merges into (the
    higher cosine ≥ ``threshold``; an accepted row wins a tie, the earliest among equals), or
    None when it is accepted as new. Rows are compared block by block with matrix products;
    within a block only the rows with an earlier row of the block at ``threshold`` or more
    are decided one by one (the others' decisions do not depend on the block's order)."""
    n = len(vecs)
    targets: list[Target] = [None] * n
    accepted: list[int] = []
    for start in range(0, n, block):
        blk = vecs[start : start + block]
        size = len(blk)
        # the block against the rows accepted before it: the best one per row (earliest of equals)
        best_sim, best_row = [-np.inf] * size, [-1] * size
        if accepted:
            prior = blk @ vecs[accepted].T
            j = np.argmax(prior, axis=1)
            best_sim = prior[np.arange(size), j].astype(np.float64).tolist()
            best_row = np.asarray(accepted, dtype=np.int64)[j].tolist()
        inner = blk @ blk.T
        earlier = np.tri(size, size, -1, dtype=bool)  # row r sees rows < r of the block
        near = (
            np.where(earlier, inner, -np.inf).max(axis=1).astype(np.float64) >= threshold
        ).tolist()
        is_new = np.zeros(size, dtype=bool)
        for r in range(size):
            hit = store_best[start + r]
            best_id: Target = None
            best = threshold
            if hit is not None and hit[1] >= best:
                best_id, best = hit
            sim, row = best_sim[r], best_row[r]
            if near[r]:  # an accepted row of this block may be the nearer one
                inside = np.flatnonzero(is_new[:r])
                if len(inside):
                    k = int(inside[np.argmax(inner[r, inside])])
                    if float(inner[r, k]) > sim:
                        sim, row = float(inner[r, k]), start + k
            if row >= 0 and sim >= best:
                best_id = row
            targets[start + r] = best_id
            is_new[r] = best_id is None
        accepted += [start + int(r) for r in np.flatnonzero(is_new)]
    return targets


def source_tokens(chunks: Sequence[Chunk]) -> int:
    return sum(count_tokens(c.text) for c in chunks)
