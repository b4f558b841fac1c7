"""The state of one query (docs/method.md §2), in rooms: the growing subgraph (:class:`Walk`:
seeds, then nodes added by replay or by the navigator, each through one edge), its read cache
(:class:`StoreReads`: store reads are kept per query, so a remote store pays each lookup once),
and each stage's immutable result (:class:`Prior` here, then :class:`.navigate.mode.Navigation`,
:class:`Stop` and :class:`.ranking.Ranked`, each returned by its stage, none written on the
walk)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from . import filters
from .config import RetrievalConfig
from .frontier import Follow, FrontierStore, adjacency, neighborhoods
from .ids import is_chunk
from .store import ChunkBatchStore, GraphStore
from .types import Chunk, Edge, Move, Node, NodeKind, Triple

Parents = dict[str, tuple[str | None, str | None]]


@dataclass(frozen=True)
class Prior:
    """The first pass's scores (built by :func:`.prior.build`, kept by the walk): per chunk
    the fused score and its parts; per node the graph (PPR) mass."""

    score: dict[str, float] = field(default_factory=dict)
    parts: dict[str, dict[str, float]] = field(default_factory=dict)
    graph: dict[str, float] = field(default_factory=dict)
    graph_scale: float = 1.0  # what the graph part counts for this question (prior.hub_mentions)

    def ranked(self) -> list[str]:
        """Candidate chunks, best first (ties by id)."""
        return sorted(self.score, key=lambda c: (-self.score[c], c))


class StopReason(StrEnum):
    """Why a query's walk ended (the trace's ``stop_reason``: these values are what stored
    traces hold, so they never change; ``llm_error`` is written with the error after it)."""

    NONE = ""
    NO_RETRIEVAL_NEEDED = "no_retrieval_needed"  # the pre-query said no retrieval is needed
    EMPTY_GRAPH = "empty_graph"  # no seed: nothing indexed (or nothing the filter allows)
    BELOW_MIN_SCORE = "below_min_score"  # abstained: the question is off the corpus
    REPLAY = "replay"  # memory answered: no walk
    MAX_HOPS = "max_hops"
    MAX_ITERATIONS = "max_iterations"
    TOKEN_BUDGET = "token_budget"
    NO_PROGRESS = "no_progress"  # max_idle_decisions without a new chunk
    EXHAUSTED = "exhausted"  # nothing left to explore
    ENOUGH = "enough"  # the navigator said so
    INVALID_LLM_OUTPUT = "invalid_llm_output"
    FALLBACK_ENOUGH = "fallback_enough"  # the zero-token fallback said enough
    LLM_ERROR = "llm_error"


@dataclass(frozen=True)
class Stop:
    """The walk stage's result: why it ended, and the error's words for ``llm_error``."""

    reason: StopReason = StopReason.NONE
    detail: str = ""

    def __str__(self) -> str:
        """What the trace keeps (``"llm_error: <the error>"`` with a detail)."""
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


class StoreReads:
    """The read cache of one query: every store read the stages make goes through it, so a
    remote store pays each lookup once per query (node, edges, embeddings, memory, chunks,
    cosine to the question, and whether the metadata filter lets a document in)."""

    def __init__(self, store: GraphStore, q_hat: np.ndarray, where: dict | None) -> None:
        self.store, self.q_hat, self.where = store, q_hat, where
        self.filter = filters.parse(where)
        self._nbrs: dict[str, list[Edge]] = {}
        self._plain: dict[str, list[Edge]] = {}  # _nbrs without learned edges
        self._edges: dict[str, Edge] = {}
        self._nodes: dict[str, Node] = {}
        self._chunks: dict[str, Chunk] = {}
        self._sims: dict[str, float] = {}
        self._embs: dict[str, np.ndarray] = {}
        self._memory: dict[str, np.ndarray] = {}
        self._read: set[str] = set()  # nodes whose neighbourhood was read
        self._doc_ok: dict[str, bool] = {}

    def neighbors(self, node_id: str, learned: bool = False) -> list[Edge]:
        """The node's edges; ``learned`` edges (links memory made) only when asked for:
        replay follows them, the prior and the navigators see the corpus's graph alone."""
        if node_id not in self._nbrs:
            self._keep_edges(node_id, self.store.neighbors(node_id))
        return self._nbrs[node_id] if learned else self._plain[node_id]

    def cached_neighbors(self, node_id: str) -> list[Edge] | None:
        """The neighbours already read for ``node_id`` (None when not read yet; no learned
        edges)."""
        return self._plain.get(node_id)

    def _keep_edges(self, node_id: str, edges: list[Edge]) -> None:
        """Cache a node's edges (the lists are shared: callers never change them)."""
        self._nbrs[node_id] = edges
        self._plain[node_id] = [e for e in edges if e.kind != "learned"]
        self._edges.update((e.id, e) for e in edges)

    def prefetch(self, node_ids: Sequence[str], follow: Follow | None = None) -> None:
        """Read the neighbourhoods (node, embedding, edges, their memory, remembered
        neighbours) of the nodes not read yet, and with ``follow`` of what they reach through
        memory, in one store call (one round trip on PostgreSQL)."""
        missing = [n for n in dict.fromkeys(node_ids) if n not in self._read]
        if not missing:
            return
        for node_id, hood in neighborhoods(self.store, missing, follow).items():
            if node_id in self._read:
                continue
            self._read.add(node_id)
            self._keep_edges(node_id, list(hood.edges))
            self._nodes[node_id], self._embs[node_id] = hood.node, hood.embedding
            self._memory.update((e.id, m) for e, m in zip(hood.edges, hood.memory))
            for other, (node, emb) in hood.remembered.items():
                self._nodes.setdefault(other, node)
                self._embs.setdefault(other, emb)

    def prefetch_edges(self, node_ids: Sequence[str]) -> None:
        """Read the edges of the nodes whose edges are not read yet, in one store call (one
        round trip on PostgreSQL; no embeddings or memory: see :meth:`prefetch`)."""
        missing = [n for n in dict.fromkeys(node_ids) if n not in self._nbrs]
        if not missing:
            return
        for node_id, edges in adjacency(self.store, missing).items():
            if node_id not in self._nbrs:
                self._keep_edges(node_id, edges)

    def embeddings(self, node_ids: Sequence[str]) -> np.ndarray:
        """The nodes' embeddings (one store call for those not read yet)."""
        missing = [n for n in dict.fromkeys(node_ids) if n not in self._embs]
        if missing:
            self._embs.update(zip(missing, self.store.node_embeddings(missing)))
        if not node_ids:
            return np.zeros((0, len(self.q_hat)), dtype=np.float32)
        return np.stack([self._embs[n] for n in node_ids])

    def memory(self, edge_ids: Sequence[str]) -> np.ndarray:
        """The edges' memory rows (one store call for those not read yet)."""
        missing = [e for e in dict.fromkeys(edge_ids) if e not in self._memory]
        if missing:
            self._memory.update(zip(missing, self.store.memory(missing)))
        if not edge_ids:
            return np.zeros((0, len(self.q_hat)), dtype=np.float32)
        return np.stack([self._memory[e] for e in edge_ids])

    def edge(self, edge_id: str) -> Edge:
        if edge_id not in self._edges:
            self._edges[edge_id] = self.store.get_edge(edge_id)
        return self._edges[edge_id]

    def nodes(self, node_ids: Sequence[str]) -> list[Node]:
        """The nodes, fetched from the store in one call for those not seen yet."""
        missing = [n for n in dict.fromkeys(node_ids) if n not in self._nodes]
        if missing:
            self._nodes.update((n.id, n) for n in self.store.get_nodes(missing))
        return [self._nodes[n] for n in node_ids]

    def chunk(self, chunk_id: str) -> Chunk:
        if chunk_id not in self._chunks:
            self._chunks[chunk_id] = self.store.get_chunk(chunk_id)
        return self._chunks[chunk_id]

    def chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks, those not read yet in one store call when the store reads many at
        once (one statement on PostgreSQL), else one by one."""
        missing = [c for c in dict.fromkeys(chunk_ids) if c not in self._chunks]
        if missing and isinstance(self.store, ChunkBatchStore):
            self._chunks.update(zip(missing, self.store.get_chunks(missing)))
        return [self.chunk(c) for c in chunk_ids]

    def sims(self, node_ids: Sequence[str]) -> list[float]:
        """cos(q̂, node) for each node (embeddings are unit rows)."""
        missing = [n for n in dict.fromkeys(node_ids) if n not in self._sims]
        if missing:
            vals = self.embeddings(missing) @ self.q_hat
            self._sims.update(zip(missing, (float(v) for v in vals)))
        return [self._sims[n] for n in node_ids]

    def allowed(self, node_ids: Sequence[str]) -> list[bool]:
        """Whether the metadata filter lets the walk enter each node: entities always, an
        anchor or chunk when its document passes (decided once per document)."""
        if self.filter is None:
            return [True] * len(node_ids)
        out = []
        for node in self.nodes(node_ids):
            doc, chunk = node.doc_id, node.chunk_id or (node.id if is_chunk(node.id) else None)
            if node.kind == "entity" or doc is None or chunk is None:
                out.append(True)
                continue
            if doc not in self._doc_ok:
                self._doc_ok[doc] = self.filter.test(self.chunk(chunk).metadata)
            out.append(self._doc_ok[doc])
        return out

    def search(
        self, query: np.ndarray, n: int, kinds: Sequence[NodeKind]
    ) -> list[tuple[str, float]]:
        """The store's top-``n`` nodes of ``kinds`` that the filter allows (the store applies
        it: in SQL for PostgreSQL)."""
        return self.store.search(query, n, kinds, where=self.where)


@dataclass
class Walk:
    """The growing subgraph of one query: every node but the seeds was added through one edge
    (``parents``: node -> (parent, edge)); ``sources`` says how each chunk arrived (seed,
    replay or traversal). ``reads`` is the query's read cache (:class:`StoreReads`);
    ``prior`` the first pass's result (set once, before the seeds)."""

    store: GraphStore
    q_hat: np.ndarray
    cfg: RetrievalConfig
    parents: Parents = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    moves: list[Move] = field(default_factory=list)
    replayed_edges: list[str] = field(default_factory=list)
    hops: int = 0
    asks: int = 0
    prior: Prior | None = None  # the first pass's fused scores (core/prior.py)
    reads: StoreReads = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.reads = StoreReads(self.store, self.q_hat, self.cfg.filter)

    def frontier(self, node_id: str, learned: bool = False) -> list[Edge]:
        """Edges from ``node_id`` to nodes not yet in the subgraph that the filter allows
        (``learned`` edges too when asked for: replay)."""
        reads = self.reads
        edges = [
            e for e in reads.neighbors(node_id, learned) if e.other(node_id) not in self.parents
        ]
        if reads.filter is None or not edges:
            return edges
        ok = reads.allowed([e.other(node_id) for e in edges])
        return [e for e, keep in zip(edges, ok) if keep]

    # --- growing the subgraph ---------------------------------------------------------------
    def add(self, node_id: str, parent: str | None, edge: Edge | None, source: str) -> None:
        """Add a node; entering an anchor reads its chunk (a free ``read`` move). A node a
        move enters is read whole (node, embedding, edges, their memory: what entering it and
        the next step's options read) in one call on a store that answers neighbourhoods in
        one round trip (PostgreSQL: one statement instead of three)."""
        if source == "traversal" and isinstance(self.store, FrontierStore):
            self.reads.prefetch([node_id])
        self.parents[node_id] = (parent, edge.id if edge else None)
        (node,) = self.reads.nodes([node_id])
        if node.kind == "chunk":
            self.sources.setdefault(node_id, source)
        elif node.kind == "anchor" and node.chunk_id and node.chunk_id not in self.parents:
            contains = next(e for e in self.reads.neighbors(node_id) if e.kind == "contains")
            self.parents[node.chunk_id] = (node_id, contains.id)
            self.sources.setdefault(node.chunk_id, source)
            if source == "traversal":
                note = "anchor entered: chunk read"
                self.moves.append(
                    Move(len(self.moves), "read", node.chunk_id, node_id, contains.id, note)
                )

    @property
    def chunk_ids(self) -> list[str]:
        return list(self.sources)

    @property
    def seeds(self) -> list[str]:
        return [n for n, (p, _) in self.parents.items() if p is None]

    def graph_nodes(self) -> list[str]:
        """Subgraph nodes a navigator can stand on (chunks are read, never visited)."""
        return [n for n in self.parents if not is_chunk(n)]


def find_seeds(
    store: GraphStore | StoreReads, query_vecs: Sequence[np.ndarray], n: int
) -> list[str]:
    """Top-``n`` entity / anchor nodes per (sub)query, best first, without repeats (given a
    :class:`StoreReads`, only those its filter allows)."""
    seeds: list[str] = []
    for q in query_vecs:
        for node_id, _ in store.search(q, n, ("entity", "anchor")):
            if node_id not in seeds:
                seeds.append(node_id)
    return seeds


def path_triples(walk: Walk) -> list[Triple]:
    """The relation edges of the subgraph as (subject, sentence, object) triples."""
    out = []
    for _, eid in walk.parents.values():
        if eid is None:
            continue
        e = walk.reads.edge(eid)
        if e.kind == "relation":
            u, v = walk.reads.nodes([e.u, e.v])
            out.append(Triple(u.name, e.text, v.name, e.id))
    return out
