"""Zero-token extraction on every core (``IndexConfig.workers``; docs/config.md).

The rule-based extractor is pure Python, so threads share one core (the GIL). An insert's
extraction runs instead on worker processes (forked, on Linux: nothing of the caller's
``__main__`` is run again in them), forked for each batch and given its chunks in slices;
meanwhile the calling thread embeds the same chunks (:func:`.indexing.build_graph` asks for
the extractions only once the chunks are embedded). Each chunk's extraction and
token count is the same function of its text wherever it runs, so the graph does not depend
on the number of workers.

``workers=1``, a batch of fewer than :data:`MIN_POOL_CHUNKS` chunks, a platform without
``fork``, a daemon process (which may not have children) and an extractor replaced in this
process (a test's patch of ``indexing.rule_based_extraction``) extract here instead: on one
thread beside the embedding (``workers=1``) or, for a small batch, at once.
"""

from __future__ import annotations

import functools
import logging
import math
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from . import extract_rules
from .prompts import Extraction
from .text import count_tokens
from .types import Chunk

log = logging.getLogger("remindrag_integrations")

MIN_POOL_CHUNKS = 64
"""Chunks a batch needs before it goes to worker processes (fewer are extracted here: a
worker's round trip would cost more than it saves)."""
CHUNKS_PER_WORKER = 32
"""An insert of ``n`` chunks starts at most ``n / CHUNKS_PER_WORKER`` processes."""
SLICES_PER_WORKER = 4  # a batch is sent in this many slices per worker (balance, progress)

Extractor = Callable[[str, int], Extraction]


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


MIN_CPUS_FOR_PROCESSES = 4
"""``workers=None`` forks processes only on this many CPUs or more: on 2 cores one thread
beside the embedding was faster (the embedder already keeps both busy, and forking a large
process, its copied pages and the round trips cost more than the second core gave back:
benchmarks/RESULTS.md, "The insert at its floor")."""
MAX_AUTO_WORKERS = 8  # workers=None forks at most this many


def resolve(workers: int | None) -> int:
    """``IndexConfig.workers`` as a count: ``None`` is one per CPU this process may use (at
    most :data:`MAX_AUTO_WORKERS`) from :data:`MIN_CPUS_FOR_PROCESSES` CPUs, else 1."""
    if workers is not None:
        return workers
    n = cpus()
    return min(n, MAX_AUTO_WORKERS) if n >= MIN_CPUS_FOR_PROCESSES else 1


def can_fork() -> bool:
    """Whether worker processes can be forked here: Linux (``fork`` elsewhere is unsafe or
    missing, and the other start methods run the caller's ``__main__`` again), not a daemon
    process (which may not have children)."""
    if not sys.platform.startswith("linux"):
        return False
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    return not multiprocessing.current_process().daemon


def extract_one(text: str, max_entities: int) -> tuple[Extraction, int]:
    """One chunk's per-chunk work: its rule-based extraction and its token count."""
    return extract_rules.rule_based_extraction(text, max_entities), count_tokens(text)


def _extract_slice(texts: list[str], max_entities: int) -> list[tuple[Extraction, int]]:
    return [extract_one(t, max_entities) for t in texts]


class Pending:
    """One batch's zero-token extractions, being made; :meth:`result` waits for them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._done = threading.Event()
        self._value: list[tuple[Extraction, int]] | None = None
        self._error: BaseException | None = None

    def _set(self, value: list[tuple[Extraction, int]]) -> None:
        self._value = value
        self._done.set()

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def result(self) -> list[tuple[Extraction, bool]]:
        """Each chunk's ``(extraction, fell_back)`` (never a fallback: no LLM was asked)."""
        return [(x, False) for x, _ in self._wait()]

    def tokens(self) -> int:
        """The batch's source tokens (counted with the extraction)."""
        return sum(n for _, n in self._wait())

    def _wait(self) -> list[tuple[Extraction, int]]:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


