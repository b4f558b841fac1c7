"""Validated configuration. The defaults are docs/method.md's; every number there is a field here.

:class:`RetrievalConfig` shows first what a user sets (how many results, which documents, the
walk's bounds, the LLM stages, the memory policy); the method's inner knobs live in nested
configs with their own docs: :class:`PriorConfig` (the first pass), :class:`MemoryConfig`
(replay, ranking, the write's paths), :class:`NavigatorConfig` (the zero-token navigator) and
:class:`PromptConfig` (what an LLM prompt shows). The reference is docs/config.md.

A new knob goes into the nested config of the stage that reads it (``cfg.prior.x`` in
core/prior.py); only a choice a user makes per application belongs at the top. A name that is
no field is a :class:`~.errors.ConfigError` naming the nearest fields (a nested config's field
given flat, ``prior_damping``, is named as ``prior={'damping': ...}``).
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import filters
from .errors import ConfigError

RECOMMENDED_MIN_SCORE = 0.525
"""The relevance cutoff measured with the packaged embedder (all-MiniLM-L6-v2) on the dev
sets (benchmarks/score_calibration.py, docs/retriever.md#scores): ``min_score``,
LlamaIndex's ``SimilarityPostprocessor(similarity_cutoff=...)`` and LangChain's
``score_threshold``. Another embedder has its own cosine scale: measure it with the script."""


class _Config(BaseModel):
    # strict: ``k=True`` or ``k="3"`` is refused, not read as 1 or 3 (an int is a float)
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    if not TYPE_CHECKING:  # type checkers keep the fields' own signature

        def __init__(self, **values: Any) -> None:
            try:  # a bad value is a ConfigError here too, as in build() and with_overrides()
                super().__init__(**values)
            except ValidationError as exc:
                raise _config_error(type(self), exc) from None

    def with_overrides(self, **overrides: Any) -> Any:
        """A copy with some fields changed, validated like the original. A nested config
        given as a dict changes only the keys it names (``prior={"damping": 0.7}`` keeps the
        other prior fields); given as a config object it replaces the whole nested config."""
        if not overrides:
            return self
        values = overrides
        merged = self.model_dump()
        for key, value in values.items():
            if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        return type(self)._checked(merged)

    @classmethod
    def build(cls, **values: Any) -> Any:
        """The config from keyword arguments; any bad value is a :class:`ConfigError`."""
        return cls._checked(values)

    @classmethod
    def accepts(cls, name: str) -> bool:
        """Whether ``name`` is a field of this config."""
        return name in cls.model_fields

    @classmethod
    def _checked(cls, values: Mapping[str, Any]) -> Any:
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise _config_error(cls, exc) from None


C = TypeVar("C", bound=_Config)


def as_config(value: Any, cls: type[C], what: str) -> C | None:
    """An engine's ``index_config=`` / ``retrieval_config=``: ``None`` (the defaults, or a
    saved engine's), a ``cls``, or a dict of its fields (checked like keyword arguments);
    anything else is a :class:`ConfigError` naming what is accepted."""
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return cls.build(**value)  # type: ignore[no-any-return]
    article = "an" if cls.__name__[0] in "AEIOU" else "a"
    raise ConfigError(
        f"{what} must be {article} {cls.__name__}, a dict of its fields (docs/config.md) or "
        f"None, got {type(value).__name__}"
    )


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 80, 80


def _config_error(owner: type, exc: ValidationError) -> ConfigError:
    """One line per bad field, each with the value given and what to do; pydantic's own
    report (its text, its links) is not chained on as well, so it is printed once. A nested
    config's error (raised inside a validator) is named by its path: ``prior.damping``."""
    problems: list[str] = []
    for e in exc.errors():
        where = ".".join(map(str, e["loc"]))
        nested = getattr((e.get("ctx") or {}).get("error"), "problems", None)
        if isinstance(nested, list):  # a nested config's own, raised in a validator
            problems.extend(f"{where}.{p}" if where else p for p in nested)
            continue
        where = where or "(the values)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            problems.append(f"{where}: no such field ({nearest(str(e['loc'][-1]), owner)})")
            continue
        given = _SHORT.repr(e.get("input"))  # reprlib: bounded at any depth (a filter's)
        given = given if len(given) <= 80 else given[:77] + "..."
        problems.append(f"{where}: {msg} (got {given})")
    error = ConfigError(
        f"{owner.__name__}: " + "; ".join(problems) + ". Give a value in range: docs/config.md "
        "lists every field"
    )
    error.problems = problems  # type: ignore[attr-defined]
    return error


def nearest(name: str, *owners: type[BaseModel]) -> str:
    """What to say of ``name``, no field of the ``owners``: the fields nearest it by spelling
    (a nested config's field given flat, ``prior_damping``, as ``prior={'damping': ...}``),
    else every field's name."""
    spelled: dict[str, str] = {}
    for owner in owners:
        for field, info in owner.model_fields.items():
            spelled[field] = field
            nested = info.annotation
            if isinstance(nested, type) and issubclass(nested, _Config):
                spelled |= {f"{field}_{f}": f"{field}={{'{f}': ...}}" for f in nested.model_fields}
    close = difflib.get_close_matches(name, spelled, n=3, cutoff=0.75)
    if close:
        return "did you mean " + " or ".join(spelled[c] for c in close) + "?"
    fields = sorted(f for owner in owners for f in owner.model_fields)
    return "the fields: " + ", ".join(fields)


# ---------------------------------------------------------------------------------------------
# the nested configs: the method's inner knobs


class PriorConfig(_Config):
    """The first pass's prior (core/prior.py): hybrid lexical + dense candidates and a
    personalised PageRank from the question's entities, fused into the one score that picks
    the seeds, orders the navigators' choices and ranks
    (``cosine + lexical_weight · lexical + graph_weight · graph``)."""

    enabled: bool = Field(
        True, description="False = the paper's cosine-only first pass (no lexical, no graph)."
    )
    lexical_weight: float = Field(
        0.2, ge=0.0, le=10.0, description="Weight of BM25 (scaled to the best hit) in the score."
    )
    graph_weight: float = Field(
        1.0, ge=0.0, le=10.0, description="Weight of the PageRank mass (scaled to the best)."
    )
    damping: float = Field(0.8, ge=0.0, lt=1.0, description="PageRank damping.")
    iterations: int = Field(20, ge=1, le=1000, description="PageRank power iterations.")
    hops: int = Field(
        4, ge=1, le=8, description="Hops of the local neighbourhood read (no graph matrix)."
    )
    max_nodes: int = Field(
        5000, ge=10, description="Nodes of that neighbourhood at most (a store call per hop)."
    )
    max_degree: int = Field(
        500,
        ge=1,
        description="An entity with more edges is not spread through (too general to help).",
    )
    candidates: int = Field(
        50, ge=1, le=10_000, description="Candidate passages from each of dense and lexical."
    )
    restart_passages: int = Field(
        5, ge=0, le=1000, description="Best hybrid passages whose anchors the PageRank restarts at."
    )
    passage_restart: float = Field(
        0.0,
        ge=0.0,
        le=100.0,
        description="Their share of the restart mass, times the question entities' (all of it "
        "when the question names no graph entity).",
    )
    feedback: float = Field(
        1.0,
        ge=0.0,
        le=100.0,
        description="A second PageRank round from the bridge entities of the first round's "
        "best passages, with this share of the question entities' mass; 0 = one round.",
    )
    feedback_passages: int = Field(
        2, ge=1, le=100, description="How many of the first round's passages the second reads."
    )
    feedback_rounds: int = Field(
        2,
        ge=1,
        le=10,
        description="Feedback rounds at most: each restarts also at the bridge entities of the "
        "best passages no earlier round read (a hop further along a chain of bridges).",
    )
    feedback_by_links: bool = Field(
        True,
        description="A question gets as many rounds as the links it chains (of, where, whose, "
        "'s, ... outside its names; core/extract_rules.py::question_links), at least 1.",
    )
    push_epsilon: float = Field(
        3e-4,
        ge=0.0,
        le=0.1,
        description="The PageRank spreads by a forward push (core/push.py): a node's edges are "
        "read when its residual mass exceeds this x its degree, one read per round (at most "
        "iterations rounds), the same on every store; 0 = the power iteration over the whole "
        "graph matrix or the max_nodes neighbourhood.",
    )
    push_max_nodes: int = Field(300, ge=1, description="Nodes whose edges one push reads at most.")
    title_hop: float = Field(
        0.7,
        ge=0.0,
        le=10.0,
        description="The second hop a text names, in the zero-token ranking: a passage whose "
        "title (its document's metadata title, else a short first line) the best passage's text "
        "names as whole words gains this x the best passage's score / sqrt(the passages that "
        "mention the title), never above the best passage; one passage per title, none of the "
        "best passage's own document; 0 = off.",
    )
    hub_mentions: float = Field(
        5.0,
        ge=0.0,
        le=10_000.0,
        description="The graph part counts fully when the question names an entity that at "
        "most this many passages mention; when its most specific entity is more common, "
        "this x its restart weight (similarity / mentions): a question naming only a long "
        "document's subject tells the PageRank little. 0 = always fully.",
    )
    dense_seat: int = Field(
        5,
        ge=0,
        le=1000,
        description="In the zero-token ranking, the candidate nearest the question by cosine "
        "(a vector search's first answer) ranks at this place or better, unless memory "
        "vouches for a candidate; 0 = off.",
    )


class MemoryConfig(_Config):
    """How edge memory is read and written (docs/method.md §2-§3): the replay test
    ``alpha + (1 - alpha)·q̂·v > lam``, how far replay reaches, how much memory counts in the
    ranking and how far a write bridges to support the walk missed."""

    alpha: float = Field(
        0.1, ge=0.0, le=1.0, description="Weight of the node similarity in the replay score."
    )
    lam: float = Field(0.55, ge=-1.0, le=2.0, description="Replay threshold λ.")
    max_replay_nodes: int = Field(64, ge=0, description="Nodes replay adds at most.")
    replay_starts: int = Field(
        10,
        ge=0,
        le=1000,
        description="Replay also starts at the anchors of the first pass's next best passages "
        "(up to this many starts, seeds included), so a rephrased question whose seeds moved "
        "still finds what memory holds for it; such an anchor joins the subgraph only if "
        "memory leads on from it.",
    )
    rank_weight: float = Field(
        1.0,
        ge=0.0,
        le=10.0,
        description="final score = first-pass score + rank_weight · (1 + prior weights) · "
        "memory evidence; 0 = memory does not rank.",
    )
    max_bridge_hops: int = Field(
        4,
        ge=1,
        le=10,
        description="A write reaches support the walk missed by a graph path of at most this "
        "many hops (else a learned edge).",
    )
    uncited_min_score: float = Field(
        RECOMMENDED_MIN_SCORE,
        ge=0.0,
        le=1.0,
        description="An answer that cites no passage is taken as grounded in the passages "
        "holding its words only when the question's relevance (its first passage's score) "
        "reaches this: an off-corpus question's answer writes no memory; below it a cited "
        "answer teaches only the cited passages that hold its words and name what the "
        "question names; 0 = no such check.",
    )


class NavigatorConfig(_Config):
    """The zero-token navigator (core/navigate/zero_token.py), which walks with no LLM, stands
    in for an unusable LLM reply and, as the similarity filter, judges ``memorize`` with no
    LLM; and when it hands the walk to an LLM (``llm_navigation="auto"``,
    core/navigate/mode.py)."""

    enough_chunks: int = Field(4, ge=1, description="Stop once this many chunks are read.")
    min_similarity: float = Field(
        0.2, ge=-1.0, le=1.0, description="Stop when no choice is at least this similar."
    )
    filter_top: int = Field(
        2, ge=1, description="Chunks the similarity filter names as the support (memorize)."
    )
    llm_threshold: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="auto: the LLM walks when a passage ranked k+1..2k has a graph (PageRank) "
        "part above this (scaled to the best passage): the first pass is unsure of its top k.",
    )


