"""Reads of the PostgreSQL store: indexed point lookups and HNSW seed search."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import psycopg

from ...core import filters
from ...core.errors import EmbeddingError, UnknownNodeError
from ...core.frontier import Follow, Neighborhood, read_neighborhoods
from ...core.memory import math as mem
from ...core.types import Chunk, Edge, Node, NodeKind
from ..graph_matrix import GraphMatrix
from .base import PgBase, _get
from .filter_sql import where_sql
from .graph_cache import GraphCache
from .sql import (
    _ADJACENCY,
    _FRONTIER,
    _FRONTIER_FOLLOW,
    _NEIGHBORHOODS,
    _NEIGHBORS,
    _SPREAD_LINKS,
)


class Reads(PgBase):
    """Sizes, documents, nodes, chunks, edges, neighbours and search."""

    def counts(self) -> dict[str, int]:
        with self._cursor() as cur:
            cur.execute(
                """SELECT (SELECT count(*) FROM rr_documents WHERE namespace = %(ns)s),
                     (SELECT count(*) FROM rr_nodes WHERE namespace = %(ns)s AND kind = 'chunk'),
                     (SELECT count(*) FROM rr_nodes WHERE namespace = %(ns)s AND kind = 'anchor'),
                     (SELECT count(*) FROM rr_nodes WHERE namespace = %(ns)s AND kind = 'entity'),
                     (SELECT count(*) FROM rr_edges WHERE namespace = %(ns)s),
                     (SELECT count(*) FROM rr_edge_memory WHERE namespace = %(ns)s)""",
                {"ns": self.namespace},
            )
            row = cur.fetchone() or ()
        keys = ("documents", "chunks", "anchors", "entities", "edges", "touched_edges")
        return dict(zip(keys, (int(x) for x in row)))

    def holds_documents(self) -> bool:
        """Whether this namespace holds a document (a retrieval's check for a mistyped
        namespace: one indexed lookup)."""
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT EXISTS (SELECT 1 FROM rr_documents WHERE namespace = %s)",
                (self.namespace,),
            ).fetchone()
        return bool(row and row[0])

    def namespaces_with_documents(self) -> list[str]:
        """The namespaces of this database that hold a document."""
        with self._cursor() as cur:
            cur.execute(
                "SELECT n.namespace FROM rr_namespaces n WHERE EXISTS (SELECT 1 FROM "
                "rr_documents d WHERE d.namespace = n.namespace) ORDER BY n.namespace"
            )
            return [r[0] for r in cur]

    def document_hash(self, doc_id: str) -> str | None:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT hash FROM rr_documents WHERE namespace = %s AND id = %s",
                (self.namespace, doc_id),
            ).fetchone()
        return row[0] if row else None

    def document_ids(self) -> list[str]:
        with self._cursor() as cur:
            cur.execute(
                "SELECT id FROM rr_documents WHERE namespace = %s ORDER BY id", (self.namespace,)
            )
            return [r[0] for r in cur]

    def document_chunks(self, doc_id: str) -> list[Chunk]:
        with self._cursor() as cur:
            cur.execute(
                "SELECT id, doc_id, idx, text, start_char, end_char, metadata FROM rr_chunks "
                "WHERE namespace = %s AND doc_id = %s ORDER BY idx, id",
                (self.namespace, doc_id),
            )
            return [Chunk(*row) for row in cur]

    def get_node(self, node_id: str) -> Node:
        return self.get_nodes([node_id])[0]

    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]:
        ids = list(dict.fromkeys(node_ids))
        found: dict[str, Node] = {}
        cache = self._cache()
        if cache is not None:
            with cache.lock:
                have = cache.nodes if cache.seq == self._graph_seq else {}
                found = {n: have[n] for n in ids if n in have}
        missing = [n for n in ids if n not in found]
        if missing:
            with self._cursor() as cur:
                cur.execute(
                    "SELECT id, kind, name, doc_id, chunk_id, aliases FROM rr_nodes "
                    "WHERE namespace = %s AND id = ANY(%s)",
                    (self.namespace, missing),
                )
                read = {r[0]: Node(r[0], r[1], r[2], r[3], r[4], tuple(r[5])) for r in cur}
            found.update(read)
            self._keep(cache, "nodes", read)
        return [_get(found, n, "node") for n in node_ids]

    def get_chunk(self, chunk_id: str) -> Chunk:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT id, doc_id, idx, text, start_char, end_char, metadata "
                "FROM rr_chunks WHERE namespace = %s AND id = %s",
                (self.namespace, chunk_id),
            ).fetchone()
        if row is None:
            raise UnknownNodeError(f"unknown chunk id {chunk_id!r}")
        return Chunk(*row)

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks in the order asked, in one statement (through a snapshot, those read
        before from the graph cache: none)."""
        if not chunk_ids:
            return []
        ids = list(dict.fromkeys(chunk_ids))
        found: dict[str, Chunk] = {}
        cache = self._cache()
        if cache is not None:
            with cache.lock:
                have = cache.chunks if cache.seq == self._graph_seq else {}
                found = {c: have[c] for c in ids if c in have}
        missing = [c for c in ids if c not in found]
        if missing:
            with self._cursor() as cur:
                cur.execute(
                    "SELECT id, doc_id, idx, text, start_char, end_char, metadata "
                    "FROM rr_chunks WHERE namespace = %s AND id = ANY(%s)",
                    (self.namespace, missing),
                )
                read = {r[0]: Chunk(*r) for r in cur}
            found.update(read)
            self._keep(cache, "chunks", read)
        return [_get(found, c, "chunk") for c in chunk_ids]

    def get_edge(self, edge_id: str) -> Edge:
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT id, u, v, kind, text FROM rr_edges WHERE namespace = %s AND id = %s",
                (self.namespace, edge_id),
            ).fetchone()
        if row is None:
            raise UnknownNodeError(f"unknown edge id {edge_id!r}")
        return Edge(*row)

    def matrix_of_cache(self) -> GraphMatrix:
        """The whole graph of entities and anchors as a matrix, as of this snapshot view
        (the store's ``graph_matrix()`` when it has the graph cache): the cache's, built
        from its links once per change of the corpus's graph; outside a snapshot through a
        new one; in a snapshot the cache has moved past without keeping its matrix, read
        whole through SQL (rare: a corpus write between a query's start and its prior)."""
        seq, cache = self._graph_seq, self._graph_cache
        if seq is None:
            with self.snapshot() as view:
                return view.matrix_of_cache()
        if cache is not None:
            self._cache()  # caught up to this snapshot when behind
            with cache.lock:
                matrix = cache.matrix(seq)
            if matrix is not None:
                return matrix
        nodes, edges = self.whole_graph()
        return GraphMatrix.build(nodes, edges)

    def _keep(self, cache: GraphCache | None, what: str, rows: dict[str, Any]) -> None:
        """Keep rows read through SQL in the cache, when it still stands at this view's
        change (``what``: ``edges``, ``embeddings``, ``nodes`` or ``chunks``)."""
        if cache is not None and rows:
            with cache.lock:
                if cache.seq == self._graph_seq:
                    getattr(cache, what).update(rows)

    def node_embeddings(self, node_ids: Sequence[str]) -> np.ndarray:
        if not node_ids:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        ids = list(dict.fromkeys(node_ids))
        found: dict[str, np.ndarray] = {}
        cache = self._cache()
        if cache is not None:
            with cache.lock:
                if cache.seq == self._graph_seq:
                    have, vecs = cache.embeddings, cache.vectors
                    found = {n: have[n] for n in ids if n in have}
                    if vecs is not None:
                        for n in ids:
                            if n not in found and (v := vecs.get(n)) is not None:
                                found[n] = v
        missing = [n for n in ids if n not in found]
        if missing:
            with self._cursor() as cur:
                cur.execute(
                    "SELECT id, embedding FROM rr_nodes WHERE namespace = %s AND id = ANY(%s)",
                    (self.namespace, missing),
                )
                read = {r[0]: r[1] for r in cur}
            found.update(read)
            self._keep(cache, "embeddings", read)
        return np.stack([_get(found, n, "node") for n in node_ids]).astype(np.float32)

    def neighbors(self, node_id: str) -> list[Edge]:
        if self._graph_seq is not None and self._graph_cache is not None:
            return self.adjacency([node_id])[node_id]  # a snapshot: through the cache
        with self._cursor() as cur:
            cur.execute(_NEIGHBORS, {"ns": self.namespace, "n": node_id})
            out = [Edge(*r) for r in cur]
            if (
                not out
                and cur.execute(
                    "SELECT 1 FROM rr_nodes WHERE namespace = %s AND id = %s",
                    (self.namespace, node_id),
                ).fetchone()
                is None
            ):
                raise UnknownNodeError(f"unknown node id {node_id!r}")
        return out

    def adjacency(self, node_ids: Sequence[str]) -> dict[str, list[Edge]]:
        """The edges of many nodes, each node's ordered by id, in one statement."""
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return {}
        out: dict[str, list[Edge]] = {}
        cache = self._cache()
        if cache is not None:  # a snapshot: the nodes read before from memory
            with cache.lock:
                have = cache.edges if cache.seq == self._graph_seq else {}
                out = {n: list(have[n]) for n in ids if n in have}
        missing = [n for n in ids if n not in out]
        if not missing:
            return {n: out[n] for n in ids}
        read: dict[str, list[Edge]] = {}
        with self._cursor() as cur:
            cur.execute(_ADJACENCY, {"ns": self.namespace, "ids": missing})
            rows = cur.fetchall()  # one call: iterating the cursor costs more per row
        for n, eid, u, v, kind, text, known in rows:
            edges = read.setdefault(n, [])
            if eid is not None:
                edges.append(Edge(eid, u, v, kind, text))
            elif not known:
                raise UnknownNodeError(f"unknown node id {n!r}")
        for edges in read.values():
            edges.sort(key=lambda e: e.id)
        self._keep(cache, "edges", {n: list(e) for n, e in read.items()})
        out.update(read)
        return {n: out[n] for n in ids}

    def spread_links(self, node_ids: Sequence[str]) -> dict[str, list[str]]:
        """Per node the other ends of its corpus edges to entities and anchors, in edge id
        order (what the prior's push spreads over), in one statement; through a snapshot,
        from the store's in-memory copy caught up to it (no statement unless the graph
        changed since the last query: :mod:`.graph_cache`)."""
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return {}
        cache = self._cache()
        if cache is not None:  # a snapshot: from memory (.graph_cache)
            with cache.lock:
                if cache.seq == self._graph_seq:
                    return cache.spread(ids)
        with self._cursor() as cur:
            cur.execute(_SPREAD_LINKS, {"ns": self.namespace, "ids": ids})
            rows = cur.fetchall()
        rows.sort()
        out: dict[str, list[str]] = {n: [] for n in ids}
        for n, _, other in rows:
            out[n].append(other)
        return out

    def neighborhoods(
        self, node_ids: Sequence[str], follow: Follow | None = None
    ) -> dict[str, Neighborhood]:
        """Nodes, embeddings, edges, their memory and the remembered neighbours of a whole
        frontier, and with ``follow`` of what it reaches through memory, in one statement
        (see :mod:`remindrag_integrations.core.frontier`)."""
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return {}
        cache = self._cache()
        if cache is not None:  # a snapshot's, the cache holding memory and these nodes
            with cache.lock:
                held = (
                    cache.memory is not None
                    and cache.seq == self._graph_seq
                    and (cache.whole or all(n in cache.edges and n in cache.nodes for n in ids))
                )
            if held:  # the plain reads, each from the cache (what memory reaches beyond the
                # nodes held: a statement or two a level, rare)
                return read_neighborhoods(self, ids, follow)  # type: ignore[arg-type]
        params: dict[str, Any] = {"ns": self.namespace, "ids": ids}
        frontier = _FRONTIER
        if follow is not None and np.isfinite(follow.min_alignment) and follow.max_nodes > 0:
            q = np.asarray(follow.query, dtype=np.float32)
            if q.shape != (self.dim,):
                raise EmbeddingError(f"query dimension {q.shape} != store dimension {self.dim}")
            frontier = _FRONTIER_FOLLOW
            params.update(q=q, neg=-float(follow.min_alignment), depth=int(follow.max_depth))
            params["cap"] = len(ids) + int(follow.max_nodes)
        with self._cursor() as cur:
            cur.execute(_NEIGHBORHOODS.format(frontier=frontier), params)
            rows = cur.fetchall()
        found = {r[0] for r in rows}
        out = _assemble([n for n in ids if n not in found] + sorted(found), rows, self.dim or 0)
        if cache is not None:  # the next query's reads of these nodes: from the cache
            self._keep(cache, "edges", {n: list(h.edges) for n, h in out.items()})
            self._keep(cache, "nodes", {n: h.node for n, h in out.items()})
            self._keep(cache, "embeddings", {n: h.embedding for n, h in out.items()})
        return out

    def search(
        self,
        query: np.ndarray,
        k: int,
        kinds: Sequence[NodeKind],
        where: Mapping[str, Any] | None = None,
    ) -> list[tuple[str, float]]:
        dim = self.dim
        if dim is None or k <= 0 or not kinds:
            return []
        q = mem.unit(query)
        if q.shape != (dim,):
            raise EmbeddingError(f"query dimension {q.shape} != store dimension {dim}")

        parsed = filters.parse(where)
        if parsed is None and "chunk" not in kinds:  # a snapshot's: exact, from memory
            cache = self._cache()
            if cache is not None:
                with cache.lock:
                    vecs = cache.vectors if cache.seq == self._graph_seq else None
                    if vecs is not None and vecs.dim == dim:
                        return vecs.search(q, k, kinds)
        params: dict[str, Any] = {"q": q, "ns": self.namespace, "k": list(kinds), "n": k}
        docs = (  # chunks and anchors of passing documents (GIN index on the metadata)
            " AND (doc_id IS NULL OR doc_id IN (SELECT id FROM rr_documents WHERE "
            f"namespace = %(ns)s AND {where_sql(parsed, params)}))"
            if parsed is not None
            else ""
        )

        # the literal lets the planner use the HNSW index (entities and anchors only)
        indexed = " AND kind <> 'chunk'" if "chunk" not in kinds else ""

        def run(cur: psycopg.Cursor) -> list[tuple[str, float]]:
            if 2 * k > self.ef_search:  # widen the HNSW candidate list for a large k
                cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(2 * k),))
            cur.execute(  # dim is an int literal so the planner can match the partial index
                f"SELECT id, 1 - ((embedding::vector({dim})) <=> %(q)s::vector({dim})) "
                f"FROM rr_nodes WHERE namespace = %(ns)s AND dim = {dim} AND kind = ANY(%(k)s)"
                f"{indexed}"
                f"{docs} ORDER BY (embedding::vector({dim})) <=> %(q)s::vector({dim}) "
                "LIMIT %(n)s",
                params,
            )
            return [(r[0], float(r[1])) for r in cur]

        if 2 * k > self.ef_search:
            hits = self._tx(run)
        else:
            with self._cursor() as cur:
                hits = run(cur)
        return sorted(hits, key=lambda t: (-t[1], t[0]))

    def whole_graph(self) -> tuple[list[Node], list[Edge]]:
        with self._cursor() as cur:
            cur.execute(
                "SELECT id, kind, name, doc_id, chunk_id, aliases FROM rr_nodes "
                "WHERE namespace = %s ORDER BY id",
                (self.namespace,),
            )
            nodes = [Node(r[0], r[1], r[2], r[3], r[4], tuple(r[5])) for r in cur]
            cur.execute(
                "SELECT id, u, v, kind, text FROM rr_edges WHERE namespace = %s ORDER BY id",
                (self.namespace,),
            )
            return nodes, [Edge(*r) for r in cur]

    def find_entity_by_name(self, normalized_name: str) -> str | None:
        return self.find_entities_by_name([normalized_name]).get(normalized_name)

    def find_entities_by_name(self, normalized_names: Sequence[str]) -> dict[str, str]:
        """The entities of the names known (one statement; through a snapshot, from the
        graph cache's names: none)."""
        names = list(dict.fromkeys(normalized_names))
        if not names:
            return {}
        cache = self._cache()
        if cache is not None:
            with cache.lock:
                if cache.seq == self._graph_seq:
                    held = cache.names
                    return {k: held[k] for k in names if k in held}
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT name, node_id FROM rr_entity_names WHERE namespace = %s AND name = ANY(%s)",
                (self.namespace, names),
            ).fetchall()
        return {name: node for name, node in rows}


