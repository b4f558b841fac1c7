"""Two inserts' graphs compared whole (tests of paths that must build the same graph: the
extraction workers, embedding ahead), over the HotpotQA sample's passages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from remindrag_integrations import ReMindRAG

DATA = Path(__file__).parent / "data" / "hotpotqa_train100_sample.corpus.jsonl"


def passages() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    return [(r["pid"], r["text"]) for r in rows]


def graph(engine: ReMindRAG) -> dict[str, Any]:
    """Every node and edge with its kind and text, the node vectors and the edge memory."""
    nodes, edges = engine.store.whole_graph()
    nodes, edges = sorted(nodes, key=lambda n: n.id), sorted(edges, key=lambda e: e.id)
    return {
        "nodes": nodes,
        "edges": edges,
        "vectors": engine.store.node_embeddings([n.id for n in nodes]),
        "memory": engine.store.memory([e.id for e in edges]),
        "aliases": {n.id: n.aliases for n in nodes if n.aliases},
    }


def same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["nodes"] == b["nodes"]
    assert a["edges"] == b["edges"]
    assert a["aliases"] == b["aliases"]
    np.testing.assert_array_equal(a["vectors"], b["vectors"])
    np.testing.assert_array_equal(a["memory"], b["memory"])
