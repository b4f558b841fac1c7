"""Lexical search of the PostgreSQL store: PostgreSQL's full-text search over chunk texts (the
stored column ``tsv``, ``to_tsvector('english', text)``, with a GIN index), the words of the
question OR-ed, ranked by ``ts_rank`` normalised by document length. ``ts_rank`` reads the
stored words: over the expression it parsed every matching chunk's text again, 150-250 ms
a question on 3 K real passages, where an OR of a question's words matches a quarter of
them (issue 49). Not BM25 (the embedded store's), but the
same role: the lexical half of hybrid seeds."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psycopg

from ...core import filters
from .base import PgBase
from .filter_sql import where_sql

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
        """Top-``k`` chunk ids by full-text rank (> 0), best first."""
        query = or_query(text)
        if k <= 0 or not query:
            return []
        params: dict[str, Any] = {"ns": self.namespace, "q": query, "n": k}
        parsed = filters.parse(where)
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
