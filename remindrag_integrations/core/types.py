"""Plain data the engine passes around (the typed errors it raises are in :mod:`.errors`;
importing them from here still works for one release, with a deprecation warning).

Everything here is framework-free and JSON-serialisable through ``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, TypedDict

NodeKind = Literal["chunk", "anchor", "entity"]
EdgeKind = Literal["relation", "mention", "contains", "context", "learned"]
Stage = Literal["extraction", "pre_query", "traversal", "memorize", "answer"]
STAGES: tuple[Stage, ...] = ("extraction", "pre_query", "traversal", "memorize", "answer")


# ---------------------------------------------------------------------------------------------
# documents and the graph


@dataclass(frozen=True)
class Piece:
    """One piece of a document given already split (a text splitter's output, a loader's
    page, a LlamaIndex node): its text, its own metadata and, when the splitter or loader
    recorded it, its place in the document ``at = (page, start)`` and its parent's
    ``(id, hash)`` (a LlamaIndex node's ``SOURCE`` relationship). ``joins``: a child piece
    that names its parent (LangChain's ``metadata["doc_id"]``, the multi-vector convention):
    it is added to the stored parent's pieces instead of replacing them."""

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    at: tuple[int, int] | None = None
    parent: tuple[str, str] | None = None
    joins: bool = False


@dataclass(frozen=True)
class Document:
    """A source document as the engine sees it. A document given in pieces (``pieces``) is
    one document: its ``text`` is the pieces joined by a blank line, each piece is chunked on
    its own and keeps its metadata, ``metadata`` is what all pieces share, and a new version
    replaces every piece of the old one. ``aliases`` are ids an older release gave the same
    document (a path spelled otherwise, ``id#0``, ``id#1``, ...): stored documents with those
    ids are replaced by this one, their memory carried over."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    pieces: tuple[Piece, ...] = ()
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a document, with provenance (character offsets into the document)."""

    id: str
    doc_id: str
    index: int
    text: str
    start: int
    end: int
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # asdict's generic walk was most of a save's time (issue 35): the fields by hand
        return {
            "id": self.id,
            "doc_id": self.doc_id,
            "index": self.index,
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "metadata": copy.deepcopy(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Chunk:
        return cls(**d)


@dataclass(frozen=True, slots=True)
class Node:
    """A graph node. ``name`` is what prompts show: entity name, anchor title or chunk id."""

    id: str
    kind: NodeKind
    name: str
    doc_id: str | None = None
    chunk_id: str | None = None
    aliases: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "doc_id": self.doc_id,
            "chunk_id": self.chunk_id,
            "aliases": list(self.aliases),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Node:
        return cls(**{**d, "aliases": tuple(d.get("aliases", ()))})


@dataclass(frozen=True, slots=True)
class Edge:
    """An undirected edge; ``text`` is what prompts show for it."""

    id: str
    u: str
    v: str
    kind: EdgeKind
    text: str

    def other(self, node_id: str) -> str:
        return self.v if node_id == self.u else self.u

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "u": self.u, "v": self.v, "kind": self.kind, "text": self.text}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Edge:
        return cls(**d)


@dataclass(frozen=True, slots=True)
class Triple:
    """A relation edge on the retrieved path, as (subject, relation sentence, object)."""

    subject: str
    relation: str
    object: str
    edge_id: str


# ---------------------------------------------------------------------------------------------
# costs and traces


@dataclass
class StageCost:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # prompt tokens the provider served from its prompt cache (part of prompt_tokens)
    cached_prompt_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: StageCost) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_prompt_tokens += other.cached_prompt_tokens


class CostLedger:
    """LLM calls and tokens per stage."""

    def __init__(self, data: dict[str, StageCost] | None = None) -> None:
        self.stages: dict[str, StageCost] = {s: StageCost() for s in STAGES}
        for k, v in (data or {}).items():
            self.stages.setdefault(k, StageCost()).add(v)

    def record(
        self,
        stage: str,
        prompt_tokens: int,
        completion_tokens: int,
        calls: int = 1,
        cached_prompt_tokens: int = 0,
    ) -> None:
        self.stages.setdefault(stage, StageCost()).add(
            StageCost(calls, prompt_tokens, completion_tokens, cached_prompt_tokens)
        )

    def __repr__(self) -> str:
        used = ", ".join(
            f"{k}: {v.calls} calls / {v.tokens} tokens" for k, v in self.stages.items() if v.calls
        )
        return f"CostLedger({used or 'no LLM calls'})"

    def merge(self, other: CostLedger) -> None:
        for k, v in other.stages.items():
            self.stages.setdefault(k, StageCost()).add(v)

    @property
    def llm_calls(self) -> dict[str, int]:
        return {k: v.calls for k, v in self.stages.items()}

    @property
    def tokens(self) -> dict[str, int]:
        return {k: v.tokens for k, v in self.stages.items()}

    @property
    def total_calls(self) -> int:
        return sum(v.calls for v in self.stages.values())

    @property
    def total_tokens(self) -> int:
        return sum(v.tokens for v in self.stages.values())

    @property
    def cached_prompt_tokens(self) -> dict[str, int]:
        return {k: v.cached_prompt_tokens for k, v in self.stages.items()}

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {k: asdict(v) for k, v in self.stages.items()}

    @classmethod
    def from_dict(cls, d: dict[str, dict[str, int]]) -> CostLedger:
        return cls({k: StageCost(**v) for k, v in d.items()})


MoveAction = Literal["forward", "backward", "read", "stop", "invalid"]


@dataclass(frozen=True)
class Move:
    """One step of the walk. ``read`` is the free step that opens an anchor's chunk."""

    step: int
    action: MoveAction
    node_id: str | None = None
    from_node: str | None = None
    edge_id: str | None = None
    note: str = ""


@dataclass
class Trace:
    """Everything that happened during one retrieval, enough to memorize it later."""

    trace_id: str
    query: str
    query_embedding: list[float] = field(repr=False)  # hundreds of floats: not in repr()
    seeds: list[str] = field(default_factory=list)
    replayed_edges: list[str] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    # subgraph: node -> (parent node, edge that added it); seeds map to (None, None)
    parents: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    chunk_ids: list[str] = field(default_factory=list)
    costs: CostLedger = field(default_factory=CostLedger)
    stop_reason: str = ""
    subquestions: list[str] = field(default_factory=list)
    memorized: bool = False
    memory_result: dict[str, Any] | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    # traversal decisions asked for (LLM calls, or zero-token navigator decisions)
    decisions: int = 0
    # chunk id -> {"cosine", "memory", "score"}: why each returned chunk ranks where it does
    rank_evidence: dict[str, dict[str, float]] = field(default_factory=dict)
    # who walked and why: {"mode", "llm", "reason", and in "auto" the first pass's certainty
    # signals "margin", "agreement", "coverage"} (core/navigate/mode.py)
    navigation: dict[str, Any] = field(default_factory=dict)
    # no passage reached RetrievalConfig.min_score: nothing was returned, nothing is memorized
    abstained: bool = False

    @property
    def llm_calls(self) -> dict[str, int]:
        return self.costs.llm_calls

    @property
    def tokens(self) -> dict[str, int]:
        return self.costs.tokens

    @property
    def subgraph_edges(self) -> list[str]:
        return [e for _, e in self.parents.values() if e is not None]

    @property
    def traversal_calls(self) -> int:
        return self.costs.stages["traversal"].calls

    @property
    def unusable_replies(self) -> int:
        """Navigator replies that could not be used (each one re-asked or replaced)."""
        return sum(1 for m in self.moves if m.action == "invalid")

    @property
    def fallbacks(self) -> int:
        """Moves (or stops) the zero-token navigator made in place of an unusable re-ask."""
        return sum(1 for m in self.moves if m.note.startswith("fallback:"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "query": self.query,
            "query_embedding": list(self.query_embedding),
            "seeds": self.seeds,
            "replayed_edges": self.replayed_edges,
            "moves": [asdict(m) for m in self.moves],
            "parents": {k: list(v) for k, v in self.parents.items()},
            "chunk_ids": self.chunk_ids,
            "costs": self.costs.to_dict(),
            "stop_reason": self.stop_reason,
            "subquestions": self.subquestions,
            "memorized": self.memorized,
            "memory_result": self.memory_result,
            "timings_ms": self.timings_ms,
            "decisions": self.decisions,
            "rank_evidence": self.rank_evidence,
            "navigation": self.navigation,
            "abstained": self.abstained,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        return cls(
            trace_id=d["trace_id"],
            query=d["query"],
            query_embedding=list(d["query_embedding"]),
            seeds=list(d["seeds"]),
            replayed_edges=list(d["replayed_edges"]),
            moves=[Move(**m) for m in d["moves"]],
            parents={k: (v[0], v[1]) for k, v in d["parents"].items()},
            chunk_ids=list(d["chunk_ids"]),
            costs=CostLedger.from_dict(d["costs"]),
            stop_reason=d.get("stop_reason", ""),
            subquestions=list(d.get("subquestions", [])),
            memorized=bool(d.get("memorized", False)),
            memory_result=d.get("memory_result"),
            timings_ms=dict(d.get("timings_ms", {})),
            decisions=int(d.get("decisions", 0)),
            rank_evidence={k: dict(v) for k, v in d.get("rank_evidence", {}).items()},
            navigation=dict(d.get("navigation", {})),
            abstained=bool(d.get("abstained", False)),
        )


ChunkSource = Literal["seed", "replay", "traversal", "dense_fill"]


@dataclass(frozen=True)
class RetrievedChunk:
    """A returned chunk. ``score``: its relevance to the question in [0, 1], absolute (one
    cutoff means the same on every question and corpus: docs/retriever.md#scores);
    ``rank_score``: the fused score the ranking sorts by (first pass + memory evidence; not
    bounded, scaled to the best hit), the score itself when not given."""

    chunk: Chunk
    score: float
    source: ChunkSource
    rank_score: float | None = None

    def __post_init__(self) -> None:
        if self.rank_score is None:
            object.__setattr__(self, "rank_score", self.score)


@dataclass(frozen=True)
class Retrieval:
    """The result of one retrieval: ranked chunks, the triples on the path, and the trace."""

    query: str
    chunks: list[RetrievedChunk]
    triples: list[Triple]
    trace: Trace

    @property
    def trace_id(self) -> str:
        return self.trace.trace_id


@dataclass(frozen=True)
class Answer:
    text: str
    citations: list[str]
    retrieval: Retrieval

    @property
    def trace_id(self) -> str:
        return self.retrieval.trace_id


@dataclass(frozen=True)
class MemoryWrite:
    """What one memorize call did to the edge memory."""

    trace_id: str
    applied: bool
    enhanced: list[str]
    penalised: list[str]
    supporting_chunks: list[str]
    supporting_edges: list[str]
    skipped_reason: str = ""
    # learned edges made for named passages the graph had no path to (memory/write.py)
    linked: list[str] = field(default_factory=list)
    # named passages still not in the top k of a fresh retrieval of the question after the
    # write (only checked for named support: teach, a thumbs-up on chunk ids, supporting=)
    not_found: list[str] = field(default_factory=list)
    # answer citations (memorize(answer=...)) that name no chunk of the trace: ignored
    ignored_citations: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class IndexReport:
    documents: int
    skipped_documents: int
    chunks: int
    entities_added: int
    entities_merged: int
    relations: int
    source_tokens: int
    costs: CostLedger
    fallback_chunks: int = 0
    empty_documents: tuple[str, ...] = ()  # skipped: no text (named by source, else id)
    duplicate_documents: int = 0  # skipped: the same id and text given again in one insert
    # memory at the chunks and anchors of replaced documents: edges whose memory was
    # "kept" (unchanged chunks), "moved" (to an edited chunk's edges) or "dropped"
    memory: dict[str, int] = field(default_factory=dict)


def plus_written(t: IndexReport, r: IndexReport) -> IndexReport:
    """``t`` with what batch ``r`` wrote added: documents, chunks, entities, relations,
    tokens, fallbacks and the memory counts (the skips and costs are the caller's)."""
    return replace(
        t,
        documents=t.documents + r.documents,
        chunks=t.chunks + r.chunks,
        entities_added=t.entities_added + r.entities_added,
        entities_merged=t.entities_merged + r.entities_merged,
        relations=t.relations + r.relations,
        source_tokens=t.source_tokens + r.source_tokens,
        fallback_chunks=t.fallback_chunks + r.fallback_chunks,
        memory={k: t.memory.get(k, 0) + r.memory.get(k, 0) for k in {*t.memory, *r.memory}},
    )


class DeleteReport(TypedDict):
    """What ``delete(doc_ids)`` removed, and the ids it did not know (``not_found``: no
    error, as LlamaIndex's ``delete_ref_doc`` and LangChain's vector stores skip unknown ids;
    the library also logs a warning naming them). It is also LangChain's ``DeleteResponse``
    (what ``index()`` reads): ``succeeded`` the ids given that were found and deleted,
    ``num_deleted`` their number, ``failed`` / ``num_failed`` always empty / 0 (a delete is
    one transaction: it raises or deletes them all)."""

    documents: int
    chunks: int
    nodes: int
    edges: int
    not_found: list[str]
    succeeded: list[str]
    num_deleted: int
    failed: list[str]
    num_failed: int


@dataclass(frozen=True)
class MemoryStats:
    touched_edges: int
    writes_applied: int
    writes_skipped: int
    # what document updates and deletes on this engine did to memory (see IndexReport.memory)
    kept: int = 0
    moved: int = 0
    dropped: int = 0
