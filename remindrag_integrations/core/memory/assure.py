"""Named support is found: after a write whose support a person (or a known answer) named —
``teach``, a thumbs-up on chunk ids, ``memorize(supporting=...)`` — the question is asked
again, zero-token, as a user would; a named passage that is not in the top ``k`` gets a
learned edge from that retrieval's seeds to its anchor (:func:`.write.learned_links`),
enhanced along the question, and the question is asked once more. What is still missing is
reported, never called taught.

Asking again is the query's job, not memory's: the caller passes it in as a
:data:`Requery` (the engine's is :func:`..pipeline.requery` over its store and config), so
memory never imports the query stages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ..errors import UnknownNodeError
from ..steps import Step
from ..store import GraphStore
from ..types import MemoryWrite, Retrieval
from .write import learned_links, update

LINK_ROUNDS = 3  # link, check; at most this many times

Requery = Callable[[str], Step]
"""A question → the step of its zero-token retrieval (returns a :class:`~..types.Retrieval`)."""


def missing(r: Retrieval, chunk_ids: Sequence[str]) -> list[str]:
    got = {rc.chunk.id for rc in r.chunks}
    return [c for c in chunk_ids if c not in got]


def link(
    store: GraphStore, seeds: Sequence[str], chunk_ids: Sequence[str], q: np.ndarray
) -> list[str]:
    """Learned edges from ``seeds`` to the chunks, enhanced with their contains edges along
    ``q`` in one atomic update; returns the learned edge ids."""
    links, parents = learned_links(seeds, chunk_ids)
    enhance = [e.id for e in links] + [parents[c][1] for c in chunk_ids if c in parents]
    if links or enhance:
        update(store, list(dict.fromkeys(enhance)), [], q, links)  # type: ignore[arg-type]
    return [e.id for e in links]


def assure(
    store: GraphStore,
    requery: Requery,
    question: str,
    q: np.ndarray,
    result: MemoryWrite,
    chunk_ids: Sequence[str],
) -> Step:
    """``result`` with ``linked`` and ``not_found`` filled in after checking (and, where
    needed, linking) that every one of ``chunk_ids`` comes back for ``question``.

    The write it checks is already applied, so this never undoes it nor raises for a
    document changed meanwhile: a named passage deleted or edited by another caller after
    the write (its chunk or anchor gone: :class:`~..errors.UnknownNodeError` from the
    re-query or from a link) ends the check, and the passages not seen back are reported in
    ``not_found``. Each link is one atomic update: it is made whole or not at all."""
    if not chunk_ids:
        return result
    made: list[str] = []
    gone = list(chunk_ids)
    try:
        r = yield from requery(question)
        gone = missing(r, chunk_ids)
        for _ in range(LINK_ROUNDS):  # a second round saturates the link (replay needs no more)
            if not gone:
                break
            made += link(store, r.trace.seeds, gone, q)
            r = yield from requery(question)
            gone = missing(r, chunk_ids)
    except UnknownNodeError:  # a named passage changed under the check: report, keep the write
        pass
    linked = list(dict.fromkeys([*result.linked, *made]))
    return replace(result, applied=result.applied or bool(made), linked=linked, not_found=gone)