class PromptConfig(_Config):
    """What an LLM prompt shows (the traversal prompt, the memorize filter)."""

    chunk_chars: int = Field(400, ge=50, description="Characters of a chunk's text shown.")
    max_back_choices: int = Field(
        4, ge=0, description="'go back to ...' choices shown next to the forward ones."
    )


# ---------------------------------------------------------------------------------------------
# the two configs


class IndexConfig(_Config):
    """How documents become a graph."""

    chunk_tokens: int = Field(750, ge=16, le=100_000, description="Tokens per chunk.")
    chunk_overlap: int = Field(0, ge=0, description="Tokens shared by consecutive chunks.")
    synonym_threshold: float = Field(
        0.85, gt=0.0, le=1.0, description="Entities this similar are linked as synonyms."
    )
    max_concurrency: int = Field(4, ge=1, le=256, description="LLM calls in flight at once.")
    workers: int | None = Field(
        None,
        ge=1,
        le=256,
        description="Processes that extract entities in zero-token mode while the chunks are "
        "embedded (core/workers.py); 1 = a thread of this process; None = one per CPU (at "
        "most 8) on 4 CPUs or more, else 1.",
    )
    embed_ahead: bool | None = Field(
        None,
        description="Zero-token insert: extract and embed the next batch on a thread while "
        "this one is merged and written (core/insert.py: ahead); the same graph. None = on, "
        "except for the packaged embedder on the CPU (ONNX or sentence-transformers), "
        "which already keeps the cores busy.",
    )
    embed_batch_size: int = Field(256, ge=1, description="Texts per embedder call.")
    insert_batch_documents: int = Field(
        256, ge=1, description="Documents committed together (resumable, bounded memory)."
    )
    max_document_chars: int = Field(20_000_000, ge=1, description="Longer documents are refused.")
    max_entities_per_chunk: int = Field(40, ge=1, description="Extracted entities kept per chunk.")
    on_extraction_error: Literal["raise", "fallback"] = Field(
        "raise",
        description="A chunk whose extraction failed twice: ExtractionError, or the "
        "rule-based extractor.",
    )
    unnamed_edits: Literal["refuse", "add"] = Field(
        "refuse",
        description="A document without an id or source (named by its content) with a "
        "passage that nearly repeats one of another stored such document, as an edit does "
        "(core/identity.py): refuse = DocumentIdentityError, nothing written; add = stored as "
        "a new document beside it.",
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IndexConfig:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("chunk_overlap must be smaller than chunk_tokens")
        return self


class RetrievalConfig(_Config):
    """How a query walks the graph and what memorize writes. Any field can be overridden per
    call (``rag.retrieve(q, k=10, prior={"damping": 0.7})``)."""

    # what comes back
    k: int = Field(5, ge=1, le=1000, description="Chunks returned.")
    filter: dict[str, Any] | None = Field(
        None, description="Metadata filter on documents (LangChain syntax; core/filters.py)."
    )
    fill_to_k: bool = Field(
        True, description="Fill up to k with the best first-pass chunks the walk did not read."
    )
    min_score: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Abstain below this relevance: a question whose best passage scores "
        "less (off the corpus) returns no passage and its trace writes no memory; None = off "
        "(0.525 recommended with the packaged embedder: docs/retriever.md#scores).",
    )
    seeds: int = Field(2, ge=1, le=100, description="Walk start nodes per (sub)question.")
    # the walk's bounds
    max_hops: int = Field(6, ge=0, description="Moves of the walk at most.")
    max_iterations: int = Field(10, ge=1, description="Navigator decisions at most (>= max_hops).")
    max_neighbors_shown: int = Field(
        10,
        ge=1,
        description="Forward choices an LLM is shown at a step (the zero-token navigator "
        "weighs up to 30).",
    )
    max_traversal_tokens: int | None = Field(
        5_000, ge=1, description="Traversal prompt + completion tokens at most; None = no budget."
    )
    max_idle_decisions: int = Field(
        3, ge=1, description="LLM decisions in a row that read no new chunk."
    )
    llm_timeout: float | None = Field(
        120.0, gt=0, description="Seconds per LLM call; None = no timeout."
    )
    # the LLM's optional stages
    llm_navigation: Literal["always", "never", "auto"] = Field(
        "auto",
        description="With an LLM given, who walks: the LLM (always), the zero-token navigator "
        "(never; the LLM still answers and judges memorize), or the LLM only when the first "
        "pass is unsure of its top k (auto; navigator.llm_threshold).",
    )
    pre_query: bool = Field(False, description="Ask the LLM to split the question first.")
    max_subquestions: int = Field(
        1, ge=1, le=10, description="Sub-questions of that split at most."
    )
    verify_replay: bool = Field(
        False, description="Ask the LLM whether what replay found is enough (else walk on)."
    )
    on_invalid_move: Literal["fallback", "stop"] = Field(
        "fallback",
        description="After an unusable reply and its re-ask: the zero-token navigator's "
        "choice, or stop the walk.",
    )
    # the memory policy
    self_memorize: Literal["enhance", "cache", "full", "off"] = Field(
        "off",
        description="memorize() with no answer and no LLM to judge: write nothing (off), "
        "enhance the paths to the similarity filter's chunks (enhance), to every chunk read "
        "(cache), or also penalise the rest (full: docs/method.md §3 with the similarity "
        "filter as the judge). An answer given is always read instead (its citations, else "
        "the passages holding its words).",
    )
    memorize_judge: Literal["citations", "filter"] = Field(
        "citations",
        description="memorize(answer=...) with an LLM: the answer's own word first, with no "
        "LLM call (the chunks it cites, else the passages holding its words), the LLM filter "
        "only when it is grounded in none (citations); or always the LLM filter (filter). "
        "Without an LLM the answer always decides; an abstaining answer writes nothing.",
    )
    named_support_penalises: bool = Field(
        False,
        description="A thumbs-up on named chunks or supporting= also penalises every other "
        "subgraph edge (as the LLM filter does).",
    )
    # the method's inner knobs
    prior: PriorConfig = Field(default_factory=PriorConfig, description="The first pass.")
    memory: MemoryConfig = Field(default_factory=MemoryConfig, description="Replay and writes.")
    navigator: NavigatorConfig = Field(
        default_factory=NavigatorConfig, description="The zero-token navigator."
    )
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="LLM prompt caps.")

    @field_validator("filter", mode="before")
    @classmethod
    def _valid_filter(cls, value: Any) -> dict[str, Any] | None:
        return filters.normalise(value)

    @model_validator(mode="after")
    def _iterations_cover_hops(self) -> RetrievalConfig:
        if self.max_iterations < self.max_hops:
            raise ValueError("max_iterations must be >= max_hops")
        return self
