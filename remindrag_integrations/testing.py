"""Fakes shipped with the library: a deterministic embedder and scripted chat LLMs that answer
the engine's real prompts by reading them. Use them in your own tests, offline.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from .protocols import Completion, GraphStore
from .text import count_tokens
from .types import NODE_ID_RE
from .zero_token import rule_based_extraction

_TOKEN_RE = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Deterministic bag-of-words embedder: each lower-cased word (and word bigram) is hashed
    into ``dim`` buckets with a sign. Similar word sets give similar vectors; no model needed."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    def _bucket(self, token: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        return h % self.dim, (1.0 if (h >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            words = _TOKEN_RE.findall(t.lower())
            for tok in [*words, *(a + " " + b for a, b in zip(words, words[1:]))]:
                j, sign = self._bucket(tok)
                out[i, j] += sign
            if not words:
                out[i, 0] = 1.0
        return out


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
        return await asyncio.to_thread(self.complete, prompt)


def prompt_stage(prompt: str) -> str:
    """Which engine prompt this is (extraction, traversal, memorize, answer, pre_query)."""
    if prompt.startswith("Extract a knowledge graph"):
        return "extraction"
    if prompt.startswith("You are searching a knowledge graph"):
        return "traversal"
    if prompt.startswith("A search over a knowledge graph"):
        return "memorize"
    if prompt.startswith("Answer the question using only"):
        return "answer"
    if prompt.startswith("Decide whether answering"):
        return "pre_query"
    return "unknown"


def _section(prompt: str, start: str, end: str) -> str:
    i = prompt.find(start)
    if i < 0:
        return ""
    i += len(start)
    j = prompt.find(end, i)
    return prompt[i : j if j >= 0 else len(prompt)]


def _ids(text: str, prefix: str = "") -> list[str]:
    found = re.findall(r"\b([cae]-[0-9a-f]{4,40})\b", text)
    return [f for f in dict.fromkeys(found) if f.startswith(prefix)]


def question_of(prompt: str) -> str:
    m = re.search(r"^Question: (.*)$", prompt, re.MULTILINE)
    return m.group(1).strip() if m else ""


class OracleLLM(ScriptedLLM):
    """A perfect navigator for measuring the memory mechanism and real prompt sizes, never
    accuracy: it knows the gold chunk ids of each question and the graph.

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
        stage = prompt_stage(prompt)
        if stage == "extraction":
            x = rule_based_extraction(_section(prompt, "Text:\n", "\0"))
            return json.dumps(
                {"title": x.title, "entities": x.entities, "triples": [list(t) for t in x.triples]}
            )
        if stage == "pre_query":
            return json.dumps(
                {"need_retrieval": True, "subquestions": [_section(prompt, "Question: ", "\n")]}
            )
        gold = self.gold.get(question_of(prompt), set())
        if stage == "traversal":
            return json.dumps(self._move(prompt, gold))
        if stage == "memorize":
            chunks = [c for c in _ids(_section(prompt, "Chunks:", "Edges"), "c-") if c in gold]
            return (
                f"The useful evidence:\n```json\n{json.dumps({'chunks': chunks, 'edges': []})}\n```"
            )
        if stage == "answer":
            cited = [c for c in _ids(_section(prompt, "Context:", "Relations:"), "c-") if c in gold]
            return "Based on the context " + " ".join(f"[{c}]" for c in cited) + "."
        return "{}"

    def _move(self, prompt: str, gold: set[str]) -> dict:
        collected = set(_ids(_section(prompt, "Collected chunks:", "Collected relations:"), "c-"))
        missing = gold - collected
        if not missing or self.store is None:
            return {"enough": True}
        current = _ids(_section(prompt, "Current node:", "\n"))[0]
        subgraph = _ids(_section(prompt, "Nodes already in the subgraph", "Current node:"))
        in_sub = set(subgraph) | collected
        targets = {"a-" + c[2:] for c in missing}
        # a forward move must be one of the neighbours the prompt lists (at most
        # max_neighbors_shown of them), as for a real LLM
        shown = _section(prompt, "Neighbours of the current node", "If the collected chunks")
        listed = set(_ids(shown.split("\nNote:")[0]))
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
                if w not in prev and w not in in_sub and not w.startswith("c-"):
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


