"""Zero-token extraction on every core (``IndexConfig.workers``; docs/config.md).

The rule-based extractor is pure Python, so threads share one core (the GIL). With more than
one worker an insert's extraction runs on worker processes instead: plain ``python``
processes started for the insert (the first batch that needs them starts them; the insert's
end stops them), each importing only the extractor's modules (~0.1 s; not the library's
``__init__``, nor the caller's ``__main__``), each given a slice of a batch's chunks through
its pipe. Meanwhile the calling thread embeds the same chunks
(:func:`.indexing.prepare` asks for the extractions once the chunks are embedded). A
forked process was measured and not kept: forking a process of a few hundred MB costs
~45 ms a worker, more than a batch's extraction on 2 cores (benchmarks/RESULTS.md, "The
insert at its floor").

Each chunk's extraction and token count is the same function of its text wherever it runs,
so the graph does not depend on the number of workers. ``workers=1`` extracts on one thread
beside the embedding; a batch of fewer than :data:`MIN_POOL_CHUNKS` chunks, and an extractor
replaced in this process (a test's patch of ``indexing.rule_based_extraction``), at once in
the calling thread. A worker that cannot start or stops mid-insert leaves its slices to this
process (with a warning).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from . import extract_rules
from .prompts import Extraction
from .text import count_tokens
from .types import Chunk

log = logging.getLogger("remindrag_integrations")

MIN_POOL_CHUNKS = 64
"""Chunks a batch needs before it goes to worker processes (fewer are extracted here)."""
CHUNKS_PER_WORKER = 128
"""An insert of ``n`` chunks starts at most ``n / CHUNKS_PER_WORKER`` processes."""
SLICES_PER_WORKER = 4  # a batch is sent in this many slices per worker (balance, progress)
MIN_CPUS_FOR_PROCESSES = 4
"""``workers=None`` starts processes only on this many CPUs or more: on 2 cores one thread
beside the embedding was as fast (the embedder already keeps both cores busy)."""
MAX_AUTO_WORKERS = 8  # workers=None starts at most this many

Result = list[tuple[Extraction, int]]
_HEADER = struct.Struct("<Q")


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve(workers: int | None) -> int:
    """``IndexConfig.workers`` as a count: ``None`` is one per CPU this process may use (at
    most :data:`MAX_AUTO_WORKERS`) from :data:`MIN_CPUS_FOR_PROCESSES` CPUs, else 1."""
    if workers is not None:
        return workers
    n = cpus()
    return min(n, MAX_AUTO_WORKERS) if n >= MIN_CPUS_FOR_PROCESSES else 1


def extract_one(text: str, max_entities: int) -> tuple[Extraction, int]:
    """One chunk's per-chunk work: its rule-based extraction and its token count."""
    return extract_rules.rule_based_extraction(text, max_entities), count_tokens(text)


def extract_slice(texts: list[str], max_entities: int) -> Result:
    return [extract_one(t, max_entities) for t in texts]


# --- the worker process ------------------------------------------------------------------
def _send(out: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(data)) + data)
    out.flush()


def _receive(inp: IO[bytes]) -> Any:
    head = inp.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the other end closed its pipe")
    (size,) = _HEADER.unpack(head)
    data = inp.read(size)
    if len(data) < size:
        raise EOFError("the other end closed its pipe mid-message")
    return pickle.loads(data)


def serve() -> None:
    """A worker's loop: ``(texts, max_entities)`` in, :data:`Result` out, until stdin ends."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies on the pipe
    while True:
        try:
            texts, max_entities = _receive(inp)
        except EOFError:
            return
        _send(out, extract_slice(texts, max_entities))


# the worker's first lines: the package and ``core`` as bare namespaces (their ``__init__``,
# the whole library, is not run), then this module's loop
_BOOT = """import sys, types
package, root = sys.argv[1], sys.argv[2]
for name, path in ((package, root), (package + ".core", root + "/core")):
    stub = types.ModuleType(name)
    stub.__path__ = [path]
    sys.modules[name] = stub
