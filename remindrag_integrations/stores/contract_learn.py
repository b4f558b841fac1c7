"""The store contract's checks of what memory learns and keeps: learned edges added in a
memory update, a document's chunks, and memory carried over when a document is replaced
(mixed into :class:`.contract.StoreContract`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..core.errors import InvalidArgumentError, UnknownNodeError
from ..core.protocols import GraphStore
from ..core.types import Edge
from .contract_graph import contract_graph

LINK = Edge("l-2001a1200", "e-2001", "a-1200", "learned", "remembered link")


def _rename(graph: dict, names: dict[str, str]) -> dict:
    """``graph`` with node and edge ids renamed (an edited chunk gets new ids)."""

    def n(x: str) -> str:
        return names.get(x, x)

    out = dict(graph)
    out["chunks"] = [replace(c, id=n(c.id), text=c.text + " edited") for c in graph["chunks"]]
    out["nodes"] = [
        replace(x, id=n(x.id), chunk_id=x.chunk_id and n(x.chunk_id)) for x in graph["nodes"]
    ]
    out["edges"] = [replace(e, id=n(e.id), u=n(e.u), v=n(e.v)) for e in graph["edges"]]
    return out


class LearnContract:
    dim = 32

    def _filled(self, make_store: Callable[..., GraphStore], ns: str = "contract") -> GraphStore:
        store = make_store(ns)
        store.add_graph(**contract_graph(dim=self.dim))
        return store

    def test_memory_update_adds_learned_links(self, make_store: Callable[..., GraphStore]) -> None:
        from ..core.memory.write import update

        store = self._filled(make_store)
        q = np.eye(self.dim, dtype=np.float32)[2]
        bad = Edge("r-77", "e-2001", "a-1200", "relation", "x")
        for links, err in (
            ([bad], InvalidArgumentError),
            ([replace(LINK, v="a-9900")], UnknownNodeError),
        ):
            try:
                update(store, [LINK.id], [], q, links)
            except err:
                pass
            else:
                raise AssertionError(f"expected {err.__name__}")
            assert store.touched_edges() == 0
        update(store, [LINK.id, "k-1200"], [], q, [LINK])
        assert store.get_edge(LINK.id) == LINK
        assert LINK.id in [e.id for e in store.neighbors("e-2001")]
        assert LINK.id in [e.id for e in store.neighbors("a-1200")]
        assert np.allclose(store.memory([LINK.id])[0], 2 / np.pi * q, atol=1e-5)
        update(store, [LINK.id], [], q, [LINK])  # an existing link is kept, its memory grows
        assert store.counts()["edges"] == 15 and store.touched_edges() == 2
        assert float(np.linalg.norm(store.memory([LINK.id])[0])) > 2 / np.pi
        store.delete_documents(["d1"])  # a learned edge goes with its end
        assert LINK.id not in [e.id for e in store.neighbors("e-2001")]

    def test_document_chunks_in_order(self, make_store: Callable[..., GraphStore]) -> None:
        store = self._filled(make_store)
        assert [c.id for c in store.document_chunks("d2")] == ["c-2100", "c-2200"]
        assert store.document_chunks("nope") == []

    def test_replacing_a_document_carries_memory(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        """d1's second chunk is edited (new ids), its first is not: the first keeps its memory,
        the second's edges pass theirs to their successors, a learned edge is made anew."""
        from ..core.memory.write import update

        store = self._filled(make_store)
        q = np.eye(self.dim, dtype=np.float32)[5]
        olds = ["k-1100", "k-1200", "m-1200", "x-1000", LINK.id]
        update(store, olds, [], q, [LINK])
        before = store.memory(olds)
        names = {"c-1200": "c-1201", "a-1200": "a-1201", "k-1200": "k-1201"}
        names |= {"x-1000": "x-1001", "m-1200": "m-1201"}
        v2 = _rename(contract_graph(("d1",), dim=self.dim), names)
        new_link = Edge("l-2001a1201", "e-2001", "a-1201", "learned", LINK.text)
        moves = {"k-1200": "k-1201", "m-1200": "m-1201", "x-1000": "x-1001", LINK.id: new_link.id}
        report = store.add_graph(
            **{**v2, "edges": [*v2["edges"], new_link], "documents": [("d1", "hash-v2", {})]},
            replace=["d1"],
            memory_moves=moves,
        )
        assert report == {"kept": 1, "moved": 4, "dropped": 0}
        after = store.memory(["k-1100", "k-1201", "m-1201", "x-1001", new_link.id])
        assert np.allclose(after, before, atol=1e-5)
        for gone in ("k-1200", "m-1200", "x-1000", LINK.id):
            try:
                store.get_edge(gone)
            except UnknownNodeError:
                continue
            raise AssertionError(f"{gone} should be gone")
        assert store.touched_edges() == 5
        # a replace with no moves drops what it removes, and says so
        v3 = _rename(contract_graph(("d1",), dim=self.dim), {"c-1201": "c-1202"})
        report = store.add_graph(**{**v3, "documents": [("d1", "hash-v3", {})]}, replace=["d1"])
        assert report["kept"] + report["dropped"] == 5 and report["moved"] == 0
