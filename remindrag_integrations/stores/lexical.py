"""BM25 over chunk texts, the lexical half of hybrid seeds (bm25s: Okapi BM25, English stop
words, the same tokenisation as the bench's ``bm25`` baseline).

bm25s builds a static index: a store builds one lazily on the first lexical search after a
change, so an insert or delete costs nothing until a query needs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

Allowed = Callable[[list[str]], np.ndarray]


def _bm25s() -> Any:
    """bm25s, with its logger quiet: it sets that logger to DEBUG when imported, so its
    "Building index from tokens" line reached any handler an app configured
    (``logging.basicConfig(level=logging.INFO)`` included). Raised to WARNING unless the
    app chose another level for it."""
    import bm25s

    log = logging.getLogger("bm25s")
    if log.level == logging.DEBUG:
        log.setLevel(logging.WARNING)
    return bm25s


def warm() -> None:
    """Import bm25s now (and SciPy's sparse module with it: ~0.2 s once per process), so that
    the first query does not: the store calls this when it is first given chunks."""
    _bm25s()


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Lower-cased word tokens without English stop words (bm25s' tokenizer)."""
    bm25s = _bm25s()
    out = bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
    return [list(t) for t in out]


class LexicalIndex:
    """A BM25 index over fixed (chunk id, text) pairs, in id order; a store rebuilds it after
    a change."""

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        bm25s = _bm25s()
        pairs = sorted(items)  # in id order: ties go by id, whatever order chunks came in
        self.ids = [cid for cid, _ in pairs]
        self._bm25 = bm25s.BM25()
        tokens = tokenize([t for _, t in pairs])
        # bm25s cannot index a corpus without a single word (every text stop words or
        # one-letter tokens): such an index matches nothing
        self._empty = not any(tokens)
        if not self._empty:
            self._bm25.index(tokens, show_progress=False)

    def scores(self, text: str) -> tuple[list[str], np.ndarray]:
        """Every chunk id and its BM25 score for ``text`` (zeros when no query word is
        indexed)."""
        ids = self.ids
        (tokens,) = tokenize([text])
        known = [] if self._empty else self._bm25.get_tokens_ids(tokens)
        if not known:
            return ids, np.zeros(len(ids), np.float32)
        return ids, np.asarray(self._bm25.get_scores_from_ids(known), np.float32)

    def search(self, text: str, n: int, allowed: Allowed | None = None) -> list[tuple[str, float]]:
        """The top-``n`` chunks with a positive score, best first (ties by id); with
        ``allowed`` only the chunks it passes."""
        ids, sc = self.scores(text)
        if not ids or n <= 0:
            return []
        if allowed is not None and (sc > 0).any():  # (none matches: no filter to ask)
            sc = np.where(allowed(ids), sc, 0.0)
        n = min(n, int((sc > 0).sum()))
        if n == 0:
            return []
        top = np.argpartition(-sc, n - 1)[:n]
        top = top[np.lexsort((top, -sc[top]))]
        return [(ids[i], float(sc[i])) for i in top]
