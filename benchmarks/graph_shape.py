"""The shape of the graphs the scale benchmarks run on, side by side (issue 49).

    python benchmarks/graph_shape.py --store 3000=/tmp/w49b/store3k --store 30000=/tmp/w49/store30k
        [--synthetic 450000]

Real text has what the synthetic generator (``testing.synthetic_graph``) lacks: many names
per passage, hub entities, long passages. Per graph: passages, entities, edges, edges per
passage, entity mentions per passage (an anchor's edges to entities), an entity's degree
(p50 / p90 / p99 / max, every edge counted), the share of edges at the 1 % busiest entities,
passage length (characters, p50 / p95). ``--store LABEL=FOLDER``: a folder store indexed by
``pg_real_text.py --keep`` (the real text and its recombinations); ``--synthetic N``: the
generator at about ``N`` edges. ``pg_real_text.py --copies K`` repeats a store's graph K
times with fresh ids, so its shape is that store's. Writes
``benchmarks/results/graph_shape.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results"


def shape(store: Any) -> dict[str, Any]:
    """The numbers of one store's graph."""
    from remindrag_integrations.core.ids import is_anchor, is_chunk, is_entity

    nodes, edges = store.whole_graph()
    kinds = Counter(n.kind for n in nodes)
    degree: Counter[str] = Counter()
    mentions: Counter[str] = Counter()
    for e in edges:
        for end in {e.u, e.v}:
            if is_entity(end):
                degree[end] += 1
        if is_anchor(e.u) and is_entity(e.v):
            mentions[e.u] += 1
        elif is_anchor(e.v) and is_entity(e.u):
            mentions[e.v] += 1
    deg = np.array(sorted(degree.values(), reverse=True) or [0])
    top = max(1, len(deg) // 100)
    passages = kinds.get("chunk", 0)
    lengths = [
        len(c.text) for d in store.documents() for c in store.document_chunks(d) if is_chunk(c.id)
    ]
    anchors = [n.id for n in nodes if n.kind == "anchor"]
    per = np.array([mentions.get(a, 0) for a in anchors] or [0])
    return {
        "passages": passages,
        "entities": kinds.get("entity", 0),
        "edges": len(edges),
        "edges_per_passage": round(len(edges) / max(passages, 1), 1),
        "names_per_passage_p50_p95": [float(np.percentile(per, 50)), float(np.percentile(per, 95))],
        "entity_degree_p50_p90_p99_max": [
            float(np.percentile(deg, 50)),
            float(np.percentile(deg, 90)),
            float(np.percentile(deg, 99)),
            int(deg.max()),
        ],
        "edges_at_top_1pct_entities": round(float(deg[:top].sum()) / max(len(edges), 1), 3),
        "passage_chars_p50_p95": [
            float(np.percentile(lengths, 50)) if lengths else 0.0,
            float(np.percentile(lengths, 95)) if lengths else 0.0,
        ],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", action="append", default=[], help="LABEL=FOLDER")
    ap.add_argument("--synthetic", type=int, action="append", default=[])
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from remindrag_integrations.stores.sqlite_store import SQLiteGraphStore
    from remindrag_integrations.testing import synthetic_graph

    rows: dict[str, dict[str, Any]] = {}
    for item in args.store:
        label, _, folder = item.partition("=")
        if not folder:
            ap.error(f"--store takes LABEL=FOLDER, not {item!r}")
        store = SQLiteGraphStore.open(folder)
        rows[f"real text, {label} passages"] = shape(store)
        store.close()
    for n in args.synthetic:
        rows[f"synthetic generator, {n:,} edges"] = shape(synthetic_graph(n, dim=8))
    cols = list(next(iter(rows.values()))) if rows else []
    print("| graph | " + " | ".join(c.replace("_", " ") for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for label, r in rows.items():
        cells = [
            " / ".join(f"{x:g}" for x in v) if isinstance(v, list) else f"{v:,}" for v in r.values()
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "graph_shape.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
