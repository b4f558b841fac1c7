"""Zero-token mode's navigator: decisions from the graph's features, no LLM. Greedy
best-first over the first-pass score of unexplored neighbours (an anchor: its chunk's fused
prior score, :func:`..prior.first_pass`; an entity: the best unread anchor it mentions, since
names alone say little). Zero-token mode's filter (the chunks most similar to the query) is
:func:`..selection.top_support`.
"""

from __future__ import annotations

from ..config import RetrievalConfig
from ..ids import chunk_of, is_anchor, is_chunk, is_entity
from ..prior import first_pass
from ..steps import Step, done
from ..walk import Walk
from .move import MoveChoice, Option

_LOOKAHEAD = 64  # neighbours of an entity looked at when valuing it


class Values:
    """The zero-token navigator's scratch for one walk: the node values it worked out and the
    anchors near each entity it looked at. An anchor's value never changes within a query;
    another node's is kept with the anchor it comes from (None: its own) until that anchor is
    read; a walk's edges never change."""

    def __init__(self, walk: Walk) -> None:
        self.walk = walk
        self.anchors: dict[str, float] = {}
        self.nodes: dict[str, tuple[float, str | None]] = {}
        self.lookahead: dict[str, list[str]] = {}

    def anchor_values(self, anchors: list[str]) -> list[float]:
        """The first-pass score of each anchor's chunk (query similarity without a prior)."""
        walk, known = self.walk, self.anchors
        missing = [a for a in dict.fromkeys(anchors) if a not in known]
        if missing:
            firsts = first_pass(walk, [chunk_of(a) for a in missing], walk.reads.sims(missing))
            known.update(zip(missing, firsts))
        return [known[a] for a in anchors]

    def value(self, node: str) -> float:
        """How promising ``node`` is: an anchor its first-pass score, an entity its own query
        similarity or that of the best unread anchor it mentions (kept until that anchor is
        read: reading any other one cannot change the best)."""
        walk = self.walk
        if is_anchor(node):
            return self.anchor_values([node])[0]
        got = self.nodes.get(node)
        if got is not None and (got[1] is None or got[1] not in walk.parents):
            return got[0]
        best: tuple[float, str | None] = (walk.reads.sims([node])[0], None)
        if is_entity(node):
            anchors = [a for a in self._anchors_near(node) if a not in walk.parents]
            for a, v in zip(anchors, self.anchor_values(anchors)):
                if v > best[0]:
                    best = (v, a)
        self.nodes[node] = best
        return best[0]

    def read_ahead(self, nodes: list[str]) -> None:
        """Read what :meth:`value` looks at for ``nodes`` in two store calls (one round trip
        each on PostgreSQL, not one per node): the edges of the entities among them, then the
        embeddings of the nodes and of the unread anchors those entities lead to."""
        walk = self.walk
        entities = [n for n in nodes if is_entity(n)]
        walk.reads.prefetch_edges(entities)
        anchors = [a for n in entities for a in self._anchors_near(n) if a not in walk.parents]
        walk.reads.sims([*nodes, *anchors])

    def _anchors_near(self, entity: str) -> list[str]:
        """The anchors among the first :data:`_LOOKAHEAD` edges of ``entity`` (read or
        unread), found once per walk."""
        found = self.lookahead.get(entity)
        if found is None:
            edges = self.walk.reads.neighbors(entity)[:_LOOKAHEAD]
            found = self.lookahead[entity] = [w for e in edges if is_anchor(w := e.other(entity))]
        return found


def _around(walk: Walk, current: str) -> dict[str, list[str]]:
    """Each subgraph node but ``current`` with its unexplored non-chunk neighbours."""
    walk.reads.prefetch_edges(walk.graph_nodes())  # one read for the whole subgraph
    return {
        n: [w for e in walk.frontier(n) if not is_chunk(w := e.other(n))]
        for n in walk.graph_nodes()
        if n != current
    }


def best_backward(
    values: Values, current: str, around: dict[str, list[str]] | None = None
) -> tuple[str | None, float]:
    """The subgraph node (other than ``current``) whose best unexplored neighbour is worth
    most, with that value (``around``: :func:`_around`, when read already)."""
    best: tuple[str | None, float] = (None, -2.0)
    if around is None:
        around = _around(values.walk, current)
        values.read_ahead([w for others in around.values() for w in others])
    for n, others in around.items():
        if others:
            v = max(values.value(w) for w in others)
            if v > best[1]:
                best = (n, v)
    return best


def choose(values: Values, current: str, opts: list[Option]) -> MoveChoice:
    """The zero-token policy: stop when enough chunks are read or nothing is promising, else
    the most promising forward or backward move."""
    walk = values.walk
    cfg: RetrievalConfig = walk.cfg
    if len(walk.chunk_ids) >= cfg.navigator.enough_chunks:
        return MoveChoice(enough=True)
    around = _around(walk, current)
    values.read_ahead([o.node for o in opts] + [w for ws in around.values() for w in ws])
    fwd: tuple[str | None, float] = max(
        ((o.node, values.value(o.node)) for o in opts), key=lambda t: t[1], default=(None, -2.0)
    )
    back = best_backward(values, current, around)
    if max(fwd[1], back[1]) < cfg.navigator.min_similarity:
        return MoveChoice(enough=True)
    if fwd[0] is not None and fwd[1] >= back[1]:
        return MoveChoice(enough=False, action="forward", node=fwd[0])
    return MoveChoice(enough=False, action="backward", node=back[0])


class ZeroTokenNavigator:
    """:func:`choose` as a :class:`~.Navigator`; spends no tokens. Its scratch
    (:class:`Values`) is its own, one per walk: a new walk starts a new one."""

    spends_tokens = False

    def __init__(self) -> None:
        self._values: Values | None = None

    def values(self, walk: Walk) -> Values:
        """This navigator's scratch for ``walk`` (a new one when the walk is new)."""
        if self._values is None or self._values.walk is not walk:
            self._values = Values(walk)
        return self._values

    def choose(self, walk: Walk, current: str, opts: list[Option]) -> MoveChoice:
        return choose(self.values(walk), current, opts)

    def decide(
        self, walk: Walk, query: str, current: str, opts: list[Option], feedback: str
    ) -> Step:
        return done(self.choose(walk, current, opts))
