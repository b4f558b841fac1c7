"""The keyword arguments of ``ReMindRetriever.from_documents`` / ``from_texts`` as a
``TypedDict``, so an editor completes and a type checker checks them
(``from_documents(docs, chunk_tokens=300, k=4)``). The fields are :class:`IndexConfig`'s and
:class:`RetrievalConfig`'s (their docs say what each does), the frameworks' names for ``k``
and the filter, and where the graph lives; ``tests/test_polish.py`` keeps them in step with
the configs."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from ..core.config import MemoryConfig, NavigatorConfig, PriorConfig, PromptConfig


class RetrieverOptions(TypedDict, total=False):
    """Every field is optional; an unknown one is a ``ConfigError`` at run time."""

    # where the graph lives: a GraphStore, a store directory or a postgresql:// DSN; the tenant
    store: Any
    namespace: str
    # the frameworks' names for k and the filter (two different values of k: ConfigError)
    similarity_top_k: int
    search_kwargs: dict[str, Any]
    search_type: str
    score_threshold: float | None
    filters: Any
    # IndexConfig
    chunk_tokens: int
    chunk_overlap: int
    synonym_threshold: float
    max_concurrency: int
    workers: int | None
    embed_ahead: bool | None
    embed_batch_size: int
    insert_batch_documents: int
    max_document_chars: int
    max_entities_per_chunk: int
    on_extraction_error: Literal["raise", "fallback"]
    unnamed_edits: Literal["refuse", "add"]
    # RetrievalConfig
    k: int
    filter: dict[str, Any] | None
    fill_to_k: bool
    min_score: float | None
    seeds: int
    max_hops: int
    max_iterations: int
    max_neighbors_shown: int
    max_traversal_tokens: int | None
    max_idle_decisions: int
    llm_navigation: Literal["always", "never", "auto"]
    llm_timeout: float | None
    pre_query: bool
    max_subquestions: int
    verify_replay: bool
    on_invalid_move: Literal["fallback", "stop"]
    self_memorize: Literal["enhance", "cache", "full", "off"]
    memorize_judge: Literal["citations", "filter"]
    named_support_penalises: bool
    # the nested configs: the object, or a dict of the fields to change
    prior: PriorConfig | dict[str, Any]
    memory: MemoryConfig | dict[str, Any]
    navigator: NavigatorConfig | dict[str, Any]
    prompt: PromptConfig | dict[str, Any]