__import__(package + ".core.workers", fromlist=["serve"]).serve()
"""


class _Process:
    """One worker process and its pipes."""

    def __init__(self) -> None:
        package = __name__.split(".")[0]
        root = str(Path(__file__).resolve().parents[1])
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, package, root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def run(self, texts: list[str], max_entities: int) -> Result:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        _send(self.proc.stdin, (texts, max_entities))
        result: Result = _receive(self.proc.stdout)
        return result

    def close(self) -> None:
        """Close its stdin: its loop ends."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:  # already gone
            pass

    def stop(self) -> None:
        self.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()


class Pending:
    """One batch's zero-token extractions, being made; :meth:`result` waits for them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._done = threading.Event()
        self._value: Result | None = None
        self._error: BaseException | None = None

    def _set(self, value: Result) -> None:
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

    def _wait(self) -> Result:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


class Workers:
    """The extraction of one insert: ``with Workers(n, chunks) as w: w.start(...)`` per batch.
    The worker processes start with the first batch that goes to them and stop at the end of
    the ``with`` block."""

    def __init__(self, workers: int | None, total_chunks: int) -> None:
        wanted = resolve(workers)
        self.processes = min(wanted, max(1, math.ceil(total_chunks / CHUNKS_PER_WORKER)))
        self.threaded = self.processes == 1  # one thread beside the embedding
        self._idle: queue.SimpleQueue[_Process] = queue.SimpleQueue()
        self._started: list[_Process] = []
        self._senders: ThreadPoolExecutor | None = None
        self._threads: list[threading.Thread] = []
        self._broken = False
        self._lock = threading.Lock()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: Any) -> None:
        for t in self._threads:
            t.join()
        if self._senders is not None:
            self._senders.shutdown(wait=True, cancel_futures=True)
        for p in self._started:  # all told first, so that they end together
            p.close()
        for p in self._started:
            p.stop()
        self._started = []

    def start(
        self,
        chunks: Sequence[Chunk],
        max_entities: int,
        progress: Callable[[int, int], None] | None = None,
    ) -> Pending:
        """Start extracting ``chunks``; ``progress(done, total)`` as they are extracted."""
        from . import indexing  # the extractor as the stage sees it (a test may replace it)

        texts = [c.text for c in chunks]
        pending = Pending(len(texts))
        extract = indexing.rule_based_extraction
        patched = extract is not extract_rules.rule_based_extraction
        pool = self.processes > 1 and len(texts) >= MIN_POOL_CHUNKS and not patched
        if pool and self._spawned():
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

    def _spawned(self) -> bool:
        """Whether the worker processes run (started now on first use)."""
        if self._broken or getattr(sys, "frozen", False):  # frozen: no python to start
            return False
        if self._senders is None:
            try:
                for _ in range(self.processes):
                    p = _Process()
                    self._started.append(p)
                    self._idle.put(p)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                log.warning("extraction workers could not start (%s); extracting here", exc)
                self._broken = True
                return False
            self._senders = ThreadPoolExecutor(self.processes, thread_name_prefix="remindrag-w")
        return True

    def _submit(
        self,
        texts: list[str],
        max_entities: int,
        pending: Pending,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        assert self._senders is not None
        slices = _slices(texts, self.processes * SLICES_PER_WORKER)
        parts: list[Result | None] = [None] * len(slices)
        lock, count = threading.Lock(), [0]

        def one(i: int) -> None:
            try:
                got: Result | None = None
                if not self._broken:
                    worker = self._idle.get()
                    try:
                        got = worker.run(slices[i], max_entities)
                    except (OSError, EOFError, pickle.UnpicklingError):
                        self._stopped()  # a worker is gone: the slices left are done here
                    finally:
                        self._idle.put(worker)  # (a gone one fails the next caller at once)
                if got is None:
                    got = extract_slice(slices[i], max_entities)
                with lock:  # progress in order, from whichever thread a slice ends on
                    parts[i] = got
                    count[0] += 1
                    last = count[0] == len(slices)
                    if progress is not None:
                        progress(sum(len(p) for p in parts if p is not None), len(texts))
                if last:
                    pending._set([x for p in parts if p is not None for x in p])
            except BaseException as exc:  # handed to whoever waits for the result
                pending._fail(exc)

        for i in range(len(slices)):
            self._senders.submit(one, i)

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
