"""``progress=`` of insert, teach and load: ``True`` draws a tqdm bar on stderr (tqdm is a
dependency), a function ``(done, total)`` is called as work finishes, ``False`` / ``None``
shows nothing."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .errors import InvalidArgumentError

ProgressFn = Callable[[int, int], None]


def offset_progress(progress: ProgressFn | None, done: int, total: int) -> ProgressFn | None:
    """``progress`` of one part (a batch, one embedding call) seen as progress over the
    whole: the part's ``n`` done is ``done + n`` of ``total``."""
    if progress is None:
        return None
    return lambda n, _: progress(done + n, total)


def tqdm_bar(desc: str, unit: str = "chunk", *, always: bool = True) -> ProgressFn:
    """A ``(done, total)`` callback that draws a tqdm bar (from its first call, so a bar
    for work that never starts is never drawn) and closes it when done; with
    ``always=False`` (the command line) only when stderr is a terminal."""
    from tqdm.auto import tqdm

    bars: list[Any] = []

    def update(done: int, total: int) -> None:
        if not bars:
            disable = None if not always else False
            bars.append(tqdm(desc=desc, total=total, unit=unit, file=sys.stderr, disable=disable))
        bar = bars[0]
        bar.total = total
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def check(progress: Any) -> None:
    """Raise :class:`InvalidArgumentError` unless ``progress`` is a valid ``progress=``."""
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise InvalidArgumentError(
            "progress must be True, False or a function (done, total), "
            f"not {type(progress).__name__}"
        )


def as_progress(progress: Any, desc: str, unit: str = "chunk") -> ProgressFn | None:
    """``progress`` as a callback (or ``None``)."""
    check(progress)
    if progress is None or progress is False:
        return None
    if progress is True:
        return tqdm_bar(desc, unit)
    return progress  # type: ignore[no-any-return]
