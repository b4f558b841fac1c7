"""Baselines on the same chunks and embedder as ReMindRAG.

- ``bm25``: Okapi BM25 (bm25s, English stop words) over the chunk texts;
- ``dense``: top-k chunks by cosine with the same embeddings the graph stores;
- ``ppr``: HippoRAG-style personalised PageRank over our graph, restarting at the query's
  seed entities (top entities by embedding similarity, weighted by it; no LLM NER), chunks
  ranked by their PageRank mass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from remindrag_integrations.core.store import GraphStore
from remindrag_integrations.core.types import Chunk


class Retriever(Protocol):
    name: str

    def retrieve(self, query: str, query_vec: np.ndarray, k: int) -> list[Chunk]: ...


class BM25Baseline:
    name = "bm25"

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        import bm25s

        self._bm25s = bm25s
        self.chunks = list(chunks)
        self.index = bm25s.BM25()
        self.index.index(
            bm25s.tokenize([c.text for c in self.chunks], stopwords="en", show_progress=False),
            show_progress=False,
        )

    def retrieve(self, query: str, query_vec: np.ndarray, k: int) -> list[Chunk]:
        k = min(k, len(self.chunks))
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:  # nothing but stop words
            return []
        docs, _ = self.index.retrieve(tokens, k=k, show_progress=False)
        return [self.chunks[int(i)] for i in docs[0]]


class DenseBaseline:
    name = "dense"

    def __init__(self, store: GraphStore) -> None:
        self.store = store

    def retrieve(self, query: str, query_vec: np.ndarray, k: int) -> list[Chunk]:
        return [self.store.get_chunk(c) for c, _ in self.store.search(query_vec, k, ("chunk",))]


class PPRBaseline:
    """Personalised PageRank over our graph, as HippoRAG does it: the query's named entities
    (found by the same rule-based extractor that built the graph, no LLM) are linked to their
    nearest graph entity; restart mass = similarity × node specificity (1 / number of chunks
    that mention the entity); damping 0.5; a chunk scores the PageRank mass of its anchor (the
    passage node). Without a named entity in the query, the top entities by similarity to the
    whole query are the seeds."""

    name = "ppr"

    def __init__(
        self,
        store: GraphStore,
        edges: Sequence[tuple[str, str, str]],
        embedder: Any = None,
        seeds: int = 5,
        damping: float = 0.5,
    ) -> None:
        import scipy.sparse as sp

        self.store, self.embedder = store, embedder
        self.seeds, self.damping = seeds, damping
        ids = sorted({n for u, v, _ in edges for n in (u, v)})
        self.ids, self.pos = ids, {n: i for i, n in enumerate(ids)}
        rows = [self.pos[u] for u, _, _ in edges] + [self.pos[v] for _, v, _ in edges]
        cols = [self.pos[v] for _, v, _ in edges] + [self.pos[u] for u, _, _ in edges]
        adj = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(ids), len(ids)))
        deg = np.asarray(adj.sum(axis=1)).ravel()
        deg[deg == 0] = 1.0
        self.walk = (sp.diags(1.0 / deg) @ adj).T.tocsr()  # column-stochastic transition
        self.mentions: dict[str, int] = {}
        for u, v, kind in edges:
            if kind == "mention":
                ent = u if u.startswith("e-") else v
                self.mentions[ent] = self.mentions.get(ent, 0) + 1
        self.anchor_rows = np.array([i for i, n in enumerate(ids) if n.startswith("a-")])

    def seed_entities(self, query: str, query_vec: np.ndarray) -> list[tuple[str, float]]:
        from remindrag_integrations.core.extract_rules import rule_based_extraction

        names = rule_based_extraction(query).entities if self.embedder is not None else []
        if not names:
            return self.store.search(query_vec, self.seeds, ("entity",))
        seeds: dict[str, float] = {}
        for vec in self.embedder.embed(names):
            for node, sim in self.store.search(vec, 1, ("entity",)):
                seeds[node] = max(seeds.get(node, -1.0), sim)
        return list(seeds.items())

    def scores(
        self, query: str, query_vec: np.ndarray, iters: int = 50, tol: float = 1e-8
    ) -> np.ndarray:
        seeds = self.seed_entities(query, query_vec)
        if not seeds:  # a graph without entities: restart at the best anchors
            seeds = self.store.search(query_vec, self.seeds, ("anchor",))
        p = np.zeros(len(self.ids))
        for node, sim in seeds:
            if node in self.pos:
                p[self.pos[node]] += max(sim, 1e-6) / max(1, self.mentions.get(node, 1))
        if not p.any():
            return p
        p /= p.sum()
        x = p.copy()
        for _ in range(iters):
            nxt = (1.0 - self.damping) * p + self.damping * (self.walk @ x)
            if np.abs(nxt - x).sum() < tol:
                x = nxt
                break
            x = nxt
        return x

    def retrieve(self, query: str, query_vec: np.ndarray, k: int) -> list[Chunk]:
        x = self.scores(query, query_vec)
        if not len(self.anchor_rows):
            return []
        sc = x[self.anchor_rows]
        order = np.lexsort((self.anchor_rows, -sc))[:k]
        return [
            self.store.get_chunk("c-" + self.ids[self.anchor_rows[i]][2:])
            for i in order
            if sc[i] > 0
        ]


def graph_edges(store: GraphStore) -> list[tuple[str, str, str]]:
    """Every (u, v, kind) of the store, found by walking from every node."""
    seen_nodes: set[str] = set()
    seen_edges: dict[str, tuple[str, str, str]] = {}
    frontier = [
        n for n, _ in store.search(np.ones(store.dim or 1), 10**9, ("chunk", "anchor", "entity"))
    ]
    for start in frontier:
        if start in seen_nodes:
            continue
        stack = [start]
        seen_nodes.add(start)
        while stack:
            u = stack.pop()
            for e in store.neighbors(u):
                seen_edges.setdefault(e.id, (e.u, e.v, e.kind))
                w = e.other(u)
                if w not in seen_nodes:
                    seen_nodes.add(w)
                    stack.append(w)
    return list(seen_edges.values())
