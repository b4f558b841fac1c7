"""Store contract, part two: filtered search, the whole graph and recent traces (mixed into
:class:`~.contract.StoreContract`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.store import GraphStore


class ViewsContract:
    dim = 32

    def _tagged(self, make_store: Callable[..., GraphStore]) -> tuple[GraphStore, dict]:
        """The contract graph over documents d1..d3 with metadata to filter on."""
        from .contract_graph import contract_graph

        g = contract_graph(("d1", "d2", "d3"), dim=self.dim)
        meta: dict[str, dict[str, Any]] = {
            "d1": {"dept": "x", "year": 2020, "tag": "a"},
            "d2": {"dept": "y", "year": 2023, "tag": "b"},
            "d3": {"dept": "x", "year": "2024"},  # a string year never compares with a number
        }
        g["documents"] = [(d, h, meta[d]) for d, h, _ in g["documents"]]
        store = make_store("contract")
        store.add_graph(**g)
        return store, g

    def test_search_where_keeps_passing_documents_and_every_entity(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        store, g = self._tagged(make_store)
        q = np.ones(self.dim, dtype=np.float32)
        docs = {n.id: n.doc_id for n in g["nodes"]}

        def found(where: dict | None) -> tuple[set, int]:
            hits = [h for h, _ in store.search(q, 100, ("entity", "anchor", "chunk"), where)]
            return {docs[h] for h in hits if docs[h]}, sum(docs[h] is None for h in hits)

        assert found(None) == ({"d1", "d2", "d3"}, 6)
        assert found({"dept": "x"}) == ({"d1", "d3"}, 6)
        assert found({"year": {"$gte": 2021}})[0] == {"d2"}
        assert found({"year": {"$lt": 2021}})[0] == {"d1"}
        assert found({"tag": {"$in": ["b", "c"]}})[0] == {"d2"}
        assert found({"tag": {"$nin": ["a"]}})[0] == {"d2", "d3"}  # no key: $nin passes
        assert found({"tag": {"$ne": "a"}})[0] == {"d2", "d3"}
        either = {"$or": [{"dept": "y"}, {"year": "2024"}]}
        assert found(either)[0] == {"d2", "d3"}
        assert found({"dept": "x", "tag": "a"})[0] == {"d1"}
        assert found({"dept": "none"}) == (set(), 6)
        top = store.search(q, 2, ("anchor",), {"dept": "y"})
        assert len(top) == 2 and {docs[h] for h, _ in top} == {"d2"}  # k filled after filtering

    def test_lexical_search_ranks_words_filters_and_forgets(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        from ..core.protocols import LexicalStore

        store, _ = self._tagged(make_store)
        assert isinstance(store, LexicalStore)
        hits = store.lexical_search("d2 part", 10)
        assert [h for h, _ in hits[:2]] in (["c-2100", "c-2200"], ["c-2200", "c-2100"])
        assert len(hits) == 6 and all(s > 0 for _, s in hits)  # "part" matches every chunk
        assert hits[0][1] > hits[2][1]
        assert {h for h, _ in store.lexical_search("part", 10, {"dept": "x"})} == {
            "c-1100",
            "c-1200",
            "c-3100",
            "c-3200",
        }
        assert store.lexical_search("the of and", 10) == []  # stop words only
        assert store.lexical_search("zebra", 10) == []
        assert len(store.lexical_search("part", 1)) == 1
        store.delete_documents(["d2"])
        assert store.lexical_search("d2", 10) == []

    def test_whole_graph_and_recent_traces(self, make_store: Callable[..., GraphStore]) -> None:
        store, g = self._tagged(make_store)
        nodes, edges = store.whole_graph()
        assert sorted(n.id for n in nodes) == sorted(n.id for n in g["nodes"])
        assert sorted(e.id for e in edges) == sorted(e.id for e in g["edges"])
        assert {e.id: e for e in edges}["r-1000"] == store.get_edge("r-1000")
        for i in range(3):
            store.save_trace({"trace_id": f"t-{i}", "query": f"q{i}"})
        store.save_trace({"trace_id": "t-0", "query": "q0", "memorized": True})
        assert [t["trace_id"] for t in store.recent_traces(2)] == ["t-2", "t-1"]
        assert len(store.recent_traces(10)) == 3 and store.recent_traces(0) == []
