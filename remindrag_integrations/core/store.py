"""The door for stores: what a graph store must do, and every optional capability it may have.

:class:`GraphStore` is what the method reads and writes. Each optional capability is a protocol
of its own, listed in :data:`CAPABILITIES`; a caller tests one with ``isinstance(store,
LexicalStore)`` (all are ``runtime_checkable``; a method set to ``None`` counts as absent) and
falls back to the plain reads without it. ``stores.BaseGraphStore`` derives most of
:class:`GraphStore` from a dozen essentials; ``stores.contract`` checks a store, capability by
capability. How to write one: ``docs/stores.md``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .types import Chunk, Edge, Node, NodeKind

MemoryFn = Callable[[np.ndarray], np.ndarray]
"""A memory write: the ``[n, dim]`` current vectors of the named edges in, the new ones out
(see :func:`~.memory.math.memory_update`)."""


@runtime_checkable
class GraphStore(Protocol):
    """Storage of the heterogeneous graph, node embeddings and sparse edge memory.

    Embeddings handed to a store are unit-normalised float32 rows. Memory vectors of untouched
    edges are implicitly zero and cost nothing.
    """

    namespace: str

    # --- size and documents ---------------------------------------------------------------
    @property
    def dim(self) -> int | None: ...

    def counts(self) -> dict[str, int]: ...

    def document_hash(self, doc_id: str) -> str | None: ...

    def document_ids(self) -> list[str]: ...

    def document_chunks(self, doc_id: str) -> list[Chunk]:
        """The document's chunks in order ([] when the store does not hold it)."""
        ...

    # --- writes ---------------------------------------------------------------------------
    def add_graph(
        self,
        *,
        documents: Sequence[tuple[str, str, dict]],
        chunks: Sequence[Chunk],
        nodes: Sequence[Node],
        embeddings: np.ndarray,
        edges: Sequence[Edge],
        entity_aliases: Mapping[str, Sequence[str]],
        replace: Sequence[str] = (),
        memory_moves: Mapping[str, str] | None = None,
    ) -> dict[str, int]:
        """Add documents ``(id, content hash, metadata)``, chunks, nodes (row i of
        ``embeddings`` belongs to ``nodes[i]``) and edges in one atomic step. Nodes and edges
        whose id exists are kept (entity aliases are extended instead). ``replace`` names
        documents whose old version this batch replaces: they are deleted in the same step
        (as :meth:`delete_documents`, but nodes the batch's edges use stay), and the memory
        of each removed edge named in ``memory_moves`` (old edge id -> new edge id, see
        :mod:`.memory.carry`) goes to its successor (added to what the successor holds,
        norm at most 1). Returns what became of the memory at the replaced documents'
        chunks and anchors: ``{"kept": edges whose memory stayed, "moved": edges whose
        memory moved, "dropped": edges whose memory went with them}``. Invalid input
        (embedding rows vs nodes, dimension, edges joining unknown nodes) raises before
        anything changes."""
        ...

    def delete_documents(self, doc_ids: Iterable[str]) -> dict[str, int]:
        """Remove the documents, their chunks and anchors, entities left with no mention, and
        every edge (with its memory) that touched a removed node. Returns removal counts."""
        ...

    # --- reads ----------------------------------------------------------------------------
    def get_node(self, node_id: str) -> Node: ...

    def get_nodes(self, node_ids: Sequence[str]) -> list[Node]: ...

    def get_chunk(self, chunk_id: str) -> Chunk: ...

    def get_edge(self, edge_id: str) -> Edge: ...

    def node_embeddings(self, node_ids: Sequence[str]) -> np.ndarray: ...

    def neighbors(self, node_id: str) -> list[Edge]: ...

    def search(
        self,
        query: np.ndarray,
        k: int,
        kinds: Sequence[NodeKind],
        where: Mapping[str, Any] | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k node ids of the given kinds by cosine similarity, best first. ``where`` (a
        :mod:`~.filters` dict) keeps only chunks and anchors of documents whose metadata
        passes it; entities always pass."""
        ...

    def whole_graph(self) -> tuple[list[Node], list[Edge]]:
        """Every node and edge of the namespace (for exports and views, not the query path)."""
        ...

    def find_entity_by_name(self, normalized_name: str) -> str | None: ...

    # --- memory ---------------------------------------------------------------------------
    def memory(self, edge_ids: Sequence[str]) -> np.ndarray:
        """Memory vectors of the edges, one row each (zeros for untouched edges)."""
        ...

    def update_memory(
        self, edge_ids: Sequence[str], fn: MemoryFn, links: Sequence[Edge] = ()
    ) -> np.ndarray:
        """Replace the memory of the distinct ``edge_ids`` by ``fn(current)`` atomically:
        ``current`` holds their vectors (zeros for untouched edges) read under the store's
        lock, so no concurrent update is lost. ``links``: ``learned`` edges to add first (in
        the same atomic step; one that exists already is kept as it is), so ``edge_ids`` may
        name them. Unknown edges or link ends raise :class:`~.errors.UnknownNodeError`, a
        link of another kind :class:`~.errors.InvalidArgumentError`, a result of the wrong
        shape or not finite :class:`~.errors.EmbeddingError`; either way nothing is written.
        Returns the new rows."""
        ...

    def touched_edges(self) -> int: ...

    def top_memory(self, query: np.ndarray | None, k: int) -> list[tuple[str, float]]:
        """Edges with the strongest memory (by norm, or by alignment with ``query``)."""
        ...

    def reset_memory(self) -> int: ...

    def decay_memory(self, factor: float) -> int: ...

    def export_memory(self) -> dict[str, list[float]]: ...

    def import_memory(self, vectors: dict[str, list[float]]) -> int: ...

    # --- traces ---------------------------------------------------------------------------
    def save_trace(self, trace: dict) -> None: ...

    def load_trace(self, trace_id: str) -> dict | None: ...

    def recent_traces(self, limit: int) -> list[dict]:
        """Up to ``limit`` saved traces, the most recently first saved first."""
        ...

    # --- persistence ----------------------------------------------------------------------
    def flush(self) -> None:
        """Make every write durable (no-op for stores that write through)."""
        ...


# --- optional capabilities --------------------------------------------------------------------


@runtime_checkable
class LexicalStore(Protocol):
    """Ranks chunks by words (BM25 or full-text search): the lexical half of the prior's
    hybrid first pass. Without it the first pass is dense only."""

    def lexical_search(
        self, text: str, k: int, where: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """Top-k chunk ids by lexical score (> 0), best first; ``where`` as in ``search``."""
        ...


@runtime_checkable
class SnapshotStore(Protocol):
    """Gives a reader one consistent version of the graph for as long as it reads (the
    embedded store: a copy-on-write view; PostgreSQL: one ``REPEATABLE READ`` read-only
    transaction). Every retrieve reads through one; see :func:`reading`. Without it a
    retrieve reads the live store."""

    def snapshot(self) -> AbstractContextManager[Any]:
        """A context whose value is a read-only store of the same reading methods."""
        ...


@dataclass(frozen=True)
class Neighborhood:
    """A node, its embedding, its edges (ordered by id, as ``neighbors``) with their memory
    rows (zeros for untouched edges), and the node and embedding at the other end of every
    edge that has memory (the ones replay may follow)."""

    node: Node
    embedding: np.ndarray
    edges: tuple[Edge, ...]
    memory: np.ndarray
    remembered: Mapping[str, tuple[Node, np.ndarray]] = field(default_factory=dict)


@dataclass(frozen=True)
class Follow:
    """Read ahead along memory: also the neighbourhoods of the nodes reachable through edges
    whose memory ``v`` has ``query · v > min_alignment`` (what replay may follow), nearest
    first, at most ``max_nodes`` more and ``max_depth`` edges away."""

    query: np.ndarray
    min_alignment: float
    max_nodes: int
    max_depth: int = 8


@runtime_checkable
class FrontierStore(Protocol):
    """Reads the neighbourhoods of many nodes in one call (PostgreSQL: one statement). Without
    it :func:`~.frontier.neighborhoods` assembles them from the plain reads."""

    def neighborhoods(
        self, node_ids: Sequence[str], follow: Follow | None = None
    ) -> dict[str, Neighborhood]:
        """The neighbourhood of each distinct node (and, with ``follow``, of the nodes it
        reaches through remembered edges); an unknown node raises
        :class:`~.errors.UnknownNodeError`."""
        ...


@runtime_checkable
class AdjacencyStore(Protocol):
    """Reads the edges of many nodes in one call (no embeddings, no memory: what the prior's
    PageRank and the zero-token navigator's look-ahead need). Without it, ``neighbors`` node
    by node."""

    def adjacency(self, node_ids: Sequence[str]) -> dict[str, list[Edge]]:
        """Each distinct node's edges, ordered by id (as ``neighbors``); an unknown node
        raises :class:`~.errors.UnknownNodeError`."""
        ...


@runtime_checkable
class BatchSearchStore(Protocol):
    """Searches many query rows at once (one matrix product or one batched ANN search): what
    indexing's synonym merge uses. Without it, one ``search`` per row."""

    def search_many(
        self,
        queries: np.ndarray,
        k: int,
        kinds: Sequence[NodeKind],
        where: Mapping[str, Any] | None = None,
    ) -> list[list[tuple[str, float]]]:
        """``search`` for each row of ``queries``, in order."""
        ...


class SparseMatrix(Protocol):
    """A square sparse matrix in CSR form, as ``scipy.sparse.csr_array`` / ``csr_matrix``
    keep one: row ``i``'s entries are in columns ``indices[indptr[i]:indptr[i + 1]]`` with
    values ``data[indptr[i]:indptr[i + 1]]``; ``matrix @ vector`` multiplies."""

    @property
    def indptr(self) -> np.ndarray: ...

    @property
    def indices(self) -> np.ndarray: ...

    @property
    def data(self) -> np.ndarray: ...

    def __matmul__(self, other: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class GraphMatrixView(Protocol):
    """The graph of entities and anchors and the corpus's edges between them (no chunks, no
    learned edges) as a matrix: data only. The prior's PageRank and push run over it in core
    (``core/pagerank.py``, ``core/push.py``)."""

    @property
    def ids(self) -> Sequence[str]:
        """Row -> node id."""
        ...

    @property
    def pos(self) -> Mapping[str, int]:
        """Node id -> row."""
        ...

    @property
    def adjacency(self) -> SparseMatrix:
        """Symmetric: one entry per pair of joined rows, its value the edges joining them."""
        ...

    @property
    def degree(self) -> np.ndarray:
        """Edges per row (its entries' values summed)."""
        ...

    @property
    def anchors(self) -> np.ndarray:
        """The rows that are anchors."""
        ...

    @property
    def entities(self) -> np.ndarray:
        """True on the rows that are entities."""
        ...


@runtime_checkable
class MatrixStore(Protocol):
    """Keeps the whole graph as a matrix (the embedded store): the prior's PageRank runs over
    all of it. Without it (or under a metadata filter) it runs over the store's reads of the
    question's local graph."""

    def graph_matrix(self) -> GraphMatrixView: ...


@runtime_checkable
class SettingsStore(Protocol):
    """Keeps JSON settings beside its data (PostgreSQL does, per namespace). The CLI keeps the
    embedding model a store was built with there; a store kept in a directory has
    ``cli.json`` beside it instead."""

    def settings(self) -> dict[str, Any]: ...

    def update_settings(self, values: dict[str, Any]) -> None: ...


@runtime_checkable
class TraceClaims(Protocol):
    """A store shared by several processes claims a trace for its one memory write
    (PostgreSQL does, in the trace's row), so a trace is memorized exactly once however many
    processes try. An engine claims before it writes and releases the claim if nothing was
    written; saving the memorized trace ends the claim. Without it the exactly-once guard is
    the engine's own (one process)."""

    def claim_trace(self, trace_id: str) -> bool:
        """True when this caller won the trace: it exists, is not memorized, not claimed."""
        ...

    def release_trace(self, trace_id: str) -> None: ...


@runtime_checkable
class SpreadStore(Protocol):
    """A store that reads, for many nodes in one call, the other ends of their corpus edges
    to entities and anchors (no chunk ends, no learned edges), in edge id order: what the
    prior's push (core/push.py) spreads over, without the edges' columns."""

    def spread_links(self, node_ids: Sequence[str]) -> dict[str, list[str]]:
        """Each distinct node's other ends (nodes without such edges: an empty list)."""
        ...


@runtime_checkable
class ChunkBatchStore(Protocol):
    """Reads many chunks in one call (PostgreSQL: one statement): what ranking a query's
    results reads. Without it, ``get_chunk`` chunk by chunk."""

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks, in the order asked (repeats included); an unknown id raises
        :class:`~.errors.UnknownNodeError`."""
        ...


@runtime_checkable
class EntityNameStore(Protocol):
    """Looks many normalised entity names up in one call (PostgreSQL: one statement): what
    an insert asks of every name a batch extracts. Without it, ``find_entity_by_name`` name
    by name."""

    def find_entities_by_name(self, normalized_names: Sequence[str]) -> dict[str, str]:
        """Each of the names that names an entity (its name or an alias), mapped to that
        entity's id, as ``find_entity_by_name``; names of no entity are left out."""
        ...


CAPABILITIES: Mapping[str, type] = {
    "lexical": LexicalStore,
    "snapshot": SnapshotStore,
    "frontier": FrontierStore,
    "adjacency": AdjacencyStore,
    "spread_links": SpreadStore,
    "chunks": ChunkBatchStore,
    "entity_names": EntityNameStore,
    "batch_search": BatchSearchStore,
    "graph_matrix": MatrixStore,
    "settings": SettingsStore,
    "trace_claims": TraceClaims,
}
"""Every optional capability by name (the names the store contract's test ids use)."""


def find_entities(store: GraphStore, normalized_names: Sequence[str]) -> dict[str, str]:
    """Each of the names that names an entity, mapped to its id: one call where the store
    has :class:`EntityNameStore`, else ``find_entity_by_name`` name by name."""
    if isinstance(store, EntityNameStore):
        return store.find_entities_by_name(normalized_names)
    return {k: e for k in dict.fromkeys(normalized_names) if (e := store.find_entity_by_name(k))}


def capabilities(store: object) -> frozenset[str]:
    """The names (keys of :data:`CAPABILITIES`) of the optional capabilities ``store`` has."""
    return frozenset(name for name, proto in CAPABILITIES.items() if isinstance(store, proto))


def reading(store: GraphStore) -> AbstractContextManager[GraphStore]:
    """What a reader should read through: ``store.snapshot()`` when the store has snapshots
    (one version for the whole read), else the store itself."""
    if isinstance(store, SnapshotStore):
        return store.snapshot()
    return contextlib.nullcontext(store)
