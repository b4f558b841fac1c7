"""The first pass's prior: what the graph knows about a question before any memory exists.

Three signals per chunk, fused into one score that the seeds, the navigator (zero-token and
the LLM's ordering of choices and its suggestion) and the final ranking all read:

- dense: cosine of the question to the chunk (its anchor's embedding);
- lexical: BM25 of the question over the chunk texts, scaled to the best hit (hybrid seeds
  see what words find and embeddings miss: names, numbers, rare terms);
- graph: personalised PageRank mass on the chunk's anchor, spreading from the question's
  entities (linked by name, weighted by specificity: 1 / chunks that mention them; from the
  best hybrid passages when the question names none), over entities, anchors and the edges
  between them (the whole graph when the store keeps it as a matrix, else the question's
  local neighbourhood), scaled to the best anchor.

``score = cosine + prior.lexical_weight · lexical + prior.graph_weight · s · graph``, where
``s`` is 1 unless the question names only common entities (:func:`graph_scale`); the parts are
kept for the trace. The zero-token ranking adds the title hop (:func:`title_hop`: the pages
the best passage names by their title) and the dense seat (``prior.dense_seat``,
``core/pipeline.py``). Pure functions over a :class:`~.walk.Walk`
(its cached store reads).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from . import pagerank, push
from .config import RetrievalConfig
from .entity_words import FUNCTION_WORDS
from .errors import StoreError
from .extract_rules import question_links
from .ids import anchor_of, chunk_of, is_anchor, is_chunk, is_entity, norm_name
from .store import GraphMatrixView, LexicalStore, MatrixStore, find_entities
from .types import Chunk
from .walk import Prior, Walk


def is_name(text: str) -> bool:
    """Whether a span can be a name: it has a word that is not a function word (the
    extractor's :data:`.entity_words.FUNCTION_WORDS`: one list decides it everywhere)."""
    return any(w not in FUNCTION_WORDS for w in norm_name(text).split())


def first_pass(walk: Walk, chunk_ids: Sequence[str], cosines: Sequence[float]) -> list[float]:
    """Each chunk's first-pass score: its fused prior score when it is a candidate, else its
    cosine plus its anchor's graph mass; the cosine alone without a prior."""
    p = walk.prior
    if p is None:
        return [float(x) for x in cosines]
    g = walk.cfg.prior.graph_weight * p.graph_scale
    return [
        p.score[c] if c in p.score else x + g * p.graph.get(anchor_of(c), 0.0)
        for c, x in zip(chunk_ids, cosines)
    ]


def question_entities(walk: Walk, names: Sequence[str], name_vecs: np.ndarray) -> dict[str, float]:
    """Graph entities the question names, with restart weight similarity × specificity (1 /
    the chunks that mention it): for each name the offline extractor finds in the question,
    the entity of that exact name (similarity 1), else the nearest entity by embedding.
    (Looking up every word span of the question by exact name was tried and lost: it links
    common nouns that happen to be entities.)"""
    found: dict[str, float] = {}
    known = find_entities(walk.store, [norm_name(n) for n in names])  # one read
    for name, vec in zip(names, name_vecs):
        exact = known.get(norm_name(name))
        hits = [(exact, 1.0)] if exact is not None else walk.reads.search(vec, 1, ("entity",))
        for node, sim in hits:
            found[node] = max(found.get(node, 0.0), float(sim))
    cap = walk.cfg.prior.max_degree
    out = {}
    for node, sim in found.items():
        mentions = _mentions(walk, node)
        if 0 < mentions <= cap:
            out[node] = max(sim, 1e-6) / mentions
    return out


def _mentions(walk: Walk, entity: str) -> int:
    """How many chunks mention ``entity`` (its specificity is the inverse)."""
    return sum(1 for e in walk.reads.neighbors(entity) if e.kind == "mention")


def hybrid(walk: Walk, query: str) -> tuple[dict[str, float], dict[str, float]]:
    """(dense cosine, lexical score scaled to the best) of the candidate chunks: the top
    ``prior.candidates`` of each search."""
    n = walk.cfg.prior.candidates
    dense = {chunk_of(a): s for a, s in walk.reads.search(walk.q_hat, n, ("anchor",))}
    lex: dict[str, float] = {}
    if walk.cfg.prior.lexical_weight > 0 and isinstance(walk.store, LexicalStore):
        hits = walk.store.lexical_search(query, n, where=walk.cfg.filter)
        top = max((s for _, s in hits), default=0.0)
        lex = {c: s / top for c, s in hits if top > 0}
    missing = [c for c in lex if c not in dense]
    for c, s in zip(missing, walk.reads.sims([anchor_of(c) for c in missing])):
        dense[c] = s
    return dense, lex


def neighbourhood(walk: Walk, start: Sequence[str]) -> list[str]:
    """Entities and anchors within ``prior.hops`` of ``start``, breadth first, at most
    ``prior.max_nodes``; hub entities (more than ``prior.max_degree`` edges) are reached but
    not expanded. The edges of a hop are one store call (one round trip on PostgreSQL)."""
    cfg = walk.cfg
    nodes, seen, frontier = list(start), set(start), list(start)
    for _ in range(cfg.prior.hops):
        walk.reads.prefetch_edges(frontier)
        nxt: list[str] = []
        room = cfg.prior.max_nodes - len(nodes)
        for u in frontier:
            if len(nxt) >= room:
                break
            edges = walk.reads.neighbors(u)
            if is_entity(u) and len(edges) > cfg.prior.max_degree:
                continue
            for e in edges:
                w = e.v if u == e.u else e.u  # e.other(u), inlined: the hot loop
                if w not in seen and not is_chunk(w) and len(nxt) < room:
                    seen.add(w)
                    nxt.append(w)
        if walk.reads.filter is not None:  # never through a filtered-out document's anchors
            nxt = [w for w, ok in zip(nxt, walk.reads.allowed(nxt)) if ok]
        nodes += nxt
        frontier = nxt
    return nodes


def spread(
    walk: Walk, restart: dict[str, float], seen: push.Local | None = None
) -> dict[str, float]:
    """Personalised PageRank from ``restart``: the forward push of :mod:`.push` (the best
    ``prior.candidates`` anchors and the entities it reaches) unless ``prior.push_epsilon``
    is 0, then the power iteration of :mod:`.pagerank`. Either runs over the store's
    whole-graph matrix when it keeps one (the embedded store; not under a metadata filter),
    else over the walk's reads: the push reads as it goes (``seen``: what earlier pushes of
    the same query read, the feedback rounds'), the power iteration reads the local
    :func:`neighbourhood`. The mass of the anchors (and, locally, the entities) it reaches."""
    cfg = walk.cfg.prior
    matrix = whole_graph(walk)
    if cfg.push_epsilon > 0:
        if matrix is not None:  # a read: a slice of the matrix's rows
            mass = push.push(pagerank.Links.of_matrix(matrix, cfg.max_degree), restart, cfg)
        else:
            mass = push.push(seen if seen is not None else push.Local(walk), restart, cfg)
        return push.top_anchors(mass, cfg.candidates)
    if matrix is None:
        return spread_local(walk, restart)
    links = pagerank.Links.of_matrix(matrix, cfg.max_degree)
    x = pagerank.pagerank(links, restart, cfg.damping, cfg.iterations)
    mass = x[matrix.anchors]
    n = min(cfg.candidates, int((mass > 0).sum()))
    if n == 0:
        return {}
    top = np.argpartition(-mass, n - 1)[:n]
    return {matrix.ids[matrix.anchors[i]]: float(mass[i]) for i in top}


def whole_graph(walk: Walk) -> GraphMatrixView | None:
    """The store's whole-graph matrix (:class:`~.store.MatrixStore`), unless a metadata
    filter narrows the graph. A matrix without the data the prior spreads over is a
    :class:`~.errors.StoreError` naming what to give."""
    store = walk.store
    if walk.reads.filter is not None or not isinstance(store, MatrixStore):
        return None
    matrix = store.graph_matrix()
    if not isinstance(matrix, GraphMatrixView):
        raise StoreError(
            f"{type(store).__name__}.graph_matrix() gave a {type(matrix).__name__}, not a "
            "core.store.GraphMatrixView (ids, pos, adjacency, degree, anchors, entities; "
            "docs/stores.md)"
        )
    return matrix


def spread_local(walk: Walk, restart: dict[str, float]) -> dict[str, float]:
    """Personalised PageRank (damping ``prior.damping``, ``prior.iterations`` steps) from
    ``restart`` over its :func:`neighbourhood`; the mass of every node. Edges are those read
    while expanding (mass that reaches the outermost ring, whose edges are not read, leaks)."""
    nodes = neighbourhood(walk, list(restart))
    pos = {n: i for i, n in enumerate(nodes)}
    count: list[int] = []
    flat: list[int] = []
    for u in nodes:
        edges = walk.reads.cached_neighbors(u) or []
        before = len(flat)
        if not is_entity(u) or len(edges) <= walk.cfg.prior.max_degree:  # a hub spreads nothing:
            for e in edges:  # what reaches it is lost, as it says little
                j = pos.get(e.v if u == e.u else e.u)
                if j is not None:
                    flat.append(j)
        count.append(len(flat) - before)
    cfg = walk.cfg.prior
    links = pagerank.Links.of_rows(nodes, pos, count, flat)
    x = pagerank.pagerank(links, restart, cfg.damping, cfg.iterations)
    return {n: float(v) for n, v in zip(nodes, x) if v > 0}


def restart_mass(
    first: dict[str, float], ents: dict[str, float], cfg: RetrievalConfig
) -> dict[str, float]:
    """Where the PageRank restarts: the question's entities, plus the best
    ``prior.restart_passages`` hybrid passages (their anchors) in proportion to their positive
    score, with ``prior.passage_restart`` times the entities' mass (all of it when the question
    names no graph entity)."""
    restart = dict(ents)
    total = sum(ents.values())
    ranked = sorted(first, key=lambda c: (-first[c], c))[: cfg.prior.restart_passages]
    top = [c for c in ranked if first[c] > 0]
    scale = sum(first[c] for c in top)
    mass = cfg.prior.passage_restart * total if total else 1.0
    if scale > 0 and mass > 0:
        for c in top:
            restart[anchor_of(c)] = restart.get(anchor_of(c), 0.0) + mass * first[c] / scale
    return restart


def feedback_restart(
    walk: Walk,
    scores: dict[str, float],
    ents: dict[str, float],
    used: set[str] | None = None,
    known: Collection[str] = (),
) -> dict[str, float]:
    """Restart mass for a feedback round: the entities mentioned by the best
    ``prior.feedback_passages`` passages of the round before (not among ``used``: passages an
    earlier round read) that are neither the question's nor ``known`` (restarts of earlier
    rounds) and lead somewhere (mentioned by 2 to
    ``prior.max_degree`` chunks), each weighted by its passage's share of their scores ×
    specificity (1 / mentions), scaled to ``prior.feedback`` × the question entities' mass (1
    when the question names none). The passages read are added to ``used``."""
    cfg = walk.cfg
    used = set() if used is None else used
    fresh = [c for c in scores if c not in used]
    top = sorted(fresh, key=lambda c: (-scores[c], c))[: cfg.prior.feedback_passages]
    top = [c for c in top if scores[c] > 0]
    used.update(top)
    total = sum(scores[c] for c in top)
    if not top or total <= 0:
        return {}
    found: dict[str, float] = {}
    anchors = [anchor_of(c) for c in top]
    walk.reads.prefetch_edges(anchors)
    for c, a in zip(top, anchors):
        for e in walk.reads.neighbors(a):
            ent = e.other(a)
            if e.kind == "mention" and ent not in ents and ent not in known:
                found[ent] = found.get(ent, 0.0) + scores[c] / total
    walk.reads.prefetch_edges(list(found))
    out = {}
    for ent, share in found.items():
        mentions = _mentions(walk, ent)
        if 2 <= mentions <= cfg.prior.max_degree:
            out[ent] = share / mentions
    scale = sum(out.values())
    if scale <= 0:
        return {}
    mass = cfg.prior.feedback * (sum(ents.values()) or 1.0)
    return {n: mass * v / scale for n, v in out.items()}


def feedback_rounds(query: str, names: Sequence[str], cfg: RetrievalConfig) -> int:
    """How many feedback rounds a question gets: ``prior.feedback_rounds``, or with
    ``prior.feedback_by_links`` as many as the links it chains (at least one, at most
    ``prior.feedback_rounds``): a question with one link ("the city where X was born") is two
    hops and needs the bridge of one round; each further link is one more hop."""
    if not cfg.prior.feedback_by_links:
        return cfg.prior.feedback_rounds
    return max(1, min(cfg.prior.feedback_rounds, question_links(query, tuple(names))))


TITLE_CHARS = 100
"""A document's first line longer than this is text, not a title (:func:`title_of`)."""
TITLE_BELOW = 1e-6
"""How far below the best passage a page it names stays at most (:func:`title_hop`): the second
hop ranks after the first."""
TITLE_PAGES = 8
"""Titles the best passage names that :func:`title_hop` weighs at most (the best-ranked
passages first): a list page naming hundreds of titles costs a query no more than this."""


def title_of(chunk: Chunk) -> str:
    """The title of a passage's document: its metadata ``title``, else the first line of the
    document's first chunk when text follows it and it is short (at most
    :data:`TITLE_CHARS`) and a name (:func:`is_name`); "" when it has none."""
    title = chunk.metadata.get("title") if chunk.metadata else None
    if isinstance(title, str) and title.strip():
        return title.strip()
    if chunk.index != 0:
        return ""
    head, newline, rest = chunk.text.lstrip().partition("\n")
    head = head.strip()
    if newline and rest.strip() and len(head) <= TITLE_CHARS and is_name(head):
        return head
    return ""


def names_title(text: str, title: str) -> bool:
    """Whether ``text`` holds ``title`` as whole words (case as written)."""
    return title in text and re.search(rf"(?<!\w){re.escape(title)}(?!\w)", text) is not None


def title_hop(walk: Walk, scores: Mapping[str, float]) -> dict[str, float]:
    """The second hop a passage's text makes by naming another page's title ("... produced
    by Trent Reznor of Nine Inch Nails" names the page "Trent Reznor"): the gain of each
    passage of ``scores`` (chunk -> rank score) whose title (:func:`title_of`) the best
    one's text names as whole words, its own title left out: ``prior.title_hop`` × the best
    score / √(the passages that mention the title: its entity's mentions; 1 without one), so
    a specific page climbs higher than a common one ("Kansas"), but never above the passage
    that names it (:data:`TITLE_BELOW`). One passage per title (the best ranked: a page cut
    into several passages is one page), none of the best passage's own document, at most
    :data:`TITLE_PAGES` titles. The graph may miss the link (the extractor read "Trent Reznor
    of Nine Inch Nails" as one name) or hold it among many passages that name the entity; a
    title is what the page is about. The passages' texts are read in one store call;
    documents without titles gain nothing."""
    w = walk.cfg.prior.title_hop
    ranked = sorted(scores, key=lambda c: (-scores[c], c))
    if w <= 0 or len(ranked) < 2:
        return {}
    chunks = walk.reads.chunks(ranked)  # one read
    best, own = chunks[0], title_of(chunks[0])
    text = best.text.replace(own, "\0") if own else best.text
    seen = {own}
    pages: list[tuple[str, str]] = []  # (passage, title), best ranked first
    for c, ch in zip(ranked[1:], chunks[1:]):
        if ch.doc_id == best.doc_id:
            continue
        title = title_of(ch)
        if not title or title in seen:
            continue
        seen.add(title)
        if names_title(text, title):
            pages.append((c, title))
            if len(pages) == TITLE_PAGES:
                break
    if not pages:
        return {}
    top = max(0.0, scores[ranked[0]])
    known = find_entities(walk.store, [norm_name(t) for _, t in pages])  # one read
    ents = [known.get(norm_name(t)) for _, t in pages]
    walk.reads.prefetch_edges([e for e in ents if e is not None])
    gains = {}
    for (c, _), ent in zip(pages, ents):
        mentions = _mentions(walk, ent) if ent is not None else 0
        gain = w * top / math.sqrt(max(1, mentions))
        gains[c] = min(gain, max(0.0, top - scores[c] - TITLE_BELOW))  # never above its namer
    return gains


def build(walk: Walk, query: str, names: Sequence[str], name_vecs: np.ndarray) -> Prior | None:
    """The prior of one question; None when ``prior`` is off or the graph has no candidate
    (every consumer then falls back to cosine)."""
    cfg = walk.cfg
    if not cfg.prior.enabled:
        return None
    dense, lex = hybrid(walk, query)
    if not dense:
        return None
    first = {c: dense[c] + cfg.prior.lexical_weight * lex.get(c, 0.0) for c in dense}
    ents = question_entities(walk, names, name_vecs)
    restart = restart_mass(first, ents, cfg)
    seen = push.Local(walk)  # what the push read, for the feedback rounds
    scale = graph_scale(ents, cfg)
    prior = _fuse(walk, dense, lex, restart, seen, scale)
    if cfg.prior.feedback <= 0 or cfg.prior.graph_weight <= 0:
        return prior
    used: set[str] = set()
    for _ in range(feedback_rounds(query, names, cfg)):  # each round a hop further
        bridge = feedback_restart(walk, prior.score, ents, used, restart)
        if not bridge:
            break
        for n, v in restart.items():
            bridge[n] = bridge.get(n, 0.0) + v
        restart = bridge
        prior = _fuse(walk, dense, lex, restart, seen, scale)
    return prior


def graph_scale(ents: Mapping[str, float], cfg: RetrievalConfig) -> float:
    """What the graph part counts for a question (× ``prior.graph_weight``): 1, or with
    ``prior.hub_mentions`` = h > 0 and a question whose graph entities are all common, h × the
    restart weight of its most specific one (similarity / the passages that mention it), at
    most 1: a question that names only what h or more passages mention (the subject of a long
    document, "Barcelona" in each of its chunks) tells the PageRank little about which passage
    it asks for, and its spread, scaled to the best anchor like any other, would outweigh the
    passages' own cosine and BM25. 1 when it names no graph entity (the spread then restarts
    at the best hybrid passages)."""
    h = cfg.prior.hub_mentions
    if h <= 0 or not ents:
        return 1.0
    return min(1.0, h * max(ents.values()))


def _fuse(
    walk: Walk,
    dense: dict[str, float],
    lex: dict[str, float],
    restart: dict[str, float],
    seen: push.Local | None = None,
    scale: float = 1.0,
) -> Prior:
    """Spread from ``restart`` and fuse the three parts of every candidate (``dense`` gains
    the passages the spread reaches); the graph part counts ``scale`` × ``prior.graph_weight``
    (:func:`graph_scale`)."""
    cfg = walk.cfg
    graph = spread(walk, restart, seen) if restart and cfg.prior.graph_weight > 0 else {}
    best = max((v for n, v in graph.items() if is_anchor(n)), default=0.0)
    reached = [n for n in graph if is_anchor(n) and chunk_of(n) not in dense]
    for a, cos in zip(reached, walk.reads.sims(reached)):
        dense[chunk_of(a)] = cos
    mass = {n: v / best for n, v in graph.items()} if best else {}
    gw = cfg.prior.graph_weight * scale
    score: dict[str, float] = {}
    parts: dict[str, dict[str, float]] = {}
    for c, cos in dense.items():
        g = mass.get(anchor_of(c), 0.0)
        lx = lex.get(c, 0.0)
        score[c] = cos + cfg.prior.lexical_weight * lx + gw * g
        parts[c] = {"cosine": cos, "lexical": lx, "graph": g}
    return Prior(score, parts, mass, scale)