def node_ids_in(text: str) -> list[str]:
    """All well-formed node ids in ``text`` (helper for custom scripted LLMs)."""
    return [t for t in re.findall(r"[cae]-[0-9a-f]{4,40}", text) if NODE_ID_RE.match(t)]


# ---------------------------------------------------------------------------------------------
# the store contract: every GraphStore must pass it (in-memory and PostgreSQL do)


def contract_graph(doc_ids: Sequence[str] = ("d1", "d2"), dim: int = 32, salt: str = "") -> dict:
    """A small graph for store tests, as keyword arguments of ``GraphStore.add_graph``.

    Document i (from 1) has chunks ``c-i100``, ``c-i200`` with anchors ``a-i100``, ``a-i200``
    (contains edges ``k-i100``, ``k-i200``, context edge ``x-i000``). Entity ``e-i001`` is
    mentioned only in document i; ``e-i002`` also in document i+1 (edge ``m-(i+1)300``);
    relation ``r-i000`` joins the two, ``r-i900`` links ``e-i002`` to ``e-(i+1)001``.
    ``salt`` changes texts and embeddings, not ids.
    """
    from .types import Chunk, Edge, Node

    emb = HashEmbedder(dim)
    docs, chunks, nodes, texts, edges = [], [], [], [], []
    ents = [(f"e-{i + 1}001", f"Person{i + 1} {salt}") for i in range(len(doc_ids))]
    ents += [(f"e-{i + 1}002", f"City{i + 1} {salt}") for i in range(len(doc_ids))]
    for i, d in enumerate(doc_ids):
        docs.append((d, f"hash-{d}", {"source": "contract"}))
        for j in (1, 2):
            cid, aid, text = f"c-{i + 1}{j}00", f"a-{i + 1}{j}00", f"{d} part {j} {salt}"
            chunks.append(Chunk(cid, d, j - 1, text, 0, len(text), {"part": j}))
            nodes += [
                Node(cid, "chunk", cid, d, cid),
                Node(aid, "anchor", f"Title {d} {j}", d, cid),
            ]
            texts += [text, text]
            edges.append(Edge(f"k-{i + 1}{j}00", aid, cid, "contains", f"Title {d} {j}"))
        edges.append(Edge(f"x-{i + 1}000", f"a-{i + 1}100", f"a-{i + 1}200", "context", "next"))
    for eid, name in ents:
        nodes.append(Node(eid, "entity", name))
        texts.append(name)
    n = len(doc_ids)
    for i in range(n):
        edges.append(Edge(f"m-{i + 1}100", f"e-{i + 1}001", f"a-{i + 1}100", "mention", "mentions"))
        edges.append(Edge(f"m-{i + 1}200", f"e-{i + 1}002", f"a-{i + 1}200", "mention", "mentions"))
        edges.append(
            Edge(
                f"r-{i + 1}000",
                f"e-{i + 1}001",
                f"e-{i + 1}002",
                "relation",
                f"Person{i + 1} lives in City{i + 1}.",
            )
        )
        if i + 1 < n:
            edges.append(Edge(f"m-{i + 2}300", f"e-{i + 1}002", f"a-{i + 2}100", "mention", "m"))
            edges.append(
                Edge(
                    f"r-{i + 1}900",
                    f"e-{i + 1}002",
                    f"e-{i + 2}001",
                    "relation",
                    f"City{i + 1} is near Person{i + 2}.",
                )
            )
    vecs = emb.embed(texts)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return {
        "documents": docs,
        "chunks": chunks,
        "nodes": nodes,
        "embeddings": vecs,
        "edges": edges,
        "entity_aliases": {},
    }


def _raises(exc: type[BaseException], fn: Callable[[], object]) -> None:
    try:
        fn()
    except exc:
        return
    raise AssertionError(f"expected {exc.__name__}")


