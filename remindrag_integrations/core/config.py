"""Validated configuration. The defaults are docs/method.md's; every number there is a field here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import filters
from .types import ConfigError


class _Config(BaseModel):
    # strict: ``k=True`` or ``k="3"`` is refused, not read as 1 or 3 (an int is a float)
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    def with_overrides(self, **overrides: Any) -> Any:
        """A copy with some fields changed, validated like the original."""
        if not overrides:
            return self
        try:
            return type(self).model_validate({**self.model_dump(), **overrides})
        except ValidationError as exc:
            raise ConfigError(str(exc)) from exc

    @classmethod
    def build(cls, **values: Any) -> Any:
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ConfigError(str(exc)) from exc


class IndexConfig(_Config):
    """How documents become a graph."""

    chunk_tokens: int = Field(750, ge=16, le=100_000)
    chunk_overlap: int = Field(0, ge=0)
    synonym_threshold: float = Field(0.85, gt=0.0, le=1.0)
    max_concurrency: int = Field(4, ge=1, le=256)
    embed_batch_size: int = Field(256, ge=1)
    insert_batch_documents: int = Field(256, ge=1)  # committed together: resumable, bounded
    max_document_chars: int = Field(20_000_000, ge=1)
    max_entities_per_chunk: int = Field(40, ge=1)
    on_extraction_error: Literal["raise", "fallback"] = "raise"
    llm_titles: bool = True

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IndexConfig:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("chunk_overlap must be smaller than chunk_tokens")
        return self


class RetrievalConfig(_Config):
    """How a query walks the graph. Any field can be overridden per call."""

    k: int = Field(5, ge=1, le=1000)
    seeds: int = Field(2, ge=1, le=100)
    alpha: float = Field(0.1, ge=0.0, le=1.0)
    lam: float = Field(0.55, ge=-1.0, le=2.0)
    max_replay_nodes: int = Field(64, ge=0)
    # replay also starts at the anchors of the first pass's next best passages (up to this
    # many in all, seeds included): a rephrased question whose seeds moved still finds what
    # memory holds for it; such an anchor joins the subgraph only if memory leads on from it
    replay_starts: int = Field(10, ge=0, le=1000)
    max_hops: int = Field(10, ge=0)
    max_iterations: int = Field(20, ge=1)
    max_neighbors_shown: int = Field(30, ge=1)
    # bounds on one query's walk: traversal tokens (prompt + completion; None = no budget),
    # and decisions in a row that read no new chunk
    max_traversal_tokens: int | None = Field(20_000, ge=1)
    max_idle_decisions: int = Field(6, ge=1)
    # after an unusable reply and its re-ask: the zero-token navigator's choice, or stop
    on_invalid_move: Literal["fallback", "stop"] = "fallback"
    max_back_choices: int = Field(8, ge=0)
    max_subquestions: int = Field(1, ge=1, le=10)
    pre_query: bool = False
    verify_replay: bool = False
    fill_to_k: bool = True
    chunk_chars_in_prompt: int = Field(600, ge=50)
    llm_timeout: float | None = Field(120.0, gt=0)
    feedback_max_depth: int = Field(4, ge=1, le=10)
    # ranking: final score = first-pass score (cosine, plus the prior's lexical and graph
    # parts) + rank_memory_weight * (1 + prior weights) * memory evidence (0 = no memory)
    rank_memory_weight: float = Field(1.0, ge=0.0, le=10.0)
    # memorize() with no judge (zero-token, no supporting ids): "enhance" remembers the paths
    # to the similarity filter's chunks, "cache" those to every chunk read, both without
    # penalising; "full" also penalises the rest (docs/method.md §3 with the similarity filter); "off"
    # writes nothing
    self_memorize: Literal["enhance", "cache", "full", "off"] = "enhance"
    # memorize(answer=...): "citations" takes the chunks the answer cites ([c-...]; and
    # memorize's cited=) as the support, with no LLM call, when it cites any chunk the
    # retrieval read; "filter" always asks the judge (the LLM filter, or self_memorize)
    memorize_judge: Literal["citations", "filter"] = "citations"
    # a thumbs-up on named chunks (feedback chunk_ids) or memorize(supporting=...) says what
    # helped; True also penalises every other subgraph edge (docs/method.md §3, as the LLM filter does)
    named_support_penalises: bool = False
    # zero-token navigator
    nav_enough_chunks: int = Field(4, ge=1)
    nav_min_similarity: float = Field(0.2, ge=-1.0, le=1.0)
    nav_filter_top: int = Field(2, ge=1)
    # the first pass's prior (core/prior.py): hybrid lexical + dense candidates and a
    # personalised PageRank from the question's entities, fused into the score that picks
    # seeds, orders the navigator's choices and ranks; False = the paper's cosine-only pass
    prior: bool = True
    prior_lexical_weight: float = Field(0.2, ge=0.0, le=10.0)
    prior_graph_weight: float = Field(1.0, ge=0.0, le=10.0)
    prior_damping: float = Field(0.8, ge=0.0, lt=1.0)
    prior_iterations: int = Field(20, ge=1, le=1000)
    prior_hops: int = Field(4, ge=1, le=8)
    prior_max_nodes: int = Field(5000, ge=10)
    prior_max_degree: int = Field(500, ge=1)
    prior_candidates: int = Field(50, ge=1, le=10_000)
    prior_restart_passages: int = Field(5, ge=0, le=1000)
    prior_passage_restart: float = Field(0.0, ge=0.0, le=100.0)
    # a second PageRank round from the entities of the best ``prior_feedback_passages``
    # passages of the first (bridge entities: the second hop), with this share of the
    # question entities' restart mass; 0 = one round
    prior_feedback: float = Field(1.0, ge=0.0, le=100.0)
    prior_feedback_passages: int = Field(2, ge=1, le=100)
    # how the PageRank mass spreads (issue 25): a forward push (core/push.py) that reads the
    # edges only of nodes whose residual mass exceeds ``prior_push_epsilon`` × their degree,
    # one batched read per round (at most ``prior_iterations`` rounds), at most
    # ``prior_push_max_nodes`` nodes read; the same on every store. 0 = the power iteration
    # (the embedded store's whole-graph matrix, else the ``prior_hops`` neighbourhood)
    prior_push_epsilon: float = Field(3e-4, ge=0.0, le=0.1)
    prior_push_max_nodes: int = Field(300, ge=1)
    # metadata filter on documents (LangChain syntax; see core/filters.py)
    filter: dict[str, Any] | None = None

    @field_validator("filter", mode="before")
    @classmethod
    def _valid_filter(cls, value: Any) -> dict[str, Any] | None:
        return filters.normalise(value)

    @model_validator(mode="after")
    def _iterations_cover_hops(self) -> RetrievalConfig:
        if self.max_iterations < self.max_hops:
            raise ValueError("max_iterations must be >= max_hops")
        return self
