"""The graph a query walks, in process memory, kept current by the database's change sequence.

The prior's push (:mod:`remindrag_integrations.core.push`) reads the graph round by round and
the walk reads each node's edges and embedding: on PostgreSQL one statement each, 37-53 a
zero-token query on real text (issue 49), where the embedded store answers from memory. This
is the folder store's pattern (:mod:`..sqlite_store`: an in-memory cache that catches up
from a ``changes`` table) for what a query reads of the graph (:class:`GraphCache`); memory
vectors stay in the database:

- **Writers.** A transaction that changes edges (``add_graph``, a document replaced or
  deleted, a memory write that adds learned links, ``drop_namespace``) ends with
  :func:`note_change`: it bumps the namespace's row in ``rr_graph_seq`` (a row lock held to
  commit, so graph writers of one namespace commit in sequence order; taken last, so it
  waits for nothing and nothing waits for it long) and writes one ``rr_graph_changes`` row
  naming the nodes whose edges changed (NULL: too many to name, or everything: read the
  whole graph again). Memory writes without new links write nothing here.
- **Readers.** A query's snapshot (``REPEATABLE READ``) reads the sequence number in the
  round trip that opens it. The first cached read through a snapshot newer than the cache
  brings it up to that number inside that snapshot (the changes since, then the named
  nodes' links: two statements; or the whole graph once), so the cache shows exactly what
  the snapshot sees; a snapshot older than the cache (another thread caught it up
  meanwhile) reads through SQL. A write from any process is therefore seen by the next
  query of every process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import psycopg

from ...core.ids import is_chunk
from ...core.types import Edge, Node
from .sql import _SPREAD_LINKS

RELOAD_OVER = 50_000  # a change naming more nodes says "read everything again" (NULL)
KEEP_CHANGES = 1_000  # change rows kept per namespace; a cache further behind reloads


def note_change(cur: psycopg.Cursor, namespace: str, nodes: Iterable[str] | None) -> int:
    """Record, as the last statements of a graph write, that the edges of ``nodes`` changed
    (``None``: anything may have); returns the new sequence number."""
    row = cur.execute(
        "INSERT INTO rr_graph_seq (namespace, seq) VALUES (%s, 1) ON CONFLICT (namespace) "
        "DO UPDATE SET seq = rr_graph_seq.seq + 1 RETURNING seq",
        (namespace,),
    ).fetchone()
    seq = int(row[0])  # type: ignore[index]
    touched = None if nodes is None else sorted(set(nodes))
    if touched is not None and len(touched) > RELOAD_OVER:
        touched = None
    cur.execute(
        "INSERT INTO rr_graph_changes (namespace, seq, nodes) VALUES (%s, %s, %s::text[])",
        (namespace, seq, touched),
    )
    if seq % 100 == 0:
        cur.execute(
            "DELETE FROM rr_graph_changes WHERE namespace = %s AND seq <= %s",
            (namespace, seq - KEEP_CHANGES),
        )
    return seq


class GraphCache:
    """What a query reads of the graph, in process memory as of change ``seq`` (-1: nothing
    read yet). One per store object, shared by its snapshot views (under ``lock``):

    - ``links``: per node the ``(edge id, other end)`` of its corpus edges to entities and
      anchors, in edge id order (:meth:`~.reads.Reads.spread_links`), read whole on first use;
    - ``edges``, ``embeddings``, ``nodes``: a node's edges (learned ones too), its embedding
      and its row, filled as queries read them (:meth:`~.reads.Reads.adjacency`,
      ``neighbors``, ``node_embeddings``, ``get_nodes``) and dropped for every node a change
      names (a node's row changes only with its aliases: named too).

    Memory vectors are never kept here: they change with every memory write."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seq = -1
        self.links: dict[str, list[tuple[str, str]]] = {}
        self.edges: dict[str, list[Edge]] = {}
        self.embeddings: dict[str, np.ndarray] = {}
        self.nodes: dict[str, Node] = {}
        self.reloads = 0  # whole-graph reads (tests and benchmarks look)
        self.catch_ups = 0

    def at(self, cur_of: Callable[[], Any], namespace: str, seq: int) -> bool:
        """Bring the cache up to change ``seq`` (reading through ``cur_of``, a cursor in a
        snapshot at ``seq``) when behind; whether it now stands at ``seq`` (call under
        ``lock``; a snapshot older than the cache reads through SQL)."""
        if self.seq < seq:
            with cur_of() as cur:
                self._catch_up(cur, namespace, seq)
        return self.seq == seq

    def spread(self, ids: Sequence[str]) -> dict[str, list[str]]:
        links = self.links
        return {n: [o for _, o in links.get(n, ())] for n in ids}

    def _catch_up(self, cur: psycopg.Cursor, namespace: str, seq: int) -> None:
        if self.seq >= 0:
            cur.execute(
                "SELECT seq, nodes FROM rr_graph_changes WHERE namespace = %s "
                "AND seq > %s AND seq <= %s ORDER BY seq",
                (namespace, self.seq, seq),
            )
            rows = cur.fetchall()
            if len(rows) == seq - self.seq and all(r[1] is not None for r in rows):
                touched = sorted({n for _, nodes in rows for n in nodes})
                fresh: dict[str, list[tuple[str, str]]] = {n: [] for n in touched}
                if touched:
                    cur.execute(_SPREAD_LINKS, {"ns": namespace, "ids": touched})
                    for n, eid, other in cur.fetchall():
                        fresh[n].append((eid, other))
                for n, got in fresh.items():
                    self.edges.pop(n, None)
                    self.embeddings.pop(n, None)
                    self.nodes.pop(n, None)
                    if got:
                        got.sort()
                        self.links[n] = got
                    else:
                        self.links.pop(n, None)
                self.seq = seq
                self.catch_ups += 1
                return
        cur.execute(
            "SELECT id, u, v FROM rr_edges WHERE namespace = %s AND kind <> 'learned'",
            (namespace,),
        )
        links: dict[str, list[tuple[str, str]]] = {}
        names: dict[str, str] = {}  # one string object per node id
        for eid, u, v in cur.fetchall():
            u, v = names.setdefault(u, u), names.setdefault(v, v)
            if not is_chunk(v):
                links.setdefault(u, []).append((eid, v))
            if u != v and not is_chunk(u):
                links.setdefault(v, []).append((eid, u))
        for got in links.values():
            got.sort()
        self.links, self.seq = links, seq
        self.edges, self.embeddings, self.nodes = {}, {}, {}
        self.reloads += 1