class StoreContract:
    """The behaviour every :class:`~.protocols.GraphStore` must show.

    Subclass it in a pytest module and provide a ``make_store`` fixture: a callable
    ``make_store(namespace="contract")`` that returns an EMPTY store for that namespace::

        class TestMyStore(StoreContract):
            @pytest.fixture
            def make_store(self):
                return lambda namespace="contract": MyStore(namespace=namespace)

    Or run every check without pytest: ``store_contract(make_store)``.
    """

    dim = 32

    def _filled(self, make_store: Callable[..., GraphStore], ns: str = "contract") -> GraphStore:
        store = make_store(ns)
        store.add_graph(**contract_graph(dim=self.dim))
        return store

    def test_empty_store(self, make_store: Callable[..., GraphStore]) -> None:
        store = make_store("contract")
        assert store.counts() == {
            "documents": 0,
            "chunks": 0,
            "anchors": 0,
            "entities": 0,
            "edges": 0,
            "touched_edges": 0,
        }
        assert store.document_ids() == [] and store.document_hash("d1") is None
        assert store.search(np.ones(self.dim, dtype=np.float32), 3, ("entity",)) == []
        assert store.touched_edges() == 0 and store.top_memory(None, 5) == []
        assert store.load_trace("nope") is None

    def test_add_graph_round_trip(self, make_store: Callable[..., GraphStore]) -> None:
        g = contract_graph(dim=self.dim)
        store = self._filled(make_store)
        assert store.dim == self.dim
        assert store.counts() == {
            "documents": 2,
            "chunks": 4,
            "anchors": 4,
            "entities": 4,
            "edges": len(g["edges"]),
            "touched_edges": 0,
        }
        assert sorted(store.document_ids()) == ["d1", "d2"]
        assert store.document_hash("d2") == "hash-d2"
        ids = [n.id for n in g["nodes"]]
        assert store.get_nodes(ids[::-1]) == g["nodes"][::-1]
        assert store.get_node(ids[0]) == g["nodes"][0]
        assert all(store.get_chunk(c.id) == c for c in g["chunks"])
        assert all(store.get_edge(e.id) == e for e in g["edges"])
        assert np.allclose(store.node_embeddings(ids), g["embeddings"], atol=1e-6)

    def test_add_graph_is_idempotent_and_extends_aliases(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        store = self._filled(make_store)
        before = store.counts()
        g = contract_graph(dim=self.dim)
        store.add_graph(**{**g, "entity_aliases": {"e-1001": ["Person One", "P1"]}})
        assert store.counts() == before
        assert store.get_node("e-1001").aliases == ("Person One", "P1")
        assert store.find_entity_by_name("person one") == "e-1001"
        assert store.find_entity_by_name(" ".join(g["nodes"][-4].name.lower().split())) == "e-1001"
        assert store.find_entity_by_name("nobody") is None

    def test_unknown_ids_and_bad_input_raise(self, make_store: Callable[..., GraphStore]) -> None:
        from .types import Edge, EmbeddingError, Node, UnknownNodeError

        store = self._filled(make_store)
        for call in (
            lambda: store.get_node("e-ffff"),
            lambda: store.get_chunk("c-ffff"),
            lambda: store.get_edge("r-ffff"),
            lambda: store.neighbors("e-ffff"),
            lambda: store.node_embeddings(["e-1001", "e-ffff"]),
            lambda: store.get_nodes(["e-1001", "e-ffff"]),
        ):
            _raises(UnknownNodeError, call)
        bad_edge = Edge("r-ffff", "e-1001", "e-ffff", "relation", "x")
        _raises(
            UnknownNodeError,
            lambda: store.add_graph(
                documents=[],
                chunks=[],
                nodes=[],
                embeddings=np.zeros((0, self.dim)),
                edges=[bad_edge],
                entity_aliases={},
            ),
        )
        _raises(
            EmbeddingError,
            lambda: store.add_graph(
                documents=[],
                chunks=[],
                nodes=[Node("e-eeee", "entity", "X")],
                embeddings=np.ones((1, self.dim + 1)),
                edges=[],
                entity_aliases={},
            ),
        )
        assert store.counts()["edges"] == len(contract_graph(dim=self.dim)["edges"])

    def test_neighbors_are_sorted_and_undirected(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        store = self._filled(make_store)
        got = store.neighbors("e-1002")
        assert [e.id for e in got] == ["m-1200", "m-2300", "r-1000", "r-1900"]
        assert {e.other("e-1002") for e in got} == {"a-1200", "a-2100", "e-1001", "e-2001"}

    def test_search_ranks_by_cosine_within_kinds(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        g = contract_graph(dim=self.dim)
        store = self._filled(make_store)
        kinds = {n.id: n.kind for n in g["nodes"]}
        for i, n in enumerate(g["nodes"]):
            if n.kind == "chunk":
                continue  # a chunk shares its anchor's embedding
            hits = store.search(g["embeddings"][i], 3, ("entity", "anchor"))
            assert hits[0][0] == n.id and abs(hits[0][1] - 1.0) < 1e-4
            assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
            assert all(kinds[h] in ("entity", "anchor") for h, _ in hits)
        only = store.search(g["embeddings"][0], 10, ("entity",))
        assert len(only) == 4 and all(kinds[h] == "entity" for h, _ in only)

    def test_memory_follows_the_spec_math(self, make_store: Callable[..., GraphStore]) -> None:
        from . import memory as mem

        store = self._filled(make_store)
        rng = np.random.default_rng(7)
        expected: dict[str, np.ndarray] = {}
        plan = [
            (["r-1000", "m-1100"], ["k-1100"]),
            (["r-1000"], ["m-1100", "x-1000"]),
            (["x-1000"], ["r-1000"]),
            ([], ["r-1000", "m-2100"]),
        ]
        for enhance, penalise in plan:
            q = rng.normal(size=self.dim).astype(np.float32)
            res = store.update_memory(enhance, penalise, q)
            assert (res.enhanced, res.penalised) == (len(enhance), len(penalise))
            expected.update(mem.apply_updates(expected, enhance, penalise, mem.unit(q), self.dim))
        ids = sorted(expected) + ["r-2000"]
        want = np.stack([expected.get(e, np.zeros(self.dim, np.float32)) for e in ids])
        assert np.allclose(store.memory(ids), want, atol=1e-5)
        assert store.touched_edges() == sum(1 for v in expected.values() if np.any(v))
        assert np.all(np.linalg.norm(store.memory(ids), axis=1) <= 1.0 + 1e-5)

    def test_memory_write_with_unknown_edge_changes_nothing(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        from .types import UnknownNodeError

        store = self._filled(make_store)
        q = np.ones(self.dim, dtype=np.float32)
        _raises(UnknownNodeError, lambda: store.update_memory(["r-1000", "r-ffff"], [], q))
        assert store.touched_edges() == 0 and not np.any(store.memory(["r-1000"]))

    def test_memory_admin(self, make_store: Callable[..., GraphStore]) -> None:
        from . import memory as mem

        store = self._filled(make_store)
        q1, q2 = np.eye(self.dim, dtype=np.float32)[:2]
        store.update_memory(["r-1000", "r-2000"], [], q1)
        store.update_memory(["r-1000"], [], q1)
        store.update_memory(["x-1000"], [], q2)
        top = store.top_memory(None, 2)
        assert top[0][0] == "r-1000" and top[0][1] > top[1][1]
        assert [e for e, _ in store.top_memory(q2, 1)] == ["x-1000"]
        dump = store.export_memory()
        assert sorted(dump) == ["r-1000", "r-2000", "x-1000"]
        assert store.decay_memory(0.5) == 3
        assert np.allclose(store.memory(["x-1000"])[0], 0.5 * mem.delta(0.0) * q2, atol=1e-6)
        _raises(ValueError, lambda: store.decay_memory(1.5))
        assert store.reset_memory() == 3 and store.touched_edges() == 0
        assert store.import_memory(dump) == 3
        assert store.export_memory() == dump

    def test_traces_round_trip(self, make_store: Callable[..., GraphStore]) -> None:
        store = make_store("contract")
        trace = {"trace_id": "t-1", "query": "q", "moves": [{"i": 0, "node": "e-1001"}]}
        store.save_trace(trace)
        assert store.load_trace("t-1") == trace
        store.save_trace({**trace, "memorized": True})
        assert store.load_trace("t-1") == {**trace, "memorized": True}

    def test_delete_documents_leaves_no_orphans(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        from functools import partial

        from .types import UnknownNodeError

        store = self._filled(make_store)
        q = np.eye(self.dim, dtype=np.float32)[3]
        store.update_memory(["r-1000", "r-1900", "r-2000", "m-2100"], [], q)
        kept = store.memory(["r-1900", "r-2000", "m-2100"])
        removed = store.delete_documents(["d1", "not-a-doc"])
        assert removed == {"documents": 1, "chunks": 2, "nodes": 5, "edges": 6}
        assert store.document_ids() == ["d2"]
        # e-1002 is still mentioned in d2: it stays, with its edges into d2 only
        assert [e.id for e in store.neighbors("e-1002")] == ["m-2300", "r-1900"]
        for gone in ("c-1100", "a-1200", "e-1001"):
            _raises(UnknownNodeError, partial(store.get_node, gone))
        for gone in ("r-1000", "m-1200", "k-1100", "x-1000"):
            _raises(UnknownNodeError, partial(store.get_edge, gone))
        _raises(UnknownNodeError, lambda: store.get_chunk("c-1200"))
        assert store.find_entity_by_name("person1") is None
        assert np.array_equal(store.memory(["r-1900", "r-2000", "m-2100"]), kept)
        assert store.touched_edges() == 3
        assert store.counts() == {
            "documents": 1,
            "chunks": 2,
            "anchors": 2,
            "entities": 3,
            "edges": 8,
            "touched_edges": 3,
        }
        assert store.delete_documents(["d1"]) == {
            "documents": 0,
            "chunks": 0,
            "nodes": 0,
            "edges": 0,
        }

    def test_update_is_delete_then_insert(self, make_store: Callable[..., GraphStore]) -> None:
        store = self._filled(make_store)
        store.update_memory(["r-2000"], [], np.ones(self.dim, dtype=np.float32))
        g = contract_graph(("d1",), dim=self.dim, salt="v2")
        store.delete_documents(["d1"])
        store.add_graph(**{**g, "documents": [("d1", "hash-d1-v2", {})]})
        assert store.document_hash("d1") == "hash-d1-v2"
        assert store.get_chunk("c-1100").text.endswith("v2")
        assert store.touched_edges() == 1 and np.any(store.memory(["r-2000"]))

    def test_namespaces_are_isolated(self, make_store: Callable[..., GraphStore]) -> None:
        a = self._filled(make_store, "tenant-a")
        b = make_store("tenant-b")
        gb = contract_graph(("d1", "d2", "d3"), dim=self.dim, salt="b")
        b.add_graph(**gb)
        q = np.ones(self.dim, dtype=np.float32)
        b.update_memory(["r-3000"], [], q)
        snap = (b.counts(), b.export_memory(), sorted(b.document_ids()))
        a.update_memory(["r-1000", "r-2000"], ["m-1100"], q)
        a.decay_memory(0.5)
        a.delete_documents(["d1"])
        a.reset_memory()
        a.save_trace({"trace_id": "t-a"})
        assert (b.counts(), b.export_memory(), sorted(b.document_ids())) == snap
        assert b.load_trace("t-a") is None and a.load_trace("t-a") == {"trace_id": "t-a"}
        # a's searches only ever see a's nodes, even with b's embeddings as the query
        a_ids = {n.id for n in contract_graph(dim=self.dim)["nodes"]}
        for row in gb["embeddings"]:
            assert {h for h, _ in a.search(row, 5, ("entity", "anchor"))} <= a_ids
        _raises(KeyError, lambda: a.get_node("e-3001"))
        assert "e-3001" in {n.id for n in b.get_nodes(["e-3001"])}


def store_contract(make_store: Callable[..., GraphStore]) -> list[str]:
    """Run every :class:`StoreContract` check against ``make_store``; returns their names.
    Raises ``AssertionError`` at the first failing check."""
    suite, ran = StoreContract(), []
    for name in sorted(dir(suite)):
        if name.startswith("test_"):
            getattr(suite, name)(make_store)
            ran.append(name)
    return ran
