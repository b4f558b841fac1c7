"""LangChain: each stage of a retrieval as a child run of the retriever run.

The retriever's run manager (``_get_relevant_documents(..., run_manager=)``) opens one chain
run per stage (:mod:`...core.observe`), named ``ReMindRAG.<stage>``, with the stage's inputs
and, when it ends, its counts and ids as outputs; the LLM calls a stage makes (the walk's,
the pre-query's) are children of that stage's run. Every callback handler sees them
(LangSmith, Langfuse, OpenInference's tracer). :func:`listening` says whether any handler
is attached: when none is, the retriever passes no observer and nothing here runs.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManager, CallbackManagerForChainRun

PREFIX = "ReMindRAG."
"""What a stage's run is named: ``ReMindRAG.walk``, ``ReMindRAG.rank``, ..."""


def listening(run_manager: Any) -> bool:
    """Whether a callback handler that records runs would see a child run of
    ``run_manager`` (one that says ``traces_nothing``, the memory callback, does not count)."""
    if run_manager is None:
        return False
    handlers = [
        *(getattr(run_manager, "handlers", None) or ()),
        *(getattr(run_manager, "inheritable_handlers", None) or ()),
    ]
    return any(not getattr(h, "traces_nothing", False) for h in handlers)


class LangChainStages:
    """An :class:`~...core.observe.Observer` that opens a LangChain chain run per stage under
    the retriever run of ``run_manager`` (sync or async: an async one is used through its
    sync twin, since the stages report from the worker thread that runs them)."""

    def __init__(self, run_manager: Any) -> None:
        get_sync = getattr(run_manager, "get_sync", None)
        self._root = get_sync() if callable(get_sync) else run_manager
        self._open: list[CallbackManagerForChainRun] = []

    def start(self, stage: str, inputs: dict[str, Any]) -> None:
        parent = self._open[-1] if self._open else self._root
        manager: CallbackManager = parent.get_child()
        manager.add_metadata({"remindrag.stage": stage}, inherit=False)
        run = manager.on_chain_start(None, dict(inputs), name=PREFIX + stage)
        self._open.append(run)

    def end(self, stage: str, outputs: dict[str, Any], error: BaseException | None = None) -> None:
        run = self._open.pop()
        if error is not None:
            run.on_chain_error(error)
        else:
            run.on_chain_end(dict(outputs))

    def callbacks(self) -> CallbackManager:
        """The callbacks an LLM call made now runs under: the open stage's, else the
        retriever run's."""
        return (self._open[-1] if self._open else self._root).get_child()  # type: ignore[no-any-return]
