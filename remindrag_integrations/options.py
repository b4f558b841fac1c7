"""The keyword arguments of ``ReMindRetriever.from_documents`` / ``from_texts`` as a
``TypedDict``, so an editor completes and a type checker checks them
(``from_documents(docs, chunk_tokens=300, k=4)``). The fields are :class:`IndexConfig`'s and
:class:`RetrievalConfig`'s (their docs say what each does), the frameworks' names for ``k``
and the filter, and where the graph lives; ``tests/test_polish.py`` keeps them in step with
the configs."""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class RetrieverOptions(TypedDict, total=False):
    """Every field is optional; an unknown one is a ``ConfigError`` at run time."""

    # where the graph lives: a GraphStore, a store directory or a postgresql:// DSN; the tenant
    store: Any
    namespace: str
    # the frameworks' names for k and the filter (two different values of k: ConfigError)
    similarity_top_k: int
    search_kwargs: dict[str, Any]
    search_type: str
    filters: Any
    # IndexConfig
    chunk_tokens: int
    chunk_overlap: int
    synonym_threshold: float
    max_concurrency: int
    embed_batch_size: int
    insert_batch_documents: int
    max_document_chars: int
    max_entities_per_chunk: int
    on_extraction_error: Literal["raise", "fallback"]
    llm_titles: bool
    # RetrievalConfig
    k: int
    seeds: int
    alpha: float
    lam: float
    max_replay_nodes: int
    replay_starts: int
    max_hops: int
    max_iterations: int
    max_neighbors_shown: int
    max_traversal_tokens: int | None
    max_idle_decisions: int
    on_invalid_move: Literal["fallback", "stop"]
    max_back_choices: int
    max_subquestions: int
    pre_query: bool
    verify_replay: bool
    fill_to_k: bool
    chunk_chars_in_prompt: int
    llm_timeout: float | None
    feedback_max_depth: int
    rank_memory_weight: float
    self_memorize: Literal["enhance", "cache", "full", "off"]
    memorize_judge: Literal["citations", "filter"]
    named_support_penalises: bool
    nav_enough_chunks: int
    nav_min_similarity: float
    nav_filter_top: int
    prior: bool
    prior_lexical_weight: float
    prior_graph_weight: float
    prior_damping: float
    prior_iterations: int
    prior_hops: int
    prior_max_nodes: int
    prior_max_degree: int
    prior_candidates: int
    prior_restart_passages: int
    prior_passage_restart: float
    prior_feedback: float
    prior_feedback_passages: int
    prior_push_epsilon: float
    prior_push_max_nodes: int
    filter: dict[str, Any] | None
