"""The small graph every store test runs on (see :func:`contract_graph`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..core.types import Chunk, Edge, Node
from .hash_embedder import HashEmbedder

LINK = Edge("l-2001a1200", "e-2001", "a-1200", "learned", "remembered link")
"""A learned edge the memory cases add between d2's first entity and d1's second anchor."""


def contract_graph(doc_ids: Sequence[str] = ("d1", "d2"), dim: int = 32, salt: str = "") -> dict:
    """A small graph for store tests, as keyword arguments of ``GraphStore.add_graph``.

    Document i (from 1) has chunks ``c-i100``, ``c-i200`` with anchors ``a-i100``, ``a-i200``
    (contains edges ``k-i100``, ``k-i200``, context edge ``x-i000``). Entity ``e-i001`` is
    mentioned only in document i; ``e-i002`` also in document i+1 (edge ``m-(i+1)300``);
    relation ``r-i000`` joins the two, ``r-i900`` links ``e-i002`` to ``e-(i+1)001``.
    ``salt`` changes texts and embeddings, not ids.
    """
    docs, chunks, nodes, texts, edges = [], [], [], [], []
    ents = [(f"e-{i + 1}001", f"Person{i + 1} {salt}") for i in range(len(doc_ids))]
    ents += [(f"e-{i + 1}002", f"City{i + 1} {salt}") for i in range(len(doc_ids))]
    for i, d in enumerate(doc_ids):
        docs.append((d, f"hash-{d}", {"source": "contract"}))
        for j in (1, 2):
            cid, aid, text = f"c-{i + 1}{j}00", f"a-{i + 1}{j}00", f"{d} part {j} {salt}"
            chunks.append(Chunk(cid, d, j - 1, text, 0, len(text), {"part": j}))
            nodes += [
                Node(cid, "chunk", cid, d, cid),
                Node(aid, "anchor", f"Title {d} {j}", d, cid),
            ]
            texts += [text, text]
            edges.append(Edge(f"k-{i + 1}{j}00", aid, cid, "contains", f"Title {d} {j}"))
        edges.append(Edge(f"x-{i + 1}000", f"a-{i + 1}100", f"a-{i + 1}200", "context", "next"))
    for eid, name in ents:
        nodes.append(Node(eid, "entity", name))
        texts.append(name)
    edges += _entity_edges(len(doc_ids))
    vecs = HashEmbedder(dim).embed(texts)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return {
        "documents": docs,
        "chunks": chunks,
        "nodes": nodes,
        "embeddings": vecs,
        "edges": edges,
        "entity_aliases": {},
    }


def _entity_edges(n: int) -> list[Edge]:
    """Mentions and relations of the entities of ``n`` documents."""
    edges = []
    for i in range(n):
        edges.append(Edge(f"m-{i + 1}100", f"e-{i + 1}001", f"a-{i + 1}100", "mention", "mentions"))
        edges.append(Edge(f"m-{i + 1}200", f"e-{i + 1}002", f"a-{i + 1}200", "mention", "mentions"))
        edges.append(
            Edge(
                f"r-{i + 1}000",
                f"e-{i + 1}001",
                f"e-{i + 1}002",
                "relation",
                f"Person{i + 1} lives in City{i + 1}.",
            )
        )
        if i + 1 < n:
            edges.append(Edge(f"m-{i + 2}300", f"e-{i + 1}002", f"a-{i + 2}100", "mention", "m"))
            edges.append(
                Edge(
                    f"r-{i + 1}900",
                    f"e-{i + 1}002",
                    f"e-{i + 2}001",
                    "relation",
                    f"City{i + 1} is near Person{i + 2}.",
                )
            )
    return edges
