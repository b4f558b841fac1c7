"""Fakes shipped with the library: a deterministic embedder, scripted chat LLMs that answer
the engine's real prompts by reading them, and a synthetic graph of any size for store tests.
Use them in your own tests, offline.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .core.extract_rules import rule_based_extraction
from .core.ids import NODE_ID_RE, NODE_ID_TEXT, anchor_of, is_chunk
from .core.protocols import Completion
from .core.steps import Ask, current_ask, off_loop
from .core.store import GraphStore
from .core.text import count_tokens
from .core.types import Chunk, Edge, Node
from .stores import InMemoryGraphStore
from .stores.hash_embedder import HashEmbedder as HashEmbedder  # the fakes include it


class ScriptedLLM:
    """A chat LLM whose reply is computed from the prompt by ``fn`` (sync and async)."""

    def __init__(self, fn: Callable[[str], str]) -> None:
        self.fn = fn
        self.prompts: list[str] = []

    def complete(self, prompt: str) -> Completion:
        self.prompts.append(prompt)
        text = self.fn(prompt)
        return Completion(text, count_tokens(prompt), count_tokens(text))

    async def acomplete(self, prompt: str) -> Completion:
        return await off_loop(self.complete, prompt)


def _ask_now() -> Ask:
    found = current_ask()
    if found is None:
        raise RuntimeError("this fake answers the engine's asks: call it through the engine")
    return found


class OracleLLM(ScriptedLLM):
    """A perfect navigator for measuring the memory mechanism and real prompt sizes, never
    accuracy: it knows the gold chunk ids of each question and the graph. It reads the stage
    and the structured facts of each :class:`~.core.steps.Ask` (so custom prompts work), and
    only counts the prompt's tokens.

    - extraction: the rule-based extractor's result, as JSON;
    - traversal: ``enough`` once every gold chunk is collected, else the next step of a
      shortest path (through the real graph) to the nearest uncollected gold chunk, forward
      when it starts at the current node, backward to the subgraph node it starts from;
    - filter: the gold chunks among the collected ones; answer: cites the gold chunks.
    """

    def __init__(
        self,
        store: GraphStore | None = None,
        gold: dict[str, Iterable[str]] | None = None,
        max_depth: int = 6,
    ) -> None:
        super().__init__(self._reply)
        self.store = store
        self.gold = {q: set(v) for q, v in (gold or {}).items()}
        self.max_depth = max_depth

    def _reply(self, prompt: str) -> str:
        ask = _ask_now()
        ctx = ask.context
        if ask.stage == "extraction":
            x = rule_based_extraction(ctx["text"])
            return json.dumps(
                {"title": x.title, "entities": x.entities, "triples": [list(t) for t in x.triples]}
            )
        if ask.stage == "pre_query":
            return json.dumps({"need_retrieval": True, "subquestions": [ctx["query"]]})
        gold = self.gold.get(ctx.get("query", ""), set())
        if ask.stage == "traversal":
            return json.dumps(self._move(ctx, gold))
        chosen = [c for c in ctx.get("chunks", []) if c in gold]
        if ask.stage == "memorize":
            return (
                f"The useful evidence:\n```json\n{json.dumps({'chunks': chosen, 'edges': []})}\n```"
            )
        if ask.stage == "answer":
            return "Based on the context " + " ".join(f"[{c}]" for c in chosen) + "."
        return "{}"

    def _move(self, ctx: dict, gold: set[str]) -> dict:
        collected = set(ctx["chunks"])
        missing = gold - collected
        if not missing or self.store is None:
            return {"enough": True}
        current, subgraph = ctx["current"], list(ctx["subgraph"])
        in_sub = set(subgraph) | collected
        targets = {anchor_of(c) for c in missing}
        # a forward move must be one of the options the prompt shows, as for a real LLM
        listed = set(ctx["options"])
        best: tuple[int, str, str] | None = None
        for start in [current, *[s for s in subgraph if s != current]]:
            path = self._path(start, targets, in_sub, listed if start == current else None)
            if path and (best is None or len(path) < best[0]):
                best = (len(path), start, path[0])
        if best is None:
            return {"enough": True}
        _, start, step = best
        if start == current:
            return {"enough": False, "action": "forward", "node": step}
        return {"enough": False, "action": "backward", "node": start}

    def _path(
        self, start: str, targets: set[str], in_sub: set[str], first_hops: set[str] | None = None
    ) -> list[str] | None:
        """Shortest path (excluding ``start``) through nodes outside the subgraph; its first
        step, when ``first_hops`` is given, is one of them."""
        assert self.store is not None
        prev: dict[str, str] = {start: ""}
        frontier = deque([(start, 0)])
        while frontier:
            node, depth = frontier.popleft()
            if node in targets and node != start:
                path = [node]
                while prev[path[-1]] != start:
                    path.append(prev[path[-1]])
                return path[::-1]
            if depth >= self.max_depth:
                continue
            for e in self.store.neighbors(node):
                w = e.other(node)
                if node == start and first_hops is not None and w not in first_hops:
                    continue
                if w not in prev and w not in in_sub and not is_chunk(w):
                    prev[w] = node
                    frontier.append((w, depth + 1))
        return None


class BrokenLLM(ScriptedLLM):
    """Cycles through malformed JSON, unknown node ids, chatter and empty strings."""

    REPLIES = (
        '{"enough": false, "action": "forward", "node": "e-ffffffffff"}',
        "```json\n{not json at all\n```",
        "",
        '{"enough": false, "action": "sideways", "node": "<script>"}',
        "I think the answer is 42.",
        '{"chunks": ["c-ffffffffff"], "edges": ["r-ffffffffff"]}',
        '["a", "list", "instead"]',
        '{"enough": false, "action": "backward", "node": "a-0000000000"}',
    )

    def __init__(self) -> None:
        self._i = 0
        super().__init__(self._next)

    def _next(self, prompt: str) -> str:
        self._i += 1
        return self.REPLIES[self._i % len(self.REPLIES)]


def prompt_key(prompt: str) -> str:
    """The key of a recorded reply: the sha256 of the exact prompt text."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def ask_key(ask: Ask | None) -> str | None:
    """What the model was asked, whatever order its candidates were listed in: the sha256 of
    the :class:`~.core.steps.Ask`'s stage and structured facts, every list in them taken as a
    set (the traversal's options, choices, subgraph and collected chunks; an answer's
    passages). Two prompts with this key differ at most in the order of near-tied candidates
    (and the figures printed beside them), as on another processor whose float kernels round
    a last bit otherwise; a candidate that is new or gone changes the key. None outside an
    ask."""
    if ask is None:
        return None
    facts = {
        k: sorted(map(str, v)) if isinstance(v, list | tuple | set | frozenset) else v
        for k, v in ask.context.items()
    }
    text = json.dumps({"stage": ask.stage, "facts": facts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_CHOICE_NUMBER = re.compile(
    r'("(?:go|node|target|choice|go_to|goto|id)"\s*:\s*"?\s*(?:choice|option|n|#)?\s*)(\d{1,4})',
    re.IGNORECASE,
)


def renumbered(reply: str, recorded: list[str], now: list[str]) -> str | None:
    """A traversal reply given for choices listed as ``recorded`` (node ids in prompt order),
    said again for the same choices listed as ``now``: a choice number names the same node
    (the model's pick, not its position); ``None`` when that node is not among ``now``.
    Replies that name no number (stop, an id, a name) are returned as they are."""
    m = _CHOICE_NUMBER.search(reply)
    if m is None or recorded == now:
        return reply
    i = int(m.group(2))
    if not 1 <= i <= len(recorded):
        return reply  # an out-of-range pick stays the unusable reply it was
    node = recorded[i - 1]
    if node not in now:
        return None
    return reply[: m.start(2)] + str(now.index(node) + 1) + reply[m.end(2) :]


class RecordingLLM:
    """Wraps a :class:`ChatLLM` and keeps every call: prompt hash, stage, reply and usage, in
    call order (``calls``). :meth:`fixture` gives what :class:`RecordedLLM` replays."""

    def __init__(self, inner: Any, model: str = "") -> None:
        self.inner, self.model = inner, model
        self.calls: list[dict[str, Any]] = []

    def _keep(self, prompt: str, c: Completion, seconds: float) -> Completion:
        ask = current_ask()
        choices = ask.context.get("choices") if ask else None
        self.calls.append(
            {
                "key": prompt_key(prompt),
                "ask": ask_key(ask),
                "choices": list(choices) if isinstance(choices, list) else None,
                "stage": ask.stage if ask else "",
                "reply": c.text,
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "cached_prompt_tokens": c.cached_prompt_tokens,
                "seconds": round(seconds, 3),
                "prompt_chars": len(prompt),
            }
        )
        return c

    def complete(self, prompt: str) -> Completion:
        t0 = time.perf_counter()
        c = self.inner.complete(prompt)
        return self._keep(prompt, c, time.perf_counter() - t0)

    async def acomplete(self, prompt: str) -> Completion:
        t0 = time.perf_counter()
        c = await self.inner.acomplete(prompt)
        return self._keep(prompt, c, time.perf_counter() - t0)

    def fixture(self, **meta: Any) -> dict[str, Any]:
        kept = ("stage", "reply", "prompt_tokens", "completion_tokens", "cached_prompt_tokens")
        replies = {
            c["key"]: {
                **{k: c[k] for k in kept},
                # what RecordedLLM matches when the exact prompt differs (see ask_key)
                **{k: c[k] for k in ("ask", "choices") if c.get(k) is not None},
            }
            for c in self.calls
        }
        return {"model": self.model, **meta, "replies": replies}


class RecordedLLM:
    """Replays replies a real model gave (a :meth:`RecordingLLM.fixture`, or the path of its
    JSON file) with their recorded usage.

    A prompt is found by its exact text, else by what it asks (:func:`ask_key`: the stage and
    the set of candidates, so a near-tie that another processor's float kernels order the
    other way finds its reply; a choice number is said again for the node it picked,
    :func:`renumbered`). A prompt whose candidates changed is answered with an empty reply
    and listed in ``missing`` (stage and the prompt's start), so a test can say exactly which
    prompt changed; ``reordered`` counts the replies whose choice number was said again."""

    def __init__(self, fixture: dict[str, Any] | str | Any) -> None:
        if not isinstance(fixture, dict):
            with open(fixture, encoding="utf-8") as f:
                fixture = json.load(f)
        self.model = fixture.get("model", "")
        self.replies: dict[str, dict[str, Any]] = fixture["replies"]
        self.missing: list[str] = []
        self.served: list[dict[str, Any]] = []
        self.reordered = 0

    def lookup(self, prompt: str) -> tuple[str, dict[str, Any]] | None:
        """The recorded key and reply for ``prompt`` (asked through the engine), or None."""
        key = prompt_key(prompt)
        if key in self.replies:
            return key, self.replies[key]
        ask = current_ask()
        wanted = ask_key(ask)
        if ask is None or wanted is None:
            return None
        now = list(ask.context.get("choices", []))
        # searched on each miss: the replies dict may be updated by its owner between calls
        said: dict[str | None, str] = {}  # the reply each matching record gives here -> key
        for key, entry in self.replies.items():
            if entry.get("ask") == wanted:
                reply = entry["reply"]
                if entry.get("choices") is not None:
                    reply = renumbered(reply, entry["choices"], now)
                said.setdefault(reply, key)
        if len(said) != 1:
            return None  # none, or records that disagree on the pick
        ((reply, key),) = said.items()
        if reply is None:
            return None  # the recorded pick is no longer a choice: the candidates changed
        entry = self.replies[key]
        self.reordered += reply != entry["reply"]
        return key, {**entry, "reply": reply}

    def complete(self, prompt: str) -> Completion:
        found = self.lookup(prompt)
        if found is None:
            ask = current_ask()
            stage, query = (ask.stage, ask.context.get("query", "")) if ask else ("?", "")
            self.missing.append(
                f"{stage}: {prompt_key(prompt)[:12]} query {query!r}, prompt {prompt[:200]!r}"
            )
            return Completion("", count_tokens(prompt), 0)
        return self.serve(found[1])

    def serve(self, hit: dict[str, Any]) -> Completion:
        """A reply :meth:`lookup` found, as the model's completion with its recorded usage."""
        self.served.append(hit)
        return Completion(
            hit["reply"],
            hit["prompt_tokens"],
            hit["completion_tokens"],
            cached_prompt_tokens=hit.get("cached_prompt_tokens", 0),
        )

    async def acomplete(self, prompt: str) -> Completion:
        return self.complete(prompt)


def node_ids_in(text: str) -> list[str]:
    """All well-formed node ids in ``text`` (helper for custom scripted LLMs)."""
    return [t for t in re.findall(NODE_ID_TEXT, text) if NODE_ID_RE.match(t)]


# the synthetic graph's proportions (those of the pooled HotpotQA graph)
EDGES_PER_CHUNK = 25
ENTITIES_PER_CHUNK = 7
CHUNKS_PER_DOC = 10


def synthetic_graph(
    n_edges: int,
    dim: int = 384,
    seed: int = 0,
    embeddings: Callable[[int, int], np.ndarray] | None = None,
    **options: Any,
) -> InMemoryGraphStore:
    """An in-memory store with about ``n_edges`` edges, for store tests and scale benchmarks.

    It keeps the proportions of a real pooled HotpotQA graph: per chunk one anchor, ~7 entity
    mentions drawn from a Zipf-like popularity, ~15 relations among the chunk's entities, one
    context edge to the next chunk of its document (about 25 edges per chunk), and ~3 KB of
    text per chunk. The node vectors are i.i.d. random unit vectors (``seed``), or
    ``embeddings(n_nodes, n_entities)``: one unit row per node in node order, the entities
    first. ``options`` go to :class:`~.stores.InMemoryGraphStore` (``vectors=``, ``ann=`` ...).
    """
    rng = np.random.default_rng(seed)
    n_chunks = max(2, round(n_edges / (EDGES_PER_CHUNK - 2.5)))  # minus duplicate relations
    n_entities = max(4, n_chunks * ENTITIES_PER_CHUNK // 2)  # entities recur across chunks
    words = [f"w{i}" for i in range(5000)]
    chunks, nodes, edges = [], [], []
    ent_ids = [f"e-{i:010x}" for i in range(n_entities)]
    nodes += [Node(e, "entity", f"entity {i}") for i, e in enumerate(ent_ids)]
    popularity = 1.0 / np.arange(1, n_entities + 1) ** 0.8
    popularity /= popularity.sum()
    for i in range(n_chunks):
        cid, aid, doc = f"c-{i:010x}", f"a-{i:010x}", f"doc{i // CHUNKS_PER_DOC}"
        text = f"chunk {i} " + " ".join(rng.choice(words, 500))
        chunks.append(Chunk(cid, doc, i % CHUNKS_PER_DOC, text, 0, len(text)))
        nodes += [Node(aid, "anchor", f"title {i}", doc, cid), Node(cid, "chunk", cid, doc, cid)]
        edges.append(Edge(f"k-{i:010x}", aid, cid, "contains", f"title {i}"))
        ents = np.unique(rng.choice(n_entities, ENTITIES_PER_CHUNK, p=popularity))
        edges += [
            Edge(f"m-{i:08x}{j:02x}", ent_ids[e], aid, "mention", "is mentioned in")
            for j, e in enumerate(ents)
        ]
        for j in range(EDGES_PER_CHUNK - 2 - len(ents)):
            a, b = rng.choice(ents, 2)
            if a != b:
                edges.append(
                    Edge(
                        f"r-{i:08x}{j:02x}",
                        ent_ids[a],
                        ent_ids[b],
                        "relation",
                        f"entity {a} relates to entity {b} in chunk {i}.",
                    )
                )
        if i % CHUNKS_PER_DOC:
            edges.append(
                Edge(
                    f"x-{i:010x}", f"a-{i - 1:010x}", aid, "context", "continues in the next chunk"
                )
            )
    if embeddings is None:
        emb = np.random.default_rng([seed, 1]).standard_normal((len(nodes), dim), np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    else:
        emb = embeddings(len(nodes), n_entities)
    store = InMemoryGraphStore(**options)
    store.add_graph(
        documents=[
            (f"doc{d}", "synthetic", {})
            for d in range((n_chunks + CHUNKS_PER_DOC - 1) // CHUNKS_PER_DOC)
        ],
        chunks=chunks,
        nodes=nodes,
        embeddings=emb,
        edges=edges,
        entity_aliases={},
    )
    return store


def __getattr__(name: str) -> Any:
    # the store contract lives with the stores; kept importable from here
    if name in ("StoreContract", "contract_graph", "store_contract"):
        from .stores import contract

        return getattr(contract, name)
    raise AttributeError(name)
