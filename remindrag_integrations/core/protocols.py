"""The plug points: a chat LLM, an embedder and a graph store.

Adapters for LangChain / LlamaIndex objects live in ``llms.py`` and ``embeddings.py``; stores in
``stores/``. A store must pass ``remindrag_integrations.testing.store_contract``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from .types import Chunk, Edge, Node, NodeKind


@dataclass(frozen=True)
class Completion:
    """One LLM reply with its token usage (from the provider, else counted)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool = False  # served from a response cache: no LLM call, no tokens spent
    # prompt tokens the provider read from its prompt / prefix cache (part of prompt_tokens)
    cached_prompt_tokens: int = 0


@runtime_checkable
class ChatLLM(Protocol):
    """A chat model reduced to what the engine needs: one user prompt in, one reply out."""

    def complete(self, prompt: str) -> Completion: ...

    async def acomplete(self, prompt: str) -> Completion: ...


@runtime_checkable
class Embedder(Protocol):
    """Texts in, one row per text out (any float dtype; the engine normalises)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class MemoryUpdateResult:
    enhanced: int
    penalised: int


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
    ) -> None:
        """Add documents ``(id, content hash, metadata)``, chunks, nodes (row i of
        ``embeddings`` belongs to ``nodes[i]``) and edges in one step. Nodes and edges whose id
        exists are kept (entity aliases are extended instead)."""
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
        self, query: np.ndarray, k: int, kinds: Sequence[NodeKind]
    ) -> list[tuple[str, float]]:
        """Top-k node ids of the given kinds by cosine similarity, best first."""
        ...

    def find_entity_by_name(self, normalized_name: str) -> str | None: ...

    # --- memory ---------------------------------------------------------------------------
    def memory(self, edge_ids: Sequence[str]) -> np.ndarray:
        """Memory vectors of the edges, one row each (zeros for untouched edges)."""
        ...

    def update_memory(
        self, enhance: Sequence[str], penalise: Sequence[str], query: np.ndarray
    ) -> MemoryUpdateResult:
        """Apply SPEC §3 to the edges atomically: no concurrent update may be lost."""
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

    # --- persistence ----------------------------------------------------------------------
    def flush(self) -> None:
        """Make every write durable (no-op for stores that write through)."""
        ...
