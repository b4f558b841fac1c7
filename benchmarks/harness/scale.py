"""Scale test: synthetic graphs from 1 K to 1 M edges in the embedded store, measuring seed
search, memory replay and memorize latency, RAM and the size of a saved store.

The generator keeps the proportions of the real pooled HotpotQA graph (per chunk: one anchor,
~7 entity mentions drawn from a Zipf-like popularity, ~15 relations among the chunk's entities,
one context edge to the next chunk of its document; ≈ 25 edges per chunk) and ~3 KB of text per
chunk. Embeddings are ``random`` (i.i.d. unit vectors: no neighbourhood structure, the worst
case for an ANN index) or ``minilm``: unit vectors drawn from two Gaussians with the mean and
covariance of real all-MiniLM-L6-v2 vectors of a corpus (entity names for entity nodes,
passages for anchors and chunks; :func:`.scale_vectors.minilm_moments`), which keeps the
spectrum of real embeddings without repeating any real vector. Each size runs in a fresh
subprocess so the RSS it reports is its own. Seed recall compares the store's top-2 with the
exact top-2 over the float32 vectors the graph was built from (so it counts both ANN misses and
float16 rounding)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from remindrag_integrations import testing
from remindrag_integrations.core.config import RetrievalConfig
from remindrag_integrations.core.memory.filter import Support
from remindrag_integrations.core.memory.math import unit
from remindrag_integrations.core.memory.replay import replay
from remindrag_integrations.core.memory.write import split_edges, update
from remindrag_integrations.core.pipeline import seed
from remindrag_integrations.core.types import Node
from remindrag_integrations.core.walk import Walk, find_seeds
from remindrag_integrations.stores import InMemoryGraphStore

from .metrics import percentile
from .scale_vectors import synthetic_embeddings

# each size's subprocess runs ``python -m benchmarks.harness.scale`` from the repository root
REPO = Path(__file__).resolve().parents[2]


def synthetic_graph(
    n_edges: int, dim: int = 384, seed: int = 0, moments: str | None = None, **options: Any
) -> InMemoryGraphStore:
    """The library's :func:`~remindrag_integrations.testing.synthetic_graph`, its vectors
    i.i.d. random or, with ``moments``, drawn as :func:`.scale_vectors.synthetic_embeddings`
    says; ``options`` go to :class:`InMemoryGraphStore` (``vectors=``, ``ann=`` ...)."""
    embeddings = None
    if moments is not None:

        def embeddings(n_nodes: int, n_entities: int) -> np.ndarray:
            return synthetic_embeddings(n_nodes, dim, seed, moments, n_entities)

    return testing.synthetic_graph(n_edges, dim, seed, embeddings, **options)


def _random_walk(walk: Walk, rng: np.random.Generator, hops: int) -> None:
    """Grow the subgraph like a traversal would: a few forward moves from the first seed."""
    current = next(iter(walk.parents))
    for _ in range(hops):
        options = walk.frontier(current)
        if not options:
            return
        e = options[int(rng.integers(len(options)))]
        w = e.other(current)
        walk.add(w, current, e, "traversal")
        current = w


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _trimmed_rss_mb() -> float | None:
    """RSS once the C heap has returned its free pages (glibc ``malloc_trim``): what the
    process holds without the allocator's slack from building the graph and the bench's own
    temporaries. None where there is no glibc."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return None
    return _rss_mb()


_SERVE = """
import json, os, sys, numpy as np
from remindrag_integrations import testing
from remindrag_integrations.stores import InMemoryGraphStore
store = InMemoryGraphStore.load(sys.argv[1], **json.loads(sys.argv[2]))
q = np.random.default_rng(0).standard_normal(int(sys.argv[3])).astype(np.float32)
store.search(q / np.linalg.norm(q), 2, ("entity", "anchor"))
with open("/proc/self/statm") as f:
    print(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20)
"""


