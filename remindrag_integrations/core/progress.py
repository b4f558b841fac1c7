"""``progress=`` of insert and teach: ``True`` draws a tqdm bar on stderr (tqdm is a
dependency), a function ``(done, total)`` is called as work finishes, ``False`` / ``None``
shows nothing."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .errors import InvalidArgumentError

ProgressFn = Callable[[int, int], None]


def tqdm_bar(desc: str, unit: str = "chunk", *, always: bool = True) -> ProgressFn:
    """A ``(done, total)`` callback that draws a tqdm bar and closes it when done; with
    ``always=False`` (the command line) only when stderr is a terminal."""
    from tqdm.auto import tqdm

    bar = tqdm(desc=desc, unit=unit, file=sys.stderr, disable=None if not always else False)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def as_progress(progress: Any, desc: str, unit: str = "chunk") -> ProgressFn | None:
    """``progress`` as a callback (or ``None``)."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return tqdm_bar(desc, unit)
    if callable(progress):
        return progress  # type: ignore[no-any-return]
    raise InvalidArgumentError(
        f"progress must be True, False or a function (done, total), not {type(progress).__name__}"
    )
