"""Which trace "the last retrieval" means, when retrievals may run at once.

Sequential code (a chain, a loop): the retriever's most recent retrieval, whichever thread
ran it. Retrievals that overlapped in time (``asyncio.gather`` of several ``ainvoke`` s,
threads): inside each task or thread, the one it made itself; anywhere else ``None``, so that
``memorize()`` refuses to guess instead of writing the wrong trace.
"""

from __future__ import annotations

import itertools
import threading
from contextvars import ContextVar

# LastTrace key -> (trace id, sequence number) of the last retrieval made in this context
_MINE: ContextVar[dict[int, tuple[str, int]] | None] = ContextVar("remindrag_mine", default=None)
_KEYS = itertools.count()


class LastTrace:
    def __init__(self) -> None:
        self._key = next(_KEYS)
        self._lock = threading.Lock()
        self._seq = 0
        self._running = 0
        self._burst_first = 0  # first retrieval of the current run of overlapping ones
        self._overlapped = False
        self._last: str | None = None
        self._ambiguous_from: int | None = None  # retrievals from here on overlapped

    def begin(self) -> int:
        """A retrieval starts; returns its sequence number."""
        with self._lock:
            self._seq += 1
            if self._running == 0:
                self._burst_first, self._overlapped = self._seq, False
            self._running += 1
            self._overlapped |= self._running > 1
            return self._seq

    def end(self, seq: int, trace_id: str | None) -> None:
        """A retrieval ended (``trace_id`` None: it failed)."""
        with self._lock:
            self._running -= 1
            if trace_id is None:
                return
            if self._overlapped:
                self._last, self._ambiguous_from = None, self._burst_first
            else:
                self._last, self._ambiguous_from = trace_id, None
        _MINE.set({**(_MINE.get() or {}), self._key: (trace_id, seq)})

    def current(self) -> str | None:
        with self._lock:
            last, since = self._last, self._ambiguous_from
        if since is None:
            return last
        mine = (_MINE.get() or {}).get(self._key)
        return mine[0] if mine is not None and mine[1] >= since else None
