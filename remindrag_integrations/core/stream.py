"""A stream of documents inserted batch by batch (:meth:`Engine.insert_stream`): the stream is
read lazily, ``size`` documents at a time; each batch is written and committed before the next
is read, and its :class:`StreamProgress` reported.

Resuming is the insert's own rule: a document the store holds with the same content hash is
skipped, so after a crash the same stream inserted again skips what the committed batches
hold and goes on from the first document they do not."""

from __future__ import annotations

import operator
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import InvalidArgumentError
from .types import CostLedger, IndexReport, plus_written

StreamProgressFn = Callable[["StreamProgress"], None]


@dataclass(frozen=True)
class StreamProgress:
    """Where an :meth:`~.engine.Engine.insert_stream` stands after a committed batch.
    ``str()`` of it is the line ``remindrag index`` prints."""

    documents: int
    """Documents of the stream read and committed so far (written or unchanged)."""
    total: int | None
    """Documents in the stream (``len()`` of it, or the ``total`` given); None: unknown."""
    written: int
    """Documents written by this run (new or changed)."""
    unchanged: int
    """Documents the store held already (same content): skipped."""
    chunks: int
    """Chunks written by this run."""
    batches: int
    """Batches committed by this run."""
    elapsed: float
    """Seconds since the stream started."""
    eta: float | None
    """Seconds left at the rate of the batches that wrote something (None: no total, or
    nothing written yet)."""

    @property
    def chunks_per_second(self) -> float:
        """Chunks written per second of this run."""
        return self.chunks / self.elapsed if self.elapsed > 0 else 0.0

    def __str__(self) -> str:
        done = f"{self.documents:,}"
        if self.total:
            done += f"/{self.total:,} documents ({100 * self.documents / self.total:.1f} %)"
        else:
            done += " documents"
        eta = "?" if self.eta is None else clock(self.eta)
        return (
            f"{done}: {self.written:,} written, {self.unchanged:,} unchanged; "
            f"{self.chunks:,} chunks in {clock(self.elapsed)}, "
            f"{self.chunks_per_second:.1f} chunks/s; ETA {eta}"
        )


def clock(seconds: float) -> str:
    """``seconds`` as ``1h 02m``, ``12m 05s`` or ``42s``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


def size_of(value: Any) -> int:
    """A batch size: an int of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(
            f"batch_documents must be an int of at least 1 (documents per committed batch), "
            f"got {value!r}"
        )
    return value


def total_of(documents: Any, total: Any) -> int | None:
    """The stream's length: ``total`` when given, else ``len()`` of it where it has one (a
    list, :class:`~.jsonl.JsonlDocuments`); a generator's is unknown (None)."""
    if total is not None:
        if isinstance(total, bool) or not isinstance(total, int) or total < 0:
            raise InvalidArgumentError(f"total must be an int of 0 or more, got {total!r}")
        return total
    hint = operator.length_hint(documents, -1)
    return hint if hint >= 0 else None


def as_stream_progress(progress: Any) -> StreamProgressFn | None:
    """``progress=`` of :meth:`insert_stream`: ``True`` prints each line on stderr, a
    function is called with each :class:`StreamProgress`, ``None`` / ``False``: nothing."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return lambda p: print(p, file=sys.stderr, flush=True)
    if not callable(progress):
        raise InvalidArgumentError(
            "progress must be True, False or a function (StreamProgress), "
            f"not {type(progress).__name__}"
        )
    return progress  # type: ignore[no-any-return]


def batched(documents: Iterable[Any], size: int) -> Iterator[tuple[list[Any], Exception | None]]:
    """``(batch, failure)``: the stream ``size`` items at a time, read lazily. When reading
    fails (a bad line of a file), the items read before it come as a last batch with the
    failure, so the caller commits them, then raises it."""
    it = iter(documents)
    while True:
        batch: list[Any] = []
        try:
            for item in it:
                batch.append(item)
                if len(batch) >= size:
                    break
        except Exception as exc:  # noqa: BLE001 - the reader's error, raised by the caller
            yield batch, exc
            return
        if not batch:
            return
        yield batch, None


@dataclass
class Tally:
    """The progress of one stream, batch by batch, and its report."""

    total: int | None
    started: float = field(default_factory=time.monotonic)
    documents: int = 0
    batches: int = 0
    writing: float = 0.0  # seconds of the batches that wrote something
    report: IndexReport = field(
        default_factory=lambda: IndexReport(0, 0, 0, 0, 0, 0, 0, CostLedger())
    )

    def add(self, read: int, r: IndexReport, seconds: float) -> StreamProgress:
        """A batch of ``read`` documents committed, ``r`` its report, in ``seconds``."""
        self.documents += read
        self.batches += 1
        if r.documents:
            self.writing += seconds
        t = self.report
        self.report = replace(
            plus_written(t, r),
            skipped_documents=t.skipped_documents + r.skipped_documents,
            empty_documents=t.empty_documents + r.empty_documents,
            duplicate_documents=t.duplicate_documents + r.duplicate_documents,
        )
        t.costs.merge(r.costs)
        return self.now()

    def now(self) -> StreamProgress:
        r = self.report
        eta = None
        if self.total is not None and r.documents:
            left = max(0, self.total - self.documents)
            eta = left * self.writing / r.documents
        return StreamProgress(
            documents=self.documents,
            total=self.total,
            written=r.documents,
            unchanged=r.skipped_documents,
            chunks=r.chunks,
            batches=self.batches,
            elapsed=time.monotonic() - self.started,
            eta=eta,
        )
