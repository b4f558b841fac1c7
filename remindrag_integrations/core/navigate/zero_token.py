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


def anchor_values(walk: Walk, anchors: list[str]) -> list[float]:
    """The first-pass score of each anchor's chunk (query similarity without a prior); kept
    on the walk, as it does not change within a query."""
    known = walk.anchor_values
    missing = [a for a in dict.fromkeys(anchors) if a not in known]
    if missing:
        known.update(
            zip(missing, first_pass(walk, [chunk_of(a) for a in missing], walk.sims(missing)))
        )
    return [known[a] for a in anchors]


def value(walk: Walk, node: str) -> float:
    """How promising ``node`` is: an anchor its first-pass score, an entity its own query
    similarity or that of the best unread anchor it mentions (kept until that anchor is
    read: reading any other one cannot change the best)."""
    if is_anchor(node):
        return anchor_values(walk, [node])[0]
    got = walk.node_values.get(node)
    if got is not None and (got[1] is None or got[1] not in walk.parents):
        return got[0]
    best: tuple[float, str | None] = (walk.sims([node])[0], None)
    if is_entity(node):
        anchors = [a for a in _anchors_near(walk, node) if a not in walk.parents]
        for a, v in zip(anchors, anchor_values(walk, anchors)):
            if v > best[0]:
                best = (v, a)
    walk.node_values[node] = best
    return best[0]


def read_ahead(walk: Walk, nodes: list[str]) -> None:
    """Read what :func:`value` looks at for ``nodes`` in two store calls (one round trip
    each on PostgreSQL, not one per node): the edges of the entities among them, then the
    embeddings of the nodes and of the unread anchors those entities lead to."""
    entities = [n for n in nodes if is_entity(n)]
    walk.prefetch_edges(entities)
    anchors = [a for n in entities for a in _anchors_near(walk, n) if a not in walk.parents]
    walk.sims([*nodes, *anchors])


def _anchors_near(walk: Walk, entity: str) -> list[str]:
    """The anchors among the first :data:`_LOOKAHEAD` edges of ``entity`` (read or unread),
    found once per walk."""
    found = walk.lookahead.get(entity)
    if found is None:
        edges = walk.neighbors(entity)[:_LOOKAHEAD]
        found = walk.lookahead[entity] = [w for e in edges if is_anchor(w := e.other(entity))]
    return found


def _around(walk: Walk, current: str) -> dict[str, list[str]]:
    """Each subgraph node but ``current`` with its unexplored non-chunk neighbours."""
    walk.prefetch_edges(walk.graph_nodes())  # one read for the whole subgraph
    return {
        n: [w for e in walk.frontier(n) if not is_chunk(w := e.other(n))]
        for n in walk.graph_nodes()
        if n != current
    }


def best_backward(
    walk: Walk, current: str, around: dict[str, list[str]] | None = None
) -> tuple[str | None, float]:
    """The subgraph node (other than ``current``) whose best unexplored neighbour is worth
    most, with that value (``around``: :func:`_around`, when read already)."""
    best: tuple[str | None, float] = (None, -2.0)
    if around is None:
        around = _around(walk, current)
        read_ahead(walk, [w for others in around.values() for w in others])
    for n, others in around.items():
        if others:
            v = max(value(walk, w) for w in others)
            if v > best[1]:
                best = (n, v)
    return best


def choose(walk: Walk, current: str, opts: list[Option]) -> MoveChoice:
    """The zero-token policy: stop when enough chunks are read or nothing is promising, else
    the most promising forward or backward move."""
    cfg: RetrievalConfig = walk.cfg
    if len(walk.chunk_ids) >= cfg.navigator.enough_chunks:
        return MoveChoice(enough=True)
    around = _around(walk, current)
    read_ahead(walk, [o.node for o in opts] + [w for ws in around.values() for w in ws])
    fwd: tuple[str | None, float] = max(
        ((o.node, value(walk, o.node)) for o in opts), key=lambda t: t[1], default=(None, -2.0)
    )
    back = best_backward(walk, current, around)
    if max(fwd[1], back[1]) < cfg.navigator.min_similarity:
        return MoveChoice(enough=True)
    if fwd[0] is not None and fwd[1] >= back[1]:
        return MoveChoice(enough=False, action="forward", node=fwd[0])
    return MoveChoice(enough=False, action="backward", node=back[0])


class ZeroTokenNavigator:
    """:func:`choose` as a :class:`~.Navigator`; spends no tokens."""

    spends_tokens = False

    def decide(
        self, walk: Walk, query: str, current: str, opts: list[Option], feedback: str
    ) -> Step:
        return done(choose(walk, current, opts))