def _assemble(ids: list[str], rows: list[tuple], dim: int) -> dict[str, Neighborhood]:
    """Neighbourhoods from the rows of ``_NEIGHBORHOODS`` (unknown nodes raise)."""
    me: dict[str, tuple[Node, np.ndarray]] = {}
    edges: dict[str, list[tuple[Edge, np.ndarray | None]]] = {n: [] for n in ids}
    far: dict[str, tuple[Node, np.ndarray]] = {}
    for n, eid, u, v, kind, text, vec, oid, okind, name, doc, chunk, aliases, emb in rows:
        other = (Node(oid, okind, name, doc, chunk, tuple(aliases)), emb) if oid else None
        if eid is None and other is not None:
            me[n] = other
            continue
        edges[n].append((Edge(eid, u, v, kind, text), vec))
        if other is not None:
            far[oid] = other
    out = {}
    zero, empty = np.zeros(dim, dtype=np.float32), np.zeros((0, dim), dtype=np.float32)
    for n in ids:
        node, emb = _get(me, n, "node")
        mine = sorted(edges[n], key=lambda t: t[0].id)
        memory = np.stack([zero if m is None else m for _, m in mine]) if mine else empty
        seen = {e.other(n) for e, m in mine if m is not None}
        out[n] = Neighborhood(
            node, emb, tuple(e for e, _ in mine), memory, {o: far[o] for o in seen}
        )
    return out
