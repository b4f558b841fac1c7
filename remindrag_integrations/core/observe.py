"""The stages of a query, told to whoever listens (docs/retriever.md, "Look inside").

Core knows no tracing framework: a query takes an optional :class:`Observer`, and each stage
(:data:`STAGES`) calls its :meth:`~Observer.start` before the stage's work and its
:meth:`~Observer.end` after it, with what the stage counted (passages, hops, replayed edges,
tokens) and the ids it made. The faces turn these calls into LangChain child runs and
LlamaIndex instrumentation spans. With no observer (``None``, what a query gets when no
tracer listens) the stages make no object and call nothing: the only cost is one ``is None``
test per stage.
"""

from __future__ import annotations

from typing import Any, Protocol

STAGES = (
    "pre_query",
    "prior",
    "seed_search",
    "replay",
    "walk",
    "rank",
    "save_trace",
)
"""The stages a retrieval reports, in the order they run (``pre_query`` only when the config
asks for sub-questions; ``walk`` only when the navigator walks: not after a memory replay,
not for an off-corpus question)."""


class Observer(Protocol):
    """What a query reports its stages to. ``start`` is called before a stage's work with
    what it starts from (``inputs``); ``end`` after it with what it counted (``outputs``),
    or with ``error`` when the stage raised (and then the query raises it). Both run
    synchronously between the stage's steps, so an LLM call made inside a stage (the walk's,
    the pre-query's) happens between its ``start`` and ``end``."""

    def start(self, stage: str, inputs: dict[str, Any]) -> None: ...

    def end(
        self, stage: str, outputs: dict[str, Any], error: BaseException | None = None
    ) -> None: ...
