"""The sans-IO runtime: every engine operation is a generator (a *step*) that yields what it
needs from the outside world, an :class:`Ask` for the LLM or an :class:`Embed` for the
embedder (an insert also :class:`Work` to block on and :class:`Many` steps to run at once),
and receives the answer. :func:`drive` runs a step synchronously, :func:`adrive` on
an event loop; neither the steps nor their loops are written twice.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from .blas import one_blas_thread
from .errors import EmbeddingError, LLMError, LLMTimeoutError, ReMindError
from .protocols import ChatLLM, Completion, Embedder
from .types import CostLedger

T = TypeVar("T")


@dataclass(frozen=True)
class Ask:
    """One question for the LLM: the ``stage`` it belongs to (for cost accounting and for
    fakes that answer by stage) and the ``prompt`` text."""

    stage: str
    prompt: str
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Embed:
    """A request to embed texts; the reply is a unit-normalised matrix, one row per text."""

    texts: tuple[str, ...]


@dataclass(frozen=True)
class Work:
    """Blocking work a step hands its driver (a batch's store write and embedding): the
    reply is ``fn()``, run by :func:`drive` as it is, by :func:`adrive` in a worker thread,
    neither inside the step's one-BLAS-thread block. What it raises is thrown into the step."""

    fn: Callable[[], Any]


@dataclass(frozen=True)
class Many:
    """Independent steps to run at most ``limit`` at once (:func:`drive_many` /
    :func:`adrive_many`); the reply is their results in order. What it raises is thrown into
    the step."""

    steps: Sequence[Generator[Any, Any, Any]]
    limit: int
    progress: Callable[[int, int], None] | None = None


Step = Generator[Ask | Embed | Work | Many, Any, Any]


def done(value: T) -> Generator[Any, Any, T]:
    """A step that needs nothing from outside and returns ``value`` (for pure decisions)."""
    return value
    yield  # pragma: no cover - makes this a generator


_CURRENT_ASK: contextvars.ContextVar[Ask | None] = contextvars.ContextVar(
    "remindrag_current_ask", default=None
)


def timed(step: Generator[Any, Any, T], spent: list[float]) -> Generator[Any, Any, T]:
    """``yield from timed(step, spent)`` runs ``step`` and adds to ``spent[0]`` the seconds
    it computes, not those its requests wait for (an LLM reply is not the step's work)."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        t = time.perf_counter()
        try:
            req = step.throw(error) if error is not None else step.send(reply)
        except StopIteration as stop:
            spent[0] += time.perf_counter() - t
            return stop.value  # type: ignore[no-any-return]
        except BaseException:
            spent[0] += time.perf_counter() - t
            raise
        spent[0] += time.perf_counter() - t
        try:
            reply, error = (yield req), None
        except GeneratorExit:
            step.close()
            raise
        except BaseException as exc:  # thrown in by the driver: the step decides
            reply, error = None, exc


def current_ask() -> Ask | None:
    """The :class:`Ask` an LLM call is answering (set while the call runs), so fakes and
    recorders can read its stage and structured context instead of parsing the prompt."""
    return _CURRENT_ASK.get()


class Decider(Protocol):
    """Answers :class:`Ask` requests: an LLM, or nothing at all in zero-token mode."""

    def resolve(self, ask: Ask, ledger: CostLedger) -> str: ...

    async def aresolve(self, ask: Ask, ledger: CostLedger) -> str: ...


class NoLLM:
    """The decider of zero-token mode: every stage decides without asking, so an ask is a
    bug in the step that sent it."""

    def resolve(self, ask: Ask, ledger: CostLedger) -> str:
        raise ReMindError(f"stage {ask.stage!r} asked an LLM in zero-token mode")

    async def aresolve(self, ask: Ask, ledger: CostLedger) -> str:
        return self.resolve(ask, ledger)


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` awaited from a daemon thread of its own. Unlike ``asyncio.to_thread``
    (the loop's default executor, which ``asyncio.run`` joins before it returns), a call
    abandoned after a timeout does not hold up the program: it runs on in its thread until
    it returns, its result is dropped, and the process may exit before that."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if fut.cancelled():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)

    def run() -> None:
        try:
            value, error = ctx.run(fn, *args), None
        except BaseException as exc:  # handed to the awaiting task
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is closed: nobody waits for this call any more
            pass

    threading.Thread(target=run, name="remindrag-llm", daemon=True).start()
    return await fut


def call_with_timeout(fn: Callable[[], T], timeout: float | None, what: str) -> T:
    """``fn()`` in a thread of its own, abandoned after ``timeout`` seconds. A call that hangs
    keeps only its own (daemon) thread: it cannot starve later calls or other engines."""
    if timeout is None:
        return fn()
    box: dict[str, Any] = {}
    ctx = contextvars.copy_context()  # framework tracing in context variables nests correctly

    def run() -> None:
        try:
            box["value"] = ctx.run(fn)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    worker = threading.Thread(target=run, name="remindrag-llm", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise LLMTimeoutError(f"{what}: no reply within {timeout}s")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


class LLMDecider:
    """Answers asks with a chat LLM, enforcing a timeout and recording cost per stage."""

    def __init__(self, llm: ChatLLM, timeout: float | None = None) -> None:
        self.llm = llm
        self.timeout = timeout

    def resolve(self, ask: Ask, ledger: CostLedger) -> str:
        token = _CURRENT_ASK.set(ask)
        try:
            c = call_with_timeout(lambda: self.llm.complete(ask.prompt), self.timeout, ask.stage)
        except LLMError:
            raise
        except Exception as exc:  # the provider's own error type
            raise LLMError(f"{ask.stage}: {type(exc).__name__}: {exc}") from exc
        finally:
            _CURRENT_ASK.reset(token)
        record(ledger, ask.stage, c)
        return c.text

    async def aresolve(self, ask: Ask, ledger: CostLedger) -> str:
        token = _CURRENT_ASK.set(ask)
        try:
            c = await asyncio.wait_for(self.llm.acomplete(ask.prompt), self.timeout)
        except TimeoutError:
            raise LLMTimeoutError(f"{ask.stage}: no reply within {self.timeout}s") from None
        except LLMError:
            raise
        except Exception as exc:
            raise LLMError(f"{ask.stage}: {type(exc).__name__}: {exc}") from exc
        finally:
            _CURRENT_ASK.reset(token)
        record(ledger, ask.stage, c)
        return c.text


def record(ledger: CostLedger, stage: str, c: Completion) -> None:
    if c.cached:  # a cached reply spent nothing
        ledger.record(stage, 0, 0, calls=0)
    else:
        ledger.record(
            stage, c.prompt_tokens, c.completion_tokens, cached_prompt_tokens=c.cached_prompt_tokens
        )


def embed_checked(
    embedder: Embedder,
    texts: Sequence[str],
    batch_size: int = 64,
    dim: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Embed in batches and unit-normalise; raises :class:`EmbeddingError` on a bad shape,
    a non-finite value or a dimension that differs from ``dim``. ``progress(done, total)``
    is called after each batch."""
    rows = []
    for i in range(0, len(texts), batch_size):
        batch = list(texts[i : i + batch_size])
        try:
            out = np.asarray(embedder.embed(batch), dtype=np.float32)
        except ReMindError:
            raise
        except Exception as exc:  # the embedder's own failure (a server down, a bad model)
            raise EmbeddingError(
                f"the embedder failed: {type(exc).__name__}: {exc}; check that it runs "
                "(its server, model files, network), then try again"
            ) from exc
        if out.ndim != 2 or out.shape[0] != len(batch):
            raise EmbeddingError(f"embedder returned shape {out.shape} for {len(batch)} texts")
        rows.append(out)
        if progress is not None:
            progress(i + len(batch), len(texts))
    if not rows:
        return np.zeros((0, dim or 0), dtype=np.float32)
    mat = np.concatenate(rows)
    if not np.all(np.isfinite(mat)):
        raise EmbeddingError("embedder returned NaN or infinite values")
    if dim is not None and mat.shape[1] != dim:
        raise EmbeddingError(f"embedding dimension {mat.shape[1]} != store dimension {dim}")
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return mat / norms


@dataclass(frozen=True)
class Runtime:
    """What a step's requests are answered with."""

    decider: Decider
    embedder: Embedder
    dim: int | None = None


@dataclass(frozen=True)
class _Done:
    value: Any


def _advance(
    step: Step, reply: Any, error: BaseException | None
) -> Ask | Embed | Work | Many | _Done:
    """The step's own work up to its next request, its small products on one BLAS thread
    (:mod:`.blas`)."""
    try:
        with one_blas_thread():
            return step.throw(error) if error else step.send(reply)
    except StopIteration as stop:
        return _Done(stop.value)


def drive(step: Step, rt: Runtime, ledger: CostLedger) -> Any:
    """Run a step to completion, answering its requests synchronously. An LLM failure is
    thrown into the step, which decides whether to degrade or re-raise."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        req = _advance(step, reply, error)
        if isinstance(req, _Done):
            return req.value
        if isinstance(req, (Work, Many)):
            try:
                if isinstance(req, Work):
                    reply, error = req.fn(), None
                else:
                    reply = drive_many(req.steps, rt, ledger, req.limit, req.progress)
                    error = None
            except Exception as exc:  # the step's own cleanup runs, then it raises
                reply, error = None, exc
            continue
        try:
            if isinstance(req, Embed):
                reply, error = embed_checked(rt.embedder, req.texts, dim=rt.dim), None
            else:
                reply, error = rt.decider.resolve(req, ledger), None
        except LLMError as exc:
            reply, error = None, exc


async def adrive(step: Step, rt: Runtime, ledger: CostLedger) -> Any:
    """:func:`drive` for the event loop: LLM asks are awaited, while the step's own work
    between asks (store reads and writes, e.g. PostgreSQL round trips) and embeddings run in
    a worker thread, so nothing blocks the loop."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        # StopIteration cannot cross a Future: the worker hands it back as a value
        req = await asyncio.to_thread(_advance, step, reply, error)
        if isinstance(req, _Done):
            return req.value
        if isinstance(req, (Work, Many)):
            try:
                if isinstance(req, Work):
                    reply, error = await asyncio.to_thread(req.fn), None
                else:
                    reply = await adrive_many(req.steps, rt, ledger, req.limit, req.progress)
                    error = None
            except Exception as exc:  # the step's own cleanup runs, then it raises
                reply, error = None, exc
            continue
        try:
            if isinstance(req, Embed):
                reply = await asyncio.to_thread(embed_checked, rt.embedder, req.texts, dim=rt.dim)
                error = None
            else:
                reply, error = await rt.decider.aresolve(req, ledger), None
        except LLMError as exc:
            reply, error = None, exc


def ask(stage: str, prompt: str, context: dict[str, Any] | None = None) -> Step:
    """Yield one :class:`Ask` and return the reply text ('' for none)."""
    reply = yield Ask(stage, prompt, context or {})
    return reply or ""


def drive_many(
    steps: Sequence[Step],
    rt: Runtime,
    ledger: CostLedger,
    limit: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[Any]:
    """Run independent steps, at most ``limit`` at once, results in order. Each step's costs
    go to ``ledger``; ``progress(done, total)`` is called as they finish."""
    if not steps:
        return []
    lock, count = threading.Lock(), [0]

    def run(step: Step) -> Any:
        sub = CostLedger()
        out = drive(step, rt, sub)
        with lock:
            ledger.merge(sub)
            count[0] += 1
            if progress:
                progress(count[0], len(steps))
        return out

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(limit, len(steps)), thread_name_prefix="remindrag") as pool:
        return list(pool.map(run, steps))


async def adrive_many(
    steps: Sequence[Step],
    rt: Runtime,
    ledger: CostLedger,
    limit: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[Any]:
    """:func:`drive_many` on the event loop (a semaphore bounds the concurrency)."""
    sem, count = asyncio.Semaphore(limit), [0]

    async def run(step: Step) -> Any:
        async with sem:
            out = await adrive(step, rt, ledger)
        count[0] += 1
        if progress:
            progress(count[0], len(steps))
        return out

    return list(await asyncio.gather(*(run(s) for s in steps)))
