"""seeds -> memory replay -> LLM-guided walk (SPEC §2).

The walk is a sans-IO generator: it yields an :class:`~.llms.Ask` per decision and receives the
reply text, so one loop serves the sync driver, the async driver, an LLM and the zero-token
navigator alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from . import memory as mem
from .config import RetrievalConfig
from .llms import Ask, Step
from .prompts import TRAVERSAL_PROMPT, MoveChoice, parse_move
from .protocols import GraphStore
from .types import Edge, LLMError, LLMOutputError, Move, Node, Triple


@dataclass
class Walk:
    """The growing subgraph: every node but the seeds was added through one edge."""

    store: GraphStore
    q_hat: np.ndarray
    cfg: RetrievalConfig
    template: str = TRAVERSAL_PROMPT
    parents: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # chunk id -> seed/replay/traversal
    moves: list[Move] = field(default_factory=list)
    replayed_edges: list[str] = field(default_factory=list)
    hops: int = 0
    asks: int = 0
    stop_reason: str = ""
    _nbrs: dict[str, list[Edge]] = field(default_factory=dict)
    _edges: dict[str, Edge] = field(default_factory=dict)
    _nodes: dict[str, Node] = field(default_factory=dict)
    _sims: dict[str, float] = field(default_factory=dict)

    # --- graph access with per-walk caches (a remote store pays each lookup once) ----------
    def neighbors(self, node_id: str) -> list[Edge]:
        if node_id not in self._nbrs:
            self._nbrs[node_id] = self.store.neighbors(node_id)
            self._edges.update((e.id, e) for e in self._nbrs[node_id])
        return self._nbrs[node_id]

    def edge(self, edge_id: str) -> Edge:
        if edge_id not in self._edges:
            self._edges[edge_id] = self.store.get_edge(edge_id)
        return self._edges[edge_id]

    def nodes(self, node_ids: Sequence[str]) -> list[Node]:
        """The nodes, fetched from the store in one call for those not seen yet."""
        missing = [n for n in dict.fromkeys(node_ids) if n not in self._nodes]
        if missing:
            self._nodes.update((n.id, n) for n in self.store.get_nodes(missing))
        return [self._nodes[n] for n in node_ids]

    def sims(self, node_ids: Sequence[str]) -> list[float]:
        """cos(q̂, node) for each node (embeddings are unit rows)."""
        missing = [n for n in dict.fromkeys(node_ids) if n not in self._sims]
        if missing:
            vals = self.store.node_embeddings(missing) @ self.q_hat
            self._sims.update(zip(missing, (float(v) for v in vals)))
        return [self._sims[n] for n in node_ids]

    def frontier(self, node_id: str) -> list[Edge]:
        """Edges from ``node_id`` to nodes not yet in the subgraph."""
        return [e for e in self.neighbors(node_id) if e.other(node_id) not in self.parents]

    # --- growing the subgraph ---------------------------------------------------------------
    def add(self, node_id: str, parent: str | None, edge: Edge | None, source: str) -> None:
        self.parents[node_id] = (parent, edge.id if edge else None)
        (node,) = self.nodes([node_id])
        if node.kind == "chunk":
            self.sources.setdefault(node_id, source)
        elif node.kind == "anchor" and node.chunk_id and node.chunk_id not in self.parents:
            contains = next(e for e in self.neighbors(node_id) if e.kind == "contains")
            self.parents[node.chunk_id] = (node_id, contains.id)
            self.sources.setdefault(node.chunk_id, source)
            if source == "traversal":
                self.moves.append(
                    Move(
                        len(self.moves),
                        "read",
                        node.chunk_id,
                        node_id,
                        contains.id,
                        "anchor entered: chunk read",
                    )
                )

    @property
    def chunk_ids(self) -> list[str]:
        return list(self.sources)


def find_seeds(store: GraphStore, query_vecs: Sequence[np.ndarray], n: int) -> list[str]:
    """Top-``n`` entity / anchor nodes per (sub)query, best first, without repeats."""
    seeds: list[str] = []
    for q in query_vecs:
        for node_id, _ in store.search(q, n, ("entity", "anchor")):
            if node_id not in seeds:
                seeds.append(node_id)
    return seeds


def replay(walk: Walk) -> None:
    """Depth-first memory replay from every seed (SPEC §2.3), bounded by max_replay_nodes."""
    cfg = walk.cfg
    # an edge can pass only if α·1 + (1-α)·(q̂·v) > λ: memory below this bound is skipped
    # before any node embedding is read
    need = (cfg.lam - cfg.alpha) / (1.0 - cfg.alpha) if cfg.alpha < 1.0 else np.inf
    stack = [s for s in reversed(list(walk.parents)) if walk.parents[s][0] is None]
    added = 0
    while stack and added < cfg.max_replay_nodes:
        u = stack.pop()
        edges = walk.frontier(u)
        if not edges:
            continue
        memory = walk.store.memory([e.id for e in edges])
        live = [i for i, m in enumerate(memory @ walk.q_hat) if m > need]
        if not live:
            continue
        cands = [edges[i] for i in live]
        scores = mem.replay_scores(
            walk.q_hat,
            walk.store.node_embeddings([u])[0],
            walk.store.node_embeddings([e.other(u) for e in cands]),
            memory[live],
            cfg.alpha,
        )
        for i in np.argsort(-scores):
            e, w = cands[i], cands[i].other(u)
            if scores[i] > cfg.lam and w not in walk.parents and added < cfg.max_replay_nodes:
                walk.add(w, u, e, "replay")
                walk.replayed_edges.append(e.id)
                added += 1
                stack.append(w)


def _describe(node: Node) -> str:
    return f"{node.id} ({node.kind}): {node.name}"


def _render(
    walk: Walk, query: str, current: str, options: list[tuple[Edge, str, float]], feedback: str
) -> str:
    store, cfg = walk.store, walk.cfg
    chunks = (
        "\n".join(
            f"[{cid}] {' '.join(store.get_chunk(cid).text.split())[: cfg.chunk_chars_in_prompt]}"
            for cid in walk.chunk_ids
        )
        or "(none yet)"
    )
    triples = "\n".join(f"- {t.relation}" for t in path_triples(walk)) or "(none yet)"
    sub_nodes = walk.nodes([n for n in walk.parents if not n.startswith("c-")])
    subgraph = "\n".join(f"- {_describe(n)}" for n in sub_nodes)
    option_nodes = walk.nodes([w for _, w, _ in options])
    neighbours = (
        "\n".join(
            f"- {w} ({n.kind}: {n.name}) | {e.text} | {s:.2f}"
            for (e, w, s), n in zip(options, option_nodes)
        )
        or "(no unexplored neighbours: move backward or stop)"
    )
    return walk.template.format(
        query=query,
        chunks=chunks,
        triples=triples,
        subgraph=subgraph,
        current=_describe(walk.nodes([current])[0]),
        neighbours=neighbours,
        feedback=f"\nNote: {feedback}\n" if feedback else "",
    )


def _options(walk: Walk, current: str) -> list[tuple[Edge, str, float]]:
    """Forward options from ``current``: (edge, neighbour, replay score), best first, one edge
    per neighbour; chunk nodes are never options (entering their anchor reads them)."""
    edges = [e for e in walk.frontier(current) if not e.other(current).startswith("c-")]
    if not edges:
        return []
    others = [e.other(current) for e in edges]
    scores = mem.replay_scores(
        walk.q_hat,
        walk.store.node_embeddings([current])[0],
        walk.store.node_embeddings(others),
        walk.store.memory([e.id for e in edges]),
        walk.cfg.alpha,
    )
    best: dict[str, tuple[Edge, str, float]] = {}
    for e, w, s in zip(edges, others, scores):
        if w not in best or s > best[w][2]:
            best[w] = (e, w, float(s))
    ranked = sorted(best.values(), key=lambda t: -t[2])
    return ranked[: walk.cfg.max_neighbors_shown]


_LOOKAHEAD = 64  # neighbours of an entity looked at when valuing it


def _value(walk: Walk, node: str) -> float:
    """How promising ``node`` is for the zero-token navigator: its own query similarity, and
    for an entity also that of the unread anchors it mentions (names alone say little)."""
    own = walk.sims([node])[0]
    if not node.startswith("e-"):
        return own
    anchors = [
        w
        for e in walk.neighbors(node)[:_LOOKAHEAD]
        if (w := e.other(node)).startswith("a-") and w not in walk.parents
    ]
    return max([own, *walk.sims(anchors)])


def _context(walk: Walk, current: str, options: list[tuple[Edge, str, float]]) -> dict:
    """Structured facts for the zero-token navigator: the value of each forward option and,
    for every other subgraph node, the value of its best unexplored neighbour."""
    frontier = []
    for n in walk.parents:
        if n == current or n.startswith("c-"):
            continue
        others = [w for e in walk.frontier(n) if not (w := e.other(n)).startswith("c-")]
        if others:
            frontier.append((n, max(_value(walk, w) for w in others)))
    return {
        "current": current,
        "candidates": [(w, _value(walk, w)) for _, w, _ in options],
        "frontier": frontier,
        "chunks_read": len(walk.chunk_ids),
        "enough_chunks": walk.cfg.nav_enough_chunks,
        "min_similarity": walk.cfg.nav_min_similarity,
    }


def _apply(
    walk: Walk, choice: MoveChoice, current: str, options: list[tuple[Edge, str, float]]
) -> str:
    """Apply a parsed move; returns the new current node or raises LLMOutputError."""
    node = choice.node or ""
    if choice.action == "forward":
        legal = {w: e for e, w, _ in options}
        if node not in legal:
            raise LLMOutputError(
                f"{node} is not an unexplored neighbour of {current}; "
                "pick a forward id from the neighbour list"
            )
        walk.add(node, current, legal[node], "traversal")
        walk.hops += 1
        walk.moves.append(Move(len(walk.moves), "forward", node, current, legal[node].id))
        return node
    if node not in walk.parents or node.startswith("c-"):
        raise LLMOutputError(
            f"{node} is not a node of the subgraph; a backward move must "
            "name one of the listed subgraph nodes"
        )
    walk.moves.append(Move(len(walk.moves), "backward", node, current))
    return node


def traverse(walk: Walk, query: str, structured: bool) -> Step:
    """The LLM-guided walk (SPEC §2.4). Stops when the LLM says enough, at max_hops, at
    max_iterations asks, when nothing is left to explore, or after a failed re-ask."""
    cfg = walk.cfg
    current = next(iter(walk.parents))
    feedback = ""
    while True:
        if walk.hops >= cfg.max_hops:
            walk.stop_reason = "max_hops"
            return
        if walk.asks >= cfg.max_iterations:
            walk.stop_reason = "max_iterations"
            return
        options = _options(walk, current)
        if not options and not any(walk.frontier(n) for n in walk.parents):
            walk.stop_reason = "exhausted"
            return
        prompt = _render(walk, query, current, options, feedback)
        context = _context(walk, current, options) if structured else {}
        walk.asks += 1
        try:
            reply = yield Ask("traversal", prompt, context)
            choice = parse_move(reply or "")
            if choice.enough:
                walk.stop_reason = "enough"
                return
            current = _apply(walk, choice, current, options)
            feedback = ""
        except LLMOutputError as exc:
            walk.moves.append(Move(len(walk.moves), "invalid", None, current, None, str(exc)))
            if feedback:
                walk.stop_reason = "invalid_llm_output"
                return
            feedback = f"your last reply was rejected: {exc}"
        except LLMError as exc:
            walk.stop_reason = f"llm_error: {exc}"
            return


def path_triples(walk: Walk) -> list[Triple]:
    out = []
    for _, eid in walk.parents.values():
        if eid is None:
            continue
        e = walk.edge(eid)
        if e.kind == "relation":
            u, v = walk.nodes([e.u, e.v])
            out.append(Triple(u.name, e.text, v.name, e.id))
    return out
