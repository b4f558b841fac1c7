"""A query's own numerical work on one BLAS thread.

numpy's OpenBLAS spreads even a small product, one question's vector against a few thousand
node vectors, over every core, and waits for each thread it woke. On a busy machine (other
processes, or a server's other requests) that wait costs more than the product: one
1 × 384 by 384 × 1,890 product took 12 ms with the default threads and 0.07 ms with one at a
load of 5 on 2 cores (benchmarks/RESULTS.md, "One BLAS thread"). :func:`one_blas_thread`
sets the BLAS libraries of this process to one thread while any step of the engine runs
(counted, so threads that overlap share one setting), and puts the previous count back
when the last one leaves. Embedders are untouched: onnxruntime and torch keep their own
thread pools, and the embedding runs outside the steps.

It uses ``threadpoolctl`` (scikit-learn's dependency, and so sentence-transformers');
without it, nothing is limited.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_inside = 0  # steps running now
_limiter: Any = None  # threadpoolctl's limiter while any runs
_limited: Any = None  # the libraries it limits (what to give back, whatever loads meanwhile)
_controller: Any = None  # the BLAS libraries this process has loaded
_modules = -1  # len(sys.modules) when they were listed


def _libraries() -> Any:
    """The thread pools of the libraries loaded now, listed again only when Python modules
    were imported since (an import is what loads another BLAS, e.g. SciPy's own OpenBLAS
    beside numpy's); ``False`` without threadpoolctl."""
    global _controller, _modules
    if _controller is not False and len(sys.modules) != _modules:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
            _controller = False
        else:
            _controller, _modules = ThreadpoolController(), len(sys.modules)
    return _controller


def _control(libraries: Any, take: bool) -> None:
    """threadpoolctl (3.7+) lets one Python thread at a time change OpenBLAS's process-wide
    count (the first to change it, while it lives; others' changes are dropped). The steps
    run in whichever thread calls the engine (the main thread, asyncio's or a server's
    workers), so this thread takes the control for the change (``take``) and gives it up
    after the restore."""
    for lib in libraries.lib_controllers:
        clear = getattr(type(lib), "clear_controlling_thread", None)
        if clear is not None:
            clear(force=take)


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread inside the block (see the module doc); re-entrant and thread-safe."""
    global _inside, _limiter, _limited
    with _lock:
        if _inside == 0:
            libraries = _libraries()
            if libraries:
                _control(libraries, take=True)
                _limiter, _limited = libraries.limit(limits=1, user_api="blas"), libraries
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _limiter is not None:
                _control(_limited, take=True)  # the last out may be another thread
                _limiter.restore_original_limits()
                _control(_limited, take=False)
                _limiter = _limited = None
