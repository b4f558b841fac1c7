"""Lexical search of the PostgreSQL store, the lexical half of hybrid seeds.

- **BM25 from the graph cache** (the default). When the store's graph cache
  (:mod:`.graph_cache`) holds a namespace of up to ``PRELOAD_TEXTS`` chunks it holds
  every chunk's text too, caught up with the graph (a write names every chunk it writes or
  drops), and a search through a query's snapshot is the embedded store's BM25
  (:class:`~..lexical.LexicalIndex`, bm25s) over them, in process: no statement, the
  embedded store's scores and ranking. The index is built on the first search after a
  change of the texts, once for the store object's threads. A filtered search reads the
  passing documents (one statement, the filter as SQL over ``rr_documents``) and keeps
  their chunks, scored as unfiltered (one scale, as the embedded store). Outside a
  snapshot a search opens one.
- **Full-text rank in SQL** otherwise (``graph_cache=False``, a namespace of more chunks,
  a snapshot older than the cache's texts): PostgreSQL's full-text search over the
  stored column ``tsv`` (``to_tsvector('english', text)``, GIN index), the words of the
  question OR-ed, ranked by ``ts_rank`` normalised by document length. ``ts_rank`` reads
  the stored words: over the expression it parsed every matching chunk's text again,
  150-250 ms a question on 3 K real passages, where an OR of a question's words matches a
  quarter of them (issue 49). Not BM25: the same role, other scores and rankings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psycopg

from ...core import filters
from .base import PgBase
from .filter_sql import where_sql
from .graph_cache import Lexical

_WORD = re.compile(r"\w+", re.UNICODE)


def or_query(text: str) -> str:
    """A ``to_tsquery`` string matching any word of ``text`` (words only: no operator of the
    user's can reach the parser)."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text) if len(w) > 1))
    return " | ".join(words[:64])


class LexicalReads(PgBase):
    def lexical_search(
        self, text: str, k: int, where: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """Top-``k`` chunk ids by BM25 (> 0; from the graph cache) or full-text rank (in
        SQL), best first."""
        parsed = filters.parse(where)
        if self._graph_cache is not None:
            if self._graph_seq is None:  # outside a snapshot: through one
                with self.snapshot() as view:
                    return view.lexical_search(text, k, where)
            index = self._lexical_index()
            if index is not None:
                return self._bm25(index, text, k, parsed)
        query = or_query(text)
        if k <= 0 or not query:
            return []
        params: dict[str, Any] = {"ns": self.namespace, "q": query, "n": k}
        docs = (
            " AND doc_id IN (SELECT id FROM rr_documents WHERE "
            f"namespace = %(ns)s AND {where_sql(parsed, params)})"
            if parsed is not None
            else ""
        )

        # One simple-protocol string (literals bound here, so three statements travel in one
        # round trip): sequential scans off for this one statement. An OR of a
        # question's words matches a sixth of real passages, so the planner's estimate
        # prefers a sequential scan that tests every chunk's words (10.8 ms executing on
        # 3 K passages, 2.6 K buffers) to the index (0.8 ms) and a heap fetch of the
        # matches (3 ms): issue 49. SET LOCAL holds inside the query's snapshot and in the
        # implicit transaction of a multi-statement string alike; the second puts it back.
        select = (
            "WITH q AS (SELECT to_tsquery('english', %(q)s) AS q) "
            "SELECT id, ts_rank(tsv, q.q, 1)::float8 AS r "
            "FROM rr_chunks, q WHERE namespace = %(ns)s "
            f"AND tsv @@ q.q{docs} "
            "ORDER BY r DESC, id LIMIT %(n)s"
        )
        with self._cursor() as cur:
            with psycopg.ClientCursor(cur.connection) as client:
                bound = client.mogrify(select, params)
            cur.execute(
                f"SET LOCAL enable_seqscan = off; {bound}; SET LOCAL enable_seqscan TO DEFAULT",
                binary=False,  # several statements: the simple protocol
            )
            cur.nextset()
            rows = cur.fetchall()
        return [(r[0], float(r[1])) for r in rows if r[1] > 0]

    def _lexical_index(self) -> Lexical | None:
        """The graph cache's BM25 index as of this snapshot view (caught up to it when
        behind), or None (not held, or the texts changed since: full-text rank)."""
        cache, seq = self._graph_cache, self._graph_seq
        if cache is None or seq is None:
            return None
        with cache.lock:
            cache.at(self._cursor, self.namespace, seq)
        return cache.lexical(seq)

    def _bm25(
        self, index: Lexical, text: str, k: int, parsed: filters.Filter | None
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        if parsed is None:
            return index.search(text, k)

        def passing() -> set[str]:  # in this snapshot, as the SQL path filters
            params: dict[str, Any] = {"ns": self.namespace}
            cond = where_sql(parsed, params)
            with self._cursor() as cur:
                cur.execute(
                    f"SELECT id FROM rr_documents WHERE namespace = %(ns)s AND {cond}", params
                )
                return {r[0] for r in cur.fetchall()}

        return index.search(text, k, passing)