def _exact_seeds(
    store: InMemoryGraphStore, qs: list[np.ndarray], k: int, dim: int, moments: str | None
) -> list[set[str]]:
    """The exact top-``k`` entity / anchor ids of each query over the float32 vectors the
    graph was built from (regenerated, then freed)."""
    nodes = _node_order(store)
    rows = [i for i, n in enumerate(nodes) if n.kind != "chunk"]
    n_entities = sum(n.kind == "entity" for n in nodes)
    mat = synthetic_embeddings(len(nodes), dim, 0, moments, n_entities)[rows]
    sims = np.asarray(qs) @ mat.T
    del mat
    return [{nodes[rows[i]].id for i in np.argsort(-s)[:k]} for s in sims]


def _node_order(store: InMemoryGraphStore) -> list[Node]:
    """Nodes in the order :func:`synthetic_graph` made them (entities, then anchor and chunk
    per chunk): the store keeps insertion order."""
    return store.whole_graph()[0]


def measure_point(
    n_edges: int,
    queries: int = 50,
    dim: int = 384,
    save: bool = True,
    moments: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Build one graph, then: pass 1 = seeds + random walk + memorize (timed); pass 2 = the
    same queries again, timing seed search and the replay that now fires. ``moments``: see
    :func:`synthetic_embeddings`; ``options`` go to the store (``ann=``, ``vectors=`` ...).
    After RSS is read, the same seed searches run through the exact scan, side by side."""
    t0 = time.perf_counter()
    store = synthetic_graph(n_edges, dim, moments=moments, **options)
    build = time.perf_counter() - t0
    counts = store.counts()
    rng = np.random.default_rng(1)
    cfg = RetrievalConfig()
    ents = [n.id for n in _node_order(store) if n.kind == "entity"]
    qs = []
    for _ in range(queries):  # a query near a random entity
        base = store.node_embeddings([ents[int(rng.integers(len(ents)))]])[0]
        qs.append(unit(base + 0.3 * unit(rng.standard_normal(dim).astype(np.float32))))
    exact = _exact_seeds(store, qs, cfg.seeds, dim, moments)
    t0 = time.perf_counter()
    store.search(qs[0], 2, ("entity", "anchor"))  # build the search index once
    index_s = time.perf_counter() - t0
    memo_ms = [_memorize(store, q, cfg, rng) for q in qs]
    seed_ms, replay_ms, replayed, found = _seed_and_replay(store, qs, cfg, exact)
    out: dict[str, Any] = {
        "edges": counts["edges"],
        "target_edges": n_edges,
        "nodes": counts["chunks"] + counts["anchors"] + counts["entities"],
        "embeddings": "random" if moments is None else "minilm",
        "build_s": build,
        "index_build_s": index_s,
        "ann": any(store._vectors.uses_ann(k) for k in ("entity", "anchor")),
        "vectors": str(store._vectors.table.dtype),
        "seed_recall": found,
        "touched_edges": counts["touched_edges"] or store.touched_edges(),
        "seed_search_ms": _pcts(seed_ms),
        "replay_ms": _pcts(replay_ms),
        "memorize_ms": _pcts(memo_ms),
        "replayed_per_query": float(np.mean(replayed)),
        "rss_mb": _rss_mb(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    out["rss_trimmed_mb"] = _trimmed_rss_mb()
    if out["ann"]:  # the exact scan on the same store and queries, for the ratio
        store._vectors.ann = False
        store.search(qs[0], 2, ("entity", "anchor"))  # its float32 cache (not timed)
        exact_ms, _, _, exact_recall = _seed_and_replay(store, qs, cfg, exact)
        out["exact_seed_search_ms"] = _pcts(exact_ms)
        out["exact_seed_recall"] = exact_recall  # float16 rounding alone
        store._vectors.ann = True
    if save:
        out.update(_saved_size(store, options))
    return out


def _memorize(store: InMemoryGraphStore, q: np.ndarray, cfg: Any, rng: Any) -> float:
    """Seeds, a short random walk, then the timed memory write: ms."""
    walk = Walk(store, q, cfg)
    seed(walk, np.asarray([q]))
    _random_walk(walk, rng, 4)
    t = time.perf_counter()
    eff, ineff = split_edges(walk.parents, Support(walk.chunk_ids or list(walk.parents)[-1:]))
    update(store, eff, ineff, q)
    return (time.perf_counter() - t) * 1e3


def _seed_and_replay(
    store: InMemoryGraphStore, qs: list[np.ndarray], cfg: Any, exact: list[set[str]]
) -> tuple[list[float], list[float], list[int], float]:
    """Seed search ms, replay ms and replayed edges per query; recall of the exact seeds."""
    seed_ms, replay_ms, replayed, found = [], [], [], 0
    for q, want in zip(qs, exact):
        walk = Walk(store, q, cfg)
        t = time.perf_counter()
        seeds = find_seeds(store, [q], cfg.seeds)
        t1 = time.perf_counter()
        for s in seeds:
            walk.add(s, None, None, "seed")
        replay(walk)
        t2 = time.perf_counter()
        found += len(want & set(seeds))
        seed_ms.append((t1 - t) * 1e3)
        replay_ms.append((t2 - t1) * 1e3)
        replayed.append(len(walk.replayed_edges))
    return seed_ms, replay_ms, replayed, found / (cfg.seeds * max(len(qs), 1))


def _saved_size(store: InMemoryGraphStore, options: dict[str, Any]) -> dict[str, float]:
    """Seconds to save the store, its size on disk, and a fresh process that loads it and
    searches once (how a saved graph is served): its load seconds and RSS."""
    tmp = Path(tempfile.mkdtemp(prefix="remindrag-scale-"))
    try:
        t = time.perf_counter()
        store.save(tmp)
        seconds = time.perf_counter() - t
        out = {
            "save_s": seconds,
            "disk_mb": sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) / 2**20,
        }
        t = time.perf_counter()
        cmd = [sys.executable, "-c", _SERVE, str(tmp), json.dumps(options), str(store.dim)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            out["serve_load_s"] = time.perf_counter() - t
            out["serve_rss_mb"] = float(done.stdout.strip().splitlines()[-1])
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _pcts(vals: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(vals, 50), "p95": percentile(vals, 95)}


def run_scale(
    sizes: Sequence[int],
    queries: int = 50,
    dim: int = 384,
    save: bool = True,
    progress: Callable[[str], None] = lambda s: None,
    timeout: float = 3600.0,
    moments: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Every size in its own subprocess; a size that fails or times out is reported as such.
    ``moments``: see :func:`synthetic_embeddings`; ``options`` go to the store (``ann=``,
    ``vectors=`` ...)."""
    points = []
    for n in sizes:
        progress(f"scale point: {n:,} edges")
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.harness.scale",
            str(n),
            str(queries),
            str(dim),
            "1" if save else "0",
            json.dumps(options),
            moments or "",
        ]
        try:
            proc = subprocess.run(
                cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=REPO
            )
            if proc.returncode != 0:
                raise RuntimeError(
                    proc.stderr.strip().splitlines()[-1]
                    if proc.stderr
                    else f"exit {proc.returncode}"
                )
            points.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        except (subprocess.TimeoutExpired, RuntimeError) as exc:
            points.append({"edges": n, "error": f"{type(exc).__name__}: {exc}"[:200]})
    from .resources import machine

    return {
        "kind": "scale",
        "store": "InMemoryGraphStore",
        "queries": queries,
        "dim": dim,
        "embeddings": "random" if moments is None else "minilm",
        "moments": moments,
        "store_options": options,
        "points": points,
        "machine": machine(),
    }


if __name__ == "__main__":  # one point, JSON on stdout (used by run_scale)
    n, q, d, sv = (int(x) for x in sys.argv[1:5])
    opts = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    fitted = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] else None
    print(json.dumps(measure_point(n, q, d, bool(sv), fitted, **opts)))
