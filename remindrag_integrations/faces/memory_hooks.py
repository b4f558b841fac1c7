"""What both frameworks' memory hooks share: memorize each trace of a retriever at most once,
recording the writes and the errors (a hook must never break the user's chain).

The rule both hooks follow: a trace is memorized with the answer that used it. LangChain: a
retrieval belongs to the outermost run it happened in; when that run ends with an answer, every
trace it produced is memorized with the answer text; a run that is itself a tool call hands its
traces to the next run that answers (a bare tool-calling loop). LlamaIndex: every synthesized
answer memorizes the traces its source nodes came from. A run that errors writes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from ..core.errors import ConfigError, UnknownTraceError
from ..core.types import MemoryWrite
from .results import own_metadata

log = logging.getLogger(__name__)


def trace_ids(metadatas: Sequence[Any]) -> list[str]:
    """The trace ids that results' ``metadata["remindrag"]`` names, once each, in order."""
    ids = (own_metadata(m).get("trace_id") for m in metadatas)
    return list(dict.fromkeys(t for t in ids if isinstance(t, str)))


class Memorizing(Protocol):
    """What a memory hook needs of a retriever (:class:`~.retriever.ReMindRetriever` is one):
    its engine, which knows the traces, and ``memorize``. A protocol, so the hooks import
    nothing of the retriever that holds them."""

    @property
    def engine(self) -> Any: ...

    def memorize(self, *args: Any, **kwargs: Any) -> MemoryWrite: ...


class MemoryWriter:
    """Memorizes traces of one retriever, each at most once, recording writes and errors."""

    def __init__(self, retriever: Memorizing | Any, hook: str = "a memory hook") -> None:
        engine = getattr(retriever, "engine", None)
        if not callable(getattr(retriever, "memorize", None)) or not callable(
            getattr(engine, "trace", None)
        ):
            raise ConfigError(
                f"{hook} needs the ReMindRetriever whose retrievals it memorizes, got "
                f"{type(retriever).__name__}: build it with retriever.memory_callback() "
                "(LangChain) or retriever.memory_event_handler() (LlamaIndex)"
            )
        self.retriever = retriever
        self.writes: list[MemoryWrite] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._claimed: set[str] = set()

    def claim(self, trace_ids: Sequence[str]) -> list[str]:
        """Of these traces, the ones of this retriever not claimed before (now claimed): the
        traces an answer is about to be memorized with, each at most once."""
        mine = [t for t in trace_ids if self.owns(t)]
        with self._lock:
            fresh = [t for t in mine if t not in self._claimed]
            self._claimed.update(fresh)
        return fresh

    @property
    def claimed(self) -> set[str]:
        """The traces claimed so far (a copy)."""
        with self._lock:
            return set(self._claimed)

    def owns(self, trace_id: str) -> bool:
        try:
            self.retriever.engine.trace(trace_id)
        except UnknownTraceError:
            return False
        return True

    def write(
        self, trace_ids: Sequence[str], answer: str | None, cited: Sequence[str] = ()
    ) -> None:
        """Memorize each trace with the answer (its citations are the support) and the ids of
        the chunks the answer was written from (``cited``; ids of other traces are ignored)."""
        for tid in trace_ids:
            try:
                w = self.retriever.memorize(tid, answer=answer, cited=list(cited) or None)
            except Exception as exc:  # noqa: BLE001 - a callback must not break the chain
                log.warning("ReMindRAG: memorizing trace %s failed: %s", tid, exc)
                with self._lock:
                    self.errors.append(exc)
                continue
            with self._lock:
                self.writes.append(w)
