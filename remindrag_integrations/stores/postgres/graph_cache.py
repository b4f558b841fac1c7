"""The graph a query walks, in process memory, kept current by the database's change sequence.

The prior's push (:mod:`remindrag_integrations.core.push`) reads the graph round by round and
the walk reads each node's edges and embedding: on PostgreSQL one statement each, 37-53 a
zero-token query on real text (issue 49), where the embedded store answers from memory. This
is the folder store's pattern (:mod:`..sqlite_store`: an in-memory cache that catches up
from a ``changes`` table) for what a query reads of the graph and its memory
(:class:`GraphCache`):

- **Writers.** A transaction that changes edges (``add_graph``, a document replaced or
  deleted, a memory write that adds learned links, ``drop_namespace``) ends with
  :func:`note_change`: it bumps the namespace's row in ``rr_graph_seq`` (a row lock held to
  commit, so graph writers of one namespace commit in sequence order; taken last, so it
  waits for nothing and nothing waits for it long) and writes one ``rr_graph_changes`` row
  naming the nodes whose edges changed (NULL: too many to name, or everything: read the
  whole graph again). A write of edge memory (a memory write, a document's edit carrying
  memory over or deleting it, import, decay, reset) also writes one ``rr_memory_changes``
  row with the same number, naming the edges whose memory rows it wrote or deleted (NULL:
  any edge's, as decay and reset: read every row again).
- **Readers.** A query's snapshot (``REPEATABLE READ``) reads the sequence number in the
  round trip that opens it. The first cached read through a snapshot newer than the cache
  brings it up to that number inside that snapshot (the changes since, then the named
  nodes' links: two statements; or the whole graph once), so the cache shows exactly what
  the snapshot sees; a snapshot older than the cache (another thread caught it up
  meanwhile) reads through SQL. A write from any process is therefore seen by the next
  query of every process.
- **Seed search.** The cache also holds the embeddings of every entity and anchor (the
  nodes the HNSW index holds, :class:`Vectors`: a matrix, ``dim`` × 4 bytes a node), read
  whole with the links and caught up with them: a query's unfiltered seed and name searches
  are an exact scan in process memory, as on the embedded store, not a statement (a
  filtered search, or one for chunks, still goes to SQL and its HNSW index).
- **Memory and names.** Every edge's memory row (up to ``PRELOAD_MEMORY`` rows: more are
  read through SQL) and every entity name: a query's neighbourhood reads (the walk's and
  replay's, following memory) of nodes held and the question's name lookups cost no
  statement, as on the embedded store.
- **Lexical search.** In a namespace of up to ``PRELOAD_TEXTS`` chunks the cache
  also holds every chunk's text (``texts``, read with the whole graph; a change names every
  chunk a write adds or drops: those are read again), and a search is the embedded store's
  BM25 over them (:meth:`GraphCache.lexical`, :mod:`.lexical`): no statement, the embedded
  store's scores. Its index is built on the first search after a change of the texts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import numpy as np
import psycopg

from ...core.ids import is_anchor, is_chunk, is_entity
from ...core.types import Chunk, Edge, Node
from .. import ann
from ..graph_matrix import GraphMatrix
from ..lexical import LexicalIndex
from .sql import _SPREAD_LINKS

RELOAD_OVER = 50_000  # a change naming more nodes says "read everything again" (NULL)
KEEP_CHANGES = 1_000  # change rows kept per namespace; a cache further behind reloads
# a namespace of at most this many edges has every node's edges, row and embedding read with
# its links (the first sight of a question's nodes then costs no statement, as a repeat, and
# a memory write's bridge reads none); a bigger one reads a node's on first use. Measured
# (benchmarks/pg_real_text.py, real text, MiniLM): the whole cache adds 114 MB to a process
# at 49 K edges, 606 MB at 447 K (404 MB with edges per node, first sight 1.8x slower)
PRELOAD_EDGES = 2_000_000
KEEP_MATRICES = 2  # whole-graph matrices kept for snapshots older than the cache
# a namespace with at most this many memory rows has them all held (``dim`` x 4 bytes each,
# 0.15 GB at 100 K rows of 384 dimensions), caught up by ``rr_memory_changes``; more: read
# per query through SQL
PRELOAD_MEMORY = 100_000
# a namespace of at most this many chunks has every chunk's text held (its BM25 index built
# from them: the lexical search without a statement, the embedded store's ranking; the texts
# and the index in each process); a bigger one ranks by full-text search in SQL
PRELOAD_TEXTS = 200_000


def note_change(
    cur: psycopg.Cursor,
    namespace: str,
    nodes: Iterable[str] | None,
    memory: Iterable[str] | None = (),
) -> int:
    """Record, as the last statements of a write, that the edges of ``nodes`` changed
    (``None``: anything may have) and that the memory of the edges ``memory`` was written
    (``None``: any edge's; empty: none); returns the new sequence number."""
    row = cur.execute(
        "INSERT INTO rr_graph_seq (namespace, seq) VALUES (%s, 1) ON CONFLICT (namespace) "
        "DO UPDATE SET seq = rr_graph_seq.seq + 1 RETURNING seq",
        (namespace,),
    ).fetchone()
    seq = int(row[0])  # type: ignore[index]
    touched = None if nodes is None else sorted(set(nodes))
    if touched is not None and len(touched) > RELOAD_OVER:
        touched = None
    cur.execute(
        "INSERT INTO rr_graph_changes (namespace, seq, nodes) VALUES (%s, %s, %s::text[])",
        (namespace, seq, touched),
    )
    written = None if memory is None else sorted(set(memory))
    if written is None or written:
        if written is not None and len(written) > RELOAD_OVER:
            written = None
        cur.execute(
            "INSERT INTO rr_memory_changes (namespace, seq, edges) VALUES (%s, %s, %s::text[])",
            (namespace, seq, written),
        )
    if seq % 100 == 0:
        for table in ("rr_graph_changes", "rr_memory_changes"):
            cur.execute(
                f"DELETE FROM {table} WHERE namespace = %s AND seq <= %s",
                (namespace, seq - KEEP_CHANGES),
            )
    return seq


_KINDS = ("entity", "anchor")  # the kinds Vectors holds (the HNSW index's)


class _Matrix:
    """The embeddings of one kind's nodes, one row each, in a matrix that grows by
    doubling; a removed node's row is zeroed and reused by the next new one. Each row's
    inverse norm is kept beside it, so a search's dot products are cosines (as pgvector's
    ``<=>``; a zero row scores 0). A kind of at least ``ann.THRESHOLD`` nodes is searched
    as the embedded store searches it (:mod:`..node_index`): through an HNSW index (extra
    ``ann``, built on its first search, then kept up with every put and drop), its ``k`` ×
    ``ann.OVERFETCH`` candidates re-scored exactly; without the extra, by the exact scan."""

    def __init__(self, ids: list[str], rows: list[np.ndarray], dim: int):
        n = len(ids)
        self.dim = dim
        self.mat = np.zeros((max(n, 16), dim), dtype=np.float32)
        if n:
            self.mat[:n] = np.stack(rows)
        self.ids: list[str | None] = list(ids)
        self.inv = np.zeros(self.mat.shape[0], dtype=np.float32)
        self.inv[:n] = _inverse(np.linalg.norm(self.mat[:n], axis=1))
        self.row = {x: i for i, x in enumerate(ids)}
        self.free: list[int] = []
        self.ann: ann.AnnIndex | None = None  # keys: rows

    def _unit(self, rows: np.ndarray) -> np.ndarray:
        return self.mat[rows] * self.inv[rows][:, None]

    def put(self, node_id: str, vec: np.ndarray) -> None:
        i = self.row.get(node_id)
        if i is None:
            if self.free:
                i = self.free.pop()
                self.ids[i] = node_id
            else:
                i = len(self.ids)
                if i == self.mat.shape[0]:  # full: twice the room
                    self.mat = np.concatenate([self.mat, np.zeros_like(self.mat)])
                    self.inv = np.concatenate([self.inv, np.zeros_like(self.inv)])
                self.ids.append(node_id)
            self.row[node_id] = i
        elif self.ann is not None:
            self.ann.remove([i])
        self.mat[i] = vec
        self.inv[i] = _inverse(np.linalg.norm(self.mat[i : i + 1], axis=1))[0]
        if self.ann is not None:
            rows = np.array([i], np.int64)
            self.ann.add(rows, self._unit(rows))

    def drop(self, node_id: str) -> None:
        i = self.row.pop(node_id, None)
        if i is not None:
            self.ids[i] = None
            self.mat[i], self.inv[i] = 0.0, 0.0  # scores 0, never above a live row's tie
            self.free.append(i)
            if self.ann is not None:
                self.ann.remove([i])

    def _index(self) -> ann.AnnIndex | None:
        """The HNSW index of a kind of at least ``ann.THRESHOLD`` nodes (built now when
        missing), or None: a smaller kind, or no ``ann`` extra."""
        if self.ann is None and len(self.row) >= ann.THRESHOLD and ann.available():
            index = ann.AnnIndex(self.dim, ann.EF)
            rows = np.array(sorted(self.row.values()), np.int64)
            for start in range(0, len(rows), 16_384):
                block = rows[start : start + 16_384]
                index.add(block, self._unit(block))
            self.ann = index
        return self.ann if len(self.row) >= ann.THRESHOLD else None

    def search(self, q: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The top-``k`` rows by cosine to the unit vector ``q`` (exactly below the ANN
        threshold, with every row tied with the ``k``-th): (id, cosine), unsorted."""
        n = len(self.ids)
        if k <= 0 or not self.row:
            return []
        index = self._index()
        ids = self.ids
        if index is not None:  # the candidates, re-scored exactly
            (found,) = index.search(q[None, :], k * ann.OVERFETCH)
            rows = np.array([r for r in found.tolist() if r < n and ids[r] is not None], np.int64)
            sims = (self.mat[rows] @ q) * self.inv[rows]
            return [(ids[r], float(s)) for r, s in zip(rows.tolist(), sims.tolist())]  # type: ignore[misc]
        sims = (self.mat[:n] @ q) * self.inv[:n]
        live = n - len(self.free)
        if live > k:  # the k best, and every row tied with the k-th (ties go by id)
            if self.free:
                sims[self.free] = -np.inf
            kth = np.partition(sims, n - k)[n - k]
            idx = np.flatnonzero(sims >= kth)
        else:  # every live row
            keep = np.ones(n, bool)
            keep[self.free] = False
            idx = np.flatnonzero(keep)
        return [(ids[i], float(sims[i])) for i in idx]  # type: ignore[misc]


class Vectors:
    """The embeddings of a namespace's entities and anchors, a matrix per kind (a search
    for anchors, the dense seat's, scans 3 K rows of 3,000 passages, not the 21 K of both)."""

    def __init__(self, ids: list[str], kinds: list[str], rows: list[np.ndarray], dim: int):
        self.dim = dim
        self.kind: dict[str, str] = dict(zip(ids, kinds))
        self.mats = {
            kd: _Matrix(
                [i for i, k in zip(ids, kinds) if k == kd],
                [r for r, k in zip(rows, kinds) if k == kd],
                dim,
            )
            for kd in _KINDS
        }

    def __len__(self) -> int:
        return len(self.kind)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.kind

    def ids(self) -> list[str]:
        return list(self.kind)

    def get(self, node_id: str) -> np.ndarray | None:
        kd = self.kind.get(node_id)
        if kd is None:
            return None
        m = self.mats[kd]
        return m.mat[m.row[node_id]].copy()

    def put(self, node_id: str, kind: str, vec: np.ndarray) -> None:
        was = self.kind.get(node_id)
        if was is not None and was != kind:
            self.mats[was].drop(node_id)
        self.kind[node_id] = kind
        self.mats[kind].put(node_id, vec)

    def drop(self, node_id: str) -> None:
        kd = self.kind.pop(node_id, None)
        if kd is not None:
            self.mats[kd].drop(node_id)

    def search(self, q: np.ndarray, k: int, kinds: Sequence[str]) -> list[tuple[str, float]]:
        """The top-``k`` nodes of ``kinds`` by cosine to the unit vector ``q``, exactly:
        (id, cosine), best first, ties by id."""
        q = q.astype(np.float32)
        hits = [h for kd in _KINDS if kd in kinds for h in self.mats[kd].search(q, k)]
        hits.sort(key=lambda t: (-t[1], t[0]))
        return hits[:k]


def _build(links: dict[str, list[tuple[str, str]]], vectors: Vectors) -> GraphMatrix:
    """:class:`~..graph_matrix.GraphMatrix` of the cache's links (rows: every entity and
    anchor, in id order; an entry per edge at each end, a self-loop's twice at its one)."""
    import scipy.sparse as sp

    ids = sorted(vectors.ids())
    pos = {n: i for i, n in enumerate(ids)}
    rows: list[int] = []
    cols: list[int] = []
    for u, got in links.items():
        i = pos.get(u)
        if i is None:  # a chunk's links
            continue
        for _, other in got:
            j = pos.get(other)
            if j is not None:
                rows.append(i)
                cols.append(j)
                if j == i:
                    rows.append(i)
                    cols.append(j)
    n = len(ids)
    adj = sp.csr_matrix(
        (np.ones(len(rows), np.float32), (np.asarray(rows, np.int64), np.asarray(cols, np.int64))),
        shape=(n, n),
    )
    degree = np.asarray(adj.sum(axis=1), np.float32).ravel()
    anchors = np.array([i for i, x in enumerate(ids) if is_anchor(x)], np.int64)
    entities = np.array([is_entity(x) for x in ids], bool)
    return GraphMatrix(ids, pos, adj, degree, anchors, entities)


def _inverse(norms: np.ndarray) -> np.ndarray:
    out = np.zeros_like(norms, dtype=np.float32)
    np.divide(1.0, norms, out=out, where=norms > 0)
    return out


def _vector_rows(cur: psycopg.Cursor, sql: str, params: tuple) -> list[tuple[str, str, Any]]:
    cur.execute(sql, params)
    return cur.fetchall()


class GraphCache:
    """What a query reads of the graph, in process memory as of change ``seq`` (-1: nothing
    read yet). One per store object, shared by its snapshot views (under ``lock``):

    - ``links``: per node the ``(edge id, other end)`` of its corpus edges to entities and
      anchors, in edge id order (:meth:`~.reads.Reads.spread_links`), read whole on first use;
    - ``edges``, ``embeddings``, ``nodes``, ``chunks``: a node's edges (learned ones too),
      its embedding, its row, a chunk's row (text, metadata), filled as queries read them (:meth:`~.reads.Reads.adjacency`,
      ``neighbors``, ``node_embeddings``, ``get_nodes``) and dropped for every node a change
      names (a node's row changes only with its aliases: named too).

    - ``vectors``: every entity's and anchor's embedding (:class:`Vectors`), read whole with
      ``links``: unfiltered seed search and these nodes' embeddings from memory;
    - ``memory``: every edge's memory row (None: more than ``PRELOAD_MEMORY``, not held),
      caught up by the edges each memory change names;
    - ``names``: every entity name (the question's names looked up without a statement);
    - with ``whole`` (at most ``PRELOAD_EDGES`` edges): every node's edges and row, and the
      chunks' embeddings;
    - ``texts``: every chunk's document and text (up to ``PRELOAD_TEXTS``), and their BM25
      index (:meth:`lexical`, :class:`Lexical`): the lexical search."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seq = -1
        self.links: dict[str, list[tuple[str, str]]] = {}
        self.edges: dict[str, list[Edge]] = {}
        self.embeddings: dict[str, np.ndarray] = {}
        self.nodes: dict[str, Node] = {}
        self.chunks: dict[str, Chunk] = {}
        self.vectors: Vectors | None = None
        # every edge's memory row (edge id -> vector; an edge without a row has none), or
        # None: not held (too many rows) and read through SQL
        self.memory: dict[str, np.ndarray] | None = None
        self.whole = False  # every node's edges, row and embedding held (PRELOAD_EDGES)
        # every entity name (normalised name -> node id; ``rr_entity_names``)
        self.names: dict[str, str] = {}
        # the prior's whole-graph matrix (``matrix``), built on demand, valid for the
        # snapshots from change ``corpus_from`` on (later changes that left the links and
        # the set of entities and anchors as they were: memory's links, an edit's
        # unchanged nodes); the last ones replaced, with the changes they were valid for
        self.corpus_from = -1
        self._matrix: GraphMatrix | None = None
        self._older: list[tuple[int, int, GraphMatrix]] = []
        self.reloads = 0  # whole-graph reads (tests and benchmarks look)
        self.catch_ups = 0
        # every chunk's (doc_id, text) up to PRELOAD_TEXTS chunks (None: not held), the
        # same from change ``texts_from`` on, and their BM25 index (:meth:`lexical`)
        self.texts: dict[str, tuple[str, str]] | None = None
        self.texts_from = -1
        self._lexical: Lexical | None = None
        self._older_lexical: list[tuple[int, Lexical]] = []  # (last change, index) kept
        self._lexical_lock = threading.Lock()  # one build at a time, outside ``lock``
        self.lexical_builds = 0  # tests and benchmarks look

    def at(self, cur_of: Callable[[], Any], namespace: str, seq: int) -> bool:
        """Bring the cache up to change ``seq`` (reading through ``cur_of``, a cursor in a
        snapshot at ``seq``) when behind; whether it now stands at ``seq`` (call under
        ``lock``; a snapshot older than the cache reads through SQL)."""
        if self.seq < seq:
            with cur_of() as cur:
                self._catch_up(cur, namespace, seq)
        return self.seq == seq

    def matrix(self, seq: int) -> GraphMatrix | None:
        """The whole-graph matrix (entities, anchors, the corpus's edges between them) as
        of change ``seq`` (call under ``lock``, after :meth:`at`): the current one, built
        now if it is not yet, or one kept from before the last changes; None when the cache
        has moved past ``seq`` without one (the snapshot reads it through SQL)."""
        if self.corpus_from <= seq <= self.seq and self.vectors is not None:
            if self._matrix is None:
                self._matrix = _build(self.links, self.vectors)
            return self._matrix
        for first, last, m in self._older:
            if first <= seq <= last:
                return m
        return None

    def _corpus_changed(self, seq: int) -> None:
        """The links or the nodes changed at ``seq``: the matrix built before is kept
        (for older snapshots) and the next one is built anew."""
        if self._matrix is not None:
            self._older = [
                *self._older[-(KEEP_MATRICES - 1) :],
                (self.corpus_from, self.seq, self._matrix),
            ]
        self._matrix, self.corpus_from = None, seq

    def spread(self, ids: Sequence[str]) -> dict[str, list[str]]:
        links = self.links
        return {n: [o for _, o in links.get(n, ())] for n in ids}

    def _catch_up(self, cur: psycopg.Cursor, namespace: str, seq: int) -> None:
        if self.seq >= 0:
            cur.execute(
                "SELECT g.seq, g.nodes, m.seq IS NOT NULL, m.edges FROM rr_graph_changes g "
                "LEFT JOIN rr_memory_changes m ON m.namespace = g.namespace AND m.seq = g.seq "
                "WHERE g.namespace = %s AND g.seq > %s AND g.seq <= %s ORDER BY g.seq",
                (namespace, self.seq, seq),
            )
            rows = cur.fetchall()
            caught = self.vectors is not None  # else (nothing had a vector): read it all
            if caught and len(rows) == seq - self.seq and all(r[1] is not None for r in rows):
                touched = sorted({n for r in rows for n in r[1]})
                # changes to nodes in between: a snapshot among them may have seen other
                # links, even when the last leaves them as they were (a document replaced,
                # then put back): the matrix built before is kept for the older ones only
                several = sum(1 for r in rows if r[1]) > 1
                self._links_changed(cur, namespace, seq, touched, several)
                if self.memory is not None and any(r[2] for r in rows):
                    named = [r[3] for r in rows if r[2]]
                    self._memory_changed(
                        cur,
                        namespace,
                        None
                        if any(x is None for x in named)
                        else sorted({e for x in named for e in x}),
                    )
                self._catch_up_texts(cur, namespace, touched, seq)
                self.seq = seq
                self.catch_ups += 1
                return
        self._reload(cur, namespace, seq)

    def _links_changed(
        self, cur: psycopg.Cursor, namespace: str, seq: int, touched: list[str], several: bool
    ) -> None:
        """The nodes ``touched`` (by the changes up to ``seq``) read again: their links and
        vectors now, their edges, rows and embeddings on next use."""
        if not touched:
            return
        fresh: dict[str, list[tuple[str, str]]] = {n: [] for n in touched}
        cur.execute(_SPREAD_LINKS, {"ns": namespace, "ids": touched})
        for n, eid, other in cur.fetchall():
            fresh[n].append((eid, other))
        gone: set[str] = set()  # entities deleted (their names went with them)
        if self.vectors is not None:  # new, changed, deleted nodes
            found = {
                r[0]: r
                for r in _vector_rows(
                    cur,
                    "SELECT id, kind, embedding FROM rr_nodes WHERE namespace = %s "
                    "AND id = ANY(%s) AND kind <> 'chunk'",
                    (namespace, touched),
                )
            }
            held = self.vectors
            before = {n for n in touched if n in held}
            for n in touched:
                row = found.get(n)
                if row is None:
                    self.vectors.drop(n)
                    if is_entity(n):
                        gone.add(n)
                elif len(row[2]) == self.vectors.dim:
                    self.vectors.put(n, row[1], row[2])
            if before != {n for n in touched if n in held}:
                self._corpus_changed(seq)
        for got in fresh.values():
            got.sort()
        if several or any(fresh[n] != self.links.get(n, []) for n in touched):
            self._corpus_changed(seq)
        # names: a name never moves to another node (kept on conflict) and goes only with
        # its node; a touched entity may have gained aliases
        if gone:  # a pass over every name, only when entities were deleted
            self.names = {k: n for k, n in self.names.items() if n not in gone}
        entities = [n for n in touched if is_entity(n) and n not in gone]
        if entities:
            cur.execute(
                "SELECT name, node_id FROM rr_entity_names WHERE namespace = %s "
                "AND node_id = ANY(%s)",
                (namespace, entities),
            )
            self.names.update(cur.fetchall())
        for n, got in fresh.items():
            self.edges.pop(n, None)
            self.embeddings.pop(n, None)
            self.nodes.pop(n, None)
            self.chunks.pop(n, None)
            if got:
                self.links[n] = got
            else:
                self.links.pop(n, None)

    def _memory_changed(
        self, cur: psycopg.Cursor, namespace: str, written: list[str] | None
    ) -> None:
        """The memory rows of the edges ``written`` (None: all) read again."""
        if written is None:
            self.memory = _memory_rows(cur, namespace, None)
            return
        if self.memory is None or not written:
            return
        fresh = _memory_rows(cur, namespace, written)
        for e in written:
            vec = fresh.get(e)
            if vec is None:
                self.memory.pop(e, None)
            else:
                self.memory[e] = vec

    def _reload(self, cur: psycopg.Cursor, namespace: str, seq: int) -> None:
        """Read the namespace's graph whole (its first read, or a cache too far behind)."""
        row = cur.execute(
            "SELECT (SELECT count(*) FROM rr_edges WHERE namespace = %(ns)s), "
            "(SELECT count(*) FROM rr_edge_memory WHERE namespace = %(ns)s), "
            "(SELECT count(*) FROM rr_chunks WHERE namespace = %(ns)s)",
            {"ns": namespace},
        ).fetchone()
        whole = int(row[0]) <= PRELOAD_EDGES if row else False  # every node's edges and row
        texts = int(row[2]) <= PRELOAD_TEXTS if row else False  # every chunk's text (BM25)
        memory = _memory_rows(cur, namespace, None) if row and row[1] <= PRELOAD_MEMORY else None
        cur.execute(
            "SELECT id, u, v, kind, text FROM rr_edges WHERE namespace = %s"
            + ("" if whole else " AND kind <> 'learned'"),
            (namespace,),
        )
        links: dict[str, list[tuple[str, str]]] = {}
        edges: dict[str, list[Edge]] = {}
        names: dict[str, str] = {}  # one string object per node id
        for eid, u, v, kind, text in cur.fetchall():
            u, v = names.setdefault(u, u), names.setdefault(v, v)
            if whole:
                edge = Edge(eid, u, v, kind, text)
                edges.setdefault(u, []).append(edge)
                if u != v:
                    edges.setdefault(v, []).append(edge)
            if kind == "learned":
                continue
            if not is_chunk(v):
                links.setdefault(u, []).append((eid, v))
            if u != v and not is_chunk(u):
                links.setdefault(v, []).append((eid, u))
        for got in links.values():
            got.sort()
        for mine in edges.values():
            mine.sort(key=lambda e: e.id)
        nodes: dict[str, Node] = {}
        if whole:
            cur.execute(
                "SELECT id, kind, name, doc_id, chunk_id, aliases FROM rr_nodes "
                "WHERE namespace = %s",
                (namespace,),
            )
            for r in cur.fetchall():
                node_id = names.setdefault(r[0], r[0])
                nodes[node_id] = Node(node_id, r[1], r[2], r[3], r[4], tuple(r[5]))
                edges.setdefault(node_id, [])  # a node without edges: none, no statement
        cur.execute("SELECT name, node_id FROM rr_entity_names WHERE namespace = %s", (namespace,))
        entity_names = {name: names.setdefault(n, n) for name, n in cur.fetchall()}
        # every entity's and anchor's embedding (the chunks' too when whole: a chunk's
        # neighbourhood then costs no statement either)
        rows = _vector_rows(
            cur,
            "SELECT n.id, n.kind, n.embedding FROM rr_nodes n JOIN rr_namespaces s "
            "ON s.namespace = n.namespace AND s.dim = n.dim "
            "WHERE n.namespace = %s"
            + ("" if whole else " AND n.kind <> 'chunk'")
            + " ORDER BY n.id",
            (namespace,),
        )
        embeddings = {names.setdefault(r[0], r[0]): r[2] for r in rows if r[1] == "chunk"}
        rows = [r for r in rows if r[1] != "chunk"]
        dims = {len(r[2]) for r in rows}
        self.vectors = (
            Vectors([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], dims.pop())
            if len(dims) == 1
            else None  # an empty namespace: the first catch-up with nodes reloads
        )
        self._reload_texts(cur, namespace, texts, seq)
        self.links, self.seq, self.whole, self.memory = links, seq, whole, memory
        self.names = entity_names
        self._matrix, self._older, self.corpus_from = None, [], seq
        self.edges, self.embeddings, self.nodes, self.chunks = edges, embeddings, nodes, {}
        self.reloads += 1

    def _reload_texts(self, cur: psycopg.Cursor, namespace: str, hold: bool, seq: int) -> None:
        """With the whole graph: every chunk's text, in a namespace of up to
        ``PRELOAD_TEXTS`` chunks (the lexical search's BM25, :meth:`lexical`); a bigger one
        holds none (full-text rank in SQL)."""
        self._lexical, self._older_lexical, self.texts_from = None, [], seq
        if not hold:
            self.texts = None
            return
        cur.execute("SELECT id, doc_id, text FROM rr_chunks WHERE namespace = %s", (namespace,))
        self.texts = {r[0]: (r[1], r[2]) for r in cur.fetchall()}

    def _catch_up_texts(
        self, cur: psycopg.Cursor, namespace: str, touched: Sequence[str], seq: int
    ) -> None:
        """The chunks a change names (a graph write names every chunk it writes or drops),
        read again; when one was added, removed or changed, the BM25 index is stale (built
        again on the next lexical search)."""
        texts = self.texts
        named = [n for n in touched if is_chunk(n)]
        if texts is None or not named:
            return
        cur.execute(
            "SELECT id, doc_id, text FROM rr_chunks WHERE namespace = %s AND id = ANY(%s)",
            (namespace, named),
        )
        found = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
        # over several changes the texts may have differed in between (a chunk added, then
        # dropped): the snapshots between them have no index of their texts
        changed = seq - self.seq > 1
        for c in named:
            row = found.get(c)
            if texts.get(c) != row:
                changed = True
                if row is None:
                    del texts[c]
                else:
                    texts[c] = row
        if changed:  # the index built before is kept (for older snapshots), as matrices
            if self._lexical is not None and self._lexical.version == self.texts_from:
                self._older_lexical = [
                    *self._older_lexical[-(KEEP_MATRICES - 1) :],
                    (self.seq, self._lexical),
                ]
            self._lexical, self.texts_from = None, seq

    def lexical(self, seq: int) -> Lexical | None:
        """The BM25 index of every chunk's text as of change ``seq`` (call after :meth:`at`,
        not under ``lock``): built on the first lexical search after a change of the texts,
        once for all the store's threads (outside ``lock``: other reads go on meanwhile);
        an older snapshot's is one kept from before the last changes of the texts; None
        when the texts are not held (a namespace of over PRELOAD_TEXTS chunks) or have changed
        since ``seq`` without an index kept (full-text rank in SQL)."""
        with self.lock:
            texts = self.texts
            if texts is None:
                return None
            if not self.texts_from <= seq <= self.seq:
                older = (x for last, x in self._older_lexical if x.version <= seq <= last)
                return next(older, None)
            version, built = self.texts_from, self._lexical
            if built is not None and built.version == version:
                return built
            items = [(c, d, t) for c, (d, t) in texts.items()]
        with self._lexical_lock:
            built = self._lexical
            if built is None or built.version != version:
                built = Lexical(version, items)
                with self.lock:
                    self.lexical_builds += 1
                    if self.texts_from == version:
                        self._lexical = built
            return built


class Lexical:
    """A BM25 index (the embedded store's, :class:`~..lexical.LexicalIndex`) of a
    namespace's chunk texts as of one version of them, with each chunk's document."""

    def __init__(self, version: int, items: Sequence[tuple[str, str, str]]) -> None:
        self.version = version
        self.index = LexicalIndex((c, text) for c, _, text in items)
        doc_of = {c: d for c, d, _ in items}
        self.docs = [doc_of[c] for c in self.index.ids]  # in the index's order

    def search(
        self, text: str, k: int, passing: Callable[[], Collection[str]] | None = None
    ) -> list[tuple[str, float]]:
        """The top-``k`` chunks by BM25, best first; with ``passing`` (the documents a
        filter passes, asked only when a chunk matches) only their chunks, scored as
        unfiltered (as the embedded store: one scale)."""
        allowed = None
        if passing is not None:

            def allowed(ids: list[str]) -> np.ndarray:
                ok = passing()
                return np.fromiter((d in ok for d in self.docs), bool, len(self.docs))

        return self.index.search(text, k, allowed)


def _memory_rows(
    cur: psycopg.Cursor, namespace: str, edge_ids: list[str] | None
) -> dict[str, np.ndarray]:
    """The memory rows of ``edge_ids`` (None: every edge's) of the namespace."""
    if edge_ids is None:
        cur.execute("SELECT edge_id, vec FROM rr_edge_memory WHERE namespace = %s", (namespace,))
    else:
        cur.execute(
            "SELECT edge_id, vec FROM rr_edge_memory WHERE namespace = %s AND edge_id = ANY(%s)",
            (namespace, edge_ids),
        )
    return {r[0]: r[1] for r in cur.fetchall()}