class Workers:
    """The extraction of one insert: ``with Workers(n, chunks) as w: w.start(...)`` per batch.
    A batch's processes are forked when it starts and stopped when its chunks are extracted
    (all of them by the end of the ``with`` block)."""

    def __init__(self, workers: int | None, total_chunks: int) -> None:
        wanted = resolve(workers)
        self.processes = min(wanted, max(1, math.ceil(total_chunks / CHUNKS_PER_WORKER)))
        self.threaded = wanted == 1  # one thread beside the embedding
        self._pools: list[ProcessPoolExecutor] = []
        self._broken = False
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: Any) -> None:
        for t in self._threads:
            t.join()
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)
        self._pools = []

    def start(
        self,
        chunks: Sequence[Chunk],
        max_entities: int,
        progress: Callable[[int, int], None] | None = None,
    ) -> Pending:
        """Start extracting ``chunks``; ``progress(done, total)`` as slices finish."""
        from . import indexing  # the extractor as the stage sees it (a test may replace it)

        texts = [c.text for c in chunks]
        pending = Pending(len(texts))
        extract = indexing.rule_based_extraction
        patched = extract is not extract_rules.rule_based_extraction
        if (
            self.processes > 1
            and len(texts) >= MIN_POOL_CHUNKS
            and not patched
            and not self._broken
            and can_fork()
        ):
            self._submit(texts, max_entities, pending, progress)
            return pending

        def run() -> None:
            try:
                out = []
                for i, t in enumerate(texts):
                    out.append((extract(t, max_entities), count_tokens(t)))
                    if progress is not None:
                        progress(i + 1, len(texts))
                pending._set(out)
            except BaseException as exc:  # handed to whoever waits for the result
                pending._fail(exc)

        if self.threaded and len(texts) >= MIN_POOL_CHUNKS:
            thread = threading.Thread(target=run, name="remindrag-extract", daemon=True)
            self._threads.append(thread)
            thread.start()
        else:
            run()
        return pending

    def _submit(
        self,
        texts: list[str],
        max_entities: int,
        pending: Pending,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        # processes for this batch only: forked now, stopped when its last slice is back, so
        # that the pages this process writes meanwhile (merge, store) are not copied for them
        pool = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("fork"))
        self._pools.append(pool)
        slices = _slices(texts, self.processes * SLICES_PER_WORKER)
        parts: list[list[tuple[Extraction, int]] | None] = [None] * len(slices)
        lock, count = threading.Lock(), [0, len(slices)]

        def finished(i: int, fut: Future[list[tuple[Extraction, int]]]) -> None:
            try:
                try:
                    parts[i] = fut.result()
                except BrokenProcessPool:  # a worker died (killed, out of memory): do it here
                    self._stopped()
                    parts[i] = _extract_slice(slices[i], max_entities)
                with lock:  # progress in order, from whichever thread a slice ends on
                    count[0] += 1
                    last = count[0] == count[1]
                    if progress is not None:
                        progress(sum(len(p) for p in parts if p is not None), len(texts))
                if last:
                    pool.shutdown(wait=False)
                    pending._set([x for p in parts if p is not None for x in p])
            except BaseException as exc:  # handed to whoever waits for the result
                pending._fail(exc)

        for i, part in enumerate(slices):
            try:
                fut = pool.submit(_extract_slice, part, max_entities)
            except BrokenProcessPool:
                self._stopped()
                fut = Future()
                fut.set_result(_extract_slice(part, max_entities))
            fut.add_done_callback(functools.partial(finished, i))

    def _stopped(self) -> None:
        with self._lock:
            if not self._broken:
                log.warning("an extraction worker process stopped; extracting in this process")
            self._broken = True


def _slices(texts: list[str], n: int) -> list[list[str]]:
    """``texts`` cut into at most ``n`` contiguous slices of about equal length in
    characters (the extractor's time follows the text's length)."""
    total = sum(len(t) for t in texts) or 1
    out: list[list[str]] = [[]]
    size = 0
    for t in texts:
        if out[-1] and size >= total * len(out) / n:
            out.append([])
        out[-1].append(t)
        size += len(t)
    return out
