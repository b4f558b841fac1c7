"""The embedded store and PostgreSQL side by side on the same real passages (issue 49).

    python benchmarks/pg_real_text.py --passages 3000 [--queries 60] [--rounds 3] [--dsn DSN]

The corpus: the first ``--passages`` passages of the pooled multi-hop dev corpora (HotpotQA,
MuSiQue, 2Wiki; ``../shared/datasets``, 3,441 passages); past that, ``big_corpus.py``'s
recombined passages (real sentences, titles and names, every text distinct). Indexed once,
zero-token, with the packaged MiniLM into the embedded store (in memory), then the same graph
(nodes, embeddings, edges, chunks, documents) copied into PostgreSQL namespace
``real-<passages>`` (kept between runs), so both stores hold the same corpus. PostgreSQL is
the tests' embedded server (``REMINDRAG_PG_SERVER_OPTIONS``, default ``-c
shared_buffers=1GB``: room for the HNSW index, as docs/postgres.md says) unless ``--dsn``.

Three engines ask the same ``--queries`` questions (MuSiQue's and HotpotQA's, interleaved),
taking turns question by question so they share the machine's load: ``embedded``, ``postgres``
(the library's defaults: the graph a query reads kept in process memory, caught up by the
change sequence) and ``postgres-sql`` (``graph_cache=False``: every read a statement, as
before issue 49). Round 0 is each question's first sight (cold caches), rounds 1.. are
asked again. Then each engine memorizes the first ``--memorize`` questions' gold passages
(named support: the write and the zero-token check that may add learned links; timed) and
asks every question once more (``after memory``). Per engine: p50 / p95 ms of the whole
``retrieve``, statements and rows per query (PostgreSQL, counted on the cursor), memory-write
p50 / p95, and whether its chunks match the embedded store's. Load average before and after.
Writes ``benchmarks/results/pg_real_text_<passages><tag>.json`` (a summary).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
DATASETS = ROOT.parent / "shared" / "datasets"
OUT = ROOT / "benchmarks" / "results"
SETS = ("hotpotqa_train100", "musique_train100", "2wiki_dev64")


def _rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def corpus(n: int) -> list[tuple[str, str]]:
    """``n`` passages as (id, text): the dev corpora's own, then recombined ones."""
    pool = [
        (r["pid"], f"{r['title']}. {r['text']}")
        for name in SETS
        for r in _rows(DATASETS / f"{name}.corpus.jsonl")
    ]
    if n <= len(pool):
        return pool[:n]
    from big_corpus import build

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.jsonl"
        build(path, n - len(pool))
        more = [(r["id"], f"{r['title']}. {r['text']}") for r in _rows(path)]
    return pool + more


def questions(n: int, docs: set[str]) -> list[tuple[str, list[str]]]:
    """MuSiQue's and HotpotQA's questions interleaved (those with every gold passage in the
    corpus): (question, gold passage ids)."""
    by_set = [
        [(q["question"], q["gold_pids"]) for q in _rows(DATASETS / f"{name}.questions.jsonl")]
        for name in ("musique_train100", "hotpotqa_train100")
    ]
    mixed = [q for pair in zip(*by_set) for q in pair]
    return [q for q in mixed if set(q[1]) <= docs][:n]


_VECTOR = re.compile(r"'\[[-0-9.e,]+\]'")  # a query vector in a plan, shortened
BY_CALLER: dict[str, list[float]] = {}  # caller -> [statements, ms] (--per-statement)
FIRST_SQL: dict[str, tuple] = {}  # caller -> its first statement's (sql, params)


def _caller() -> str:
    """Where in the method a statement comes from: the last two frames in ``core/``."""
    frames = [f for f in traceback.extract_stack() if "/core/" in f.filename]
    return " < ".join(f"{Path(f.filename).stem}.{f.name}" for f in reversed(frames[-2:]))


class _Cursor:
    watch = False

    def __init__(self, cur: Any, tally: list[int]) -> None:
        self._cur, self._tally = cur, tally

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._tally[0] += 1
        t = time.perf_counter()
        self._cur.execute(*args, **kwargs)
        if _Cursor.watch:
            caller = _caller()
            FIRST_SQL.setdefault(caller, args)
            mine = BY_CALLER.setdefault(caller, [0, 0.0])
            mine[0] += 1
            mine[1] += (time.perf_counter() - t) * 1e3
        return self

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        self._tally[0] += 1
        return self._cur.executemany(*args, **kwargs)

    def fetchall(self) -> list:
        rows = self._cur.fetchall()
        self._tally[1] += len(rows)
        return rows  # type: ignore[no-any-return]

    def fetchone(self) -> Any:
        row = self._cur.fetchone()
        self._tally[1] += row is not None
        return row

    def __iter__(self) -> Iterator[Any]:
        for row in self._cur:
            self._tally[1] += 1
            yield row

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


def counting_pg(dsn: str, ns: str, **kwargs: Any) -> Any:
    """A PostgreSQL store counting statements and rows (the snapshot's opening statement,
    run on the connection, is not counted: one per query on both PostgreSQL engines)."""
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    class Counting(PostgresGraphStore):  # type: ignore[misc]
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.tally = [0, 0]

        @contextlib.contextmanager
        def _cursor(self) -> Iterator[Any]:
            with super()._cursor() as cur:
                yield _Cursor(cur, self.tally)

        def _tx(self, fn: Callable[[Any], Any], retries: int = 8) -> Any:
            return super()._tx(lambda cur: fn(_Cursor(cur, self.tally)), retries)

    return Counting(dsn, namespace=ns, **kwargs)


def copy_graph(src: Any, dst: Any) -> None:
    """The whole graph of ``src`` (an embedded store) into ``dst`` in one ``add_graph``."""
    nodes, edges = src.whole_graph()
    emb = src.node_embeddings([n.id for n in nodes])
    docs = src.documents()
    chunks = [c for d in sorted(docs) for c in src.document_chunks(d)]
    dst.add_graph(
        documents=[(d, h, m) for d, (h, m) in sorted(docs.items())],
        chunks=chunks,
        nodes=nodes,
        embeddings=emb,
        edges=edges,
        entity_aliases={},
    )


def repeated(src: Any, copies: int, seed: int = 49) -> Any:
    """An embedded store holding ``src``'s graph ``copies`` times (the scale benchmark on
    real-text shape: the corpus's own degrees, hubs, names per passage and passage lengths,
    repeated and varied): copy 0 as it is, copy ``k`` with every id and document id suffixed
    ``x<k>``, every entity name and alias ``<name> <k>`` (names stay unique) and every
    embedding moved by Gaussian noise (sigma 0.05 a coordinate before renormalising: near
    the original, never equal). Questions find their passages in copy 0."""
    from remindrag_integrations.core.types import Chunk, Edge, Node
    from remindrag_integrations.stores import InMemoryGraphStore

    rng = np.random.default_rng(seed)
    nodes, edges = src.whole_graph()
    emb = src.node_embeddings([n.id for n in nodes])
    docs = src.documents()
    chunks = [c for d in sorted(docs) for c in src.document_chunks(d)]
    out = InMemoryGraphStore()
    for k in range(copies):
        sx = "" if k == 0 else f"x{k}"

        def name(x: str, kind: str, k: int = k) -> str:
            return x if k == 0 or kind != "entity" else f"{x} {k}"

        vecs = emb
        if k:
            vecs = emb + rng.normal(0.0, 0.05, emb.shape).astype(np.float32)
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        out.add_graph(
            documents=[(d + sx, h, m) for d, (h, m) in sorted(docs.items())],
            chunks=[
                Chunk(c.id + sx, c.doc_id + sx, c.index, c.text, c.start, c.end, c.metadata)
                for c in chunks
            ],
            nodes=[
                Node(
                    n.id + sx,
                    n.kind,
                    n.id + sx if n.kind == "chunk" else name(n.name, n.kind),
                    None if n.doc_id is None else n.doc_id + sx,
                    None if n.chunk_id is None else n.chunk_id + sx,
                    tuple(name(a, n.kind) for a in n.aliases),
                )
                for n in nodes
            ],
            embeddings=vecs,
            edges=[Edge(e.id + sx, e.u + sx, e.v + sx, e.kind, e.text) for e in edges],
            entity_aliases={},
        )
    return out


def pcts(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"p50": float("nan"), "p95": float("nan")}
    return {
        "p50": round(float(np.percentile(xs, 50)), 1),
        "p95": round(float(np.percentile(xs, 95)), 1),
    }


def rss_mb() -> float:
    """This process's resident memory, MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=3000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3, help="round 0: first sight; then again")
    ap.add_argument("--memorize", type=int, default=30)
    ap.add_argument("--dsn", default="")
    ap.add_argument("--tag", default="")
    ap.add_argument("--keep", help="the embedded store kept in this folder between runs")
    ap.add_argument("--per-statement", action="store_true", help="statements timed by caller")
    ap.add_argument("--ef-search", type=int, default=0, help="one more engine: this ef_search")
    ap.add_argument(
        "--copies",
        type=int,
        default=1,
        help="the indexed graph repeated this many times, varied (a real-text-shaped 1 M edges)",
    )
    ap.add_argument(
        "--preload-edges",
        type=int,
        default=0,
        help="the graph cache's PRELOAD_EDGES for this run (0: the library's default)",
    )
    ap.add_argument(
        "--engines",
        default="embedded,postgres,postgres-sql",
        help="which of embedded, postgres, postgres-sql (the last slow on a big corpus)",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("REMINDRAG_PG_SERVER_OPTIONS", "-c shared_buffers=1GB")
    from benchmarks.harness.resources import make_embedder
    from remindrag_integrations import Document, ReMindRAG
    from remindrag_integrations.stores import InMemoryGraphStore

    out: dict[str, Any] = {"load_avg_start": load_avg(), "args": vars(args)}
    docs = corpus(args.passages)
    qs = questions(args.queries, {d for d, _ in docs})
    emb = make_embedder("minilm", cache_dir=Path(tempfile.gettempdir()) / "rr-bench-embed")
    t = time.perf_counter()
    if args.keep and Path(args.keep).exists():  # indexed by an earlier run: an in-memory copy
        embedded = ReMindRAG.load(args.keep, embeddings=emb).copy()
        mem_store = embedded.store
    else:
        mem_store = InMemoryGraphStore()
        embedded = ReMindRAG(embeddings=emb, store=mem_store)
        embedded.insert([Document(d, text) for d, text in docs])
        if args.keep:
            embedded.save(args.keep)
    if args.copies > 1:
        mem_store = repeated(mem_store, args.copies)
        embedded = ReMindRAG(embeddings=emb, store=mem_store)
    copies_tag = f"x{args.copies}" if args.copies > 1 else ""
    out["index_s"] = round(time.perf_counter() - t, 1)
    out["counts"] = mem_store.counts()
    print("indexed", out["counts"], f"in {out['index_s']} s", flush=True)

    if args.dsn:
        dsn = args.dsn
    else:
        sys.path.insert(0, str(ROOT / "tests"))
        from pg_fixture import pg_server_dsn  # started here, stopped at exit

        dsn = pg_server_dsn()

    def pg_engine(suffix: str, **kwargs: Any) -> Any:
        """A PostgreSQL engine over its own copy of the graph (memory written once each)."""
        copies = f"x{args.copies}" if args.copies > 1 else ""
        store = counting_pg(dsn, f"real-{args.passages}{copies}{suffix}", **kwargs)
        store.drop_namespace()  # no memory of an earlier run
        t = time.perf_counter()
        copy_graph(mem_store, store)
        out.setdefault("pg_copy_s", []).append(round(time.perf_counter() - t, 1))
        assert store.counts() == mem_store.counts()
        return ReMindRAG(embeddings=emb, store=store)

    if args.preload_edges:  # not the default: a side-by-side of the cache's sizes
        from remindrag_integrations.stores.postgres import graph_cache

        graph_cache.PRELOAD_EDGES = args.preload_edges
    wanted = args.engines.split(",")
    unknown = set(wanted) - {"embedded", "postgres", "postgres-sql"}
    if unknown or not {"embedded", "postgres"} <= set(wanted):
        ap.error(f"--engines: embedded and postgres, and maybe postgres-sql (not {unknown})")
    engines = {"embedded": embedded, "postgres": pg_engine("")}
    if "postgres-sql" in wanted:
        engines["postgres-sql"] = pg_engine("-sql", graph_cache=False)
    if args.ef_search:  # what seed search's HNSW candidate list costs (not the default)
        engines[f"postgres-ef{args.ef_search}"] = pg_engine("-ef", ef_search=args.ef_search)
    pg = engines["postgres"].store
    for label, eng in engines.items():  # lexical index, graph matrix, graph cache: built once
        rss, t = rss_mb(), time.perf_counter()
        eng.retrieve("warm up")
        out.setdefault("warm_up", {})[label] = {
            "s": round(time.perf_counter() - t, 2),
            "rss_added_mb": round(rss_mb() - rss),
        }
    print("warm up (first query: caches built):", out["warm_up"], flush=True)
    emb.embed([q for q, _ in qs])  # the questions' vectors cached: no engine pays them first

    def ask(label: str, q: str) -> dict:
        eng = engines[label]
        store = eng.store
        s0, r0 = (store.tally if hasattr(store, "tally") else (0, 0))[:2]
        t = time.perf_counter()
        r = eng.retrieve(q)
        ms = (time.perf_counter() - t) * 1e3
        s1, r1 = (store.tally if hasattr(store, "tally") else (0, 0))[:2]
        return {
            "ms": ms,
            "st": s1 - s0,
            "rows": r1 - r0,
            "chunks": [c.chunk.id for c in r.chunks],
            "stages": dict(r.trace.timings_ms),
        }

    def block(labels: list[str]) -> dict[str, list[dict]]:
        """Every question asked of every engine in turn (the order rotating question by
        question), so a busy machine's load falls on all engines alike."""
        got: dict[str, list[dict]] = {k: [] for k in labels}
        for i, (q, _) in enumerate(qs):
            turn = labels[i % len(labels) :] + labels[: i % len(labels)]
            for label in turn:  # --per-statement: the postgres engine's questions asked again
                _Cursor.watch = watch and label == "postgres"
                got[label].append(ask(label, q))
                _Cursor.watch = False
        return got

    labels = list(engines)
    runs: dict[str, dict[int, list[dict]]] = {k: {} for k in labels}
    out["load_avg_before_queries"] = load_avg()
    for rnd in range(args.rounds):
        watch = args.per_statement and rnd > 0
        for label, got in block(labels).items():
            runs[label][rnd] = got
        print("round", rnd, "done", load_avg(), flush=True)
    # memory: the first questions' gold passages named as support, on each engine
    writes: dict[str, list[float]] = {k: [] for k in labels}
    for q, gold in qs[: args.memorize]:
        for label in labels:
            eng = engines[label]
            r = eng.retrieve(q)
            support = [c.id for g in gold for c in eng.store.document_chunks(g)]
            t = time.perf_counter()
            eng.memorize(r.trace_id, supporting=support)
            writes[label].append((time.perf_counter() - t) * 1e3)
    watch = False
    after = block(labels)
    out["load_avg_after"] = load_avg()

    ref = {rnd: [r["chunks"] for r in rs] for rnd, rs in runs["embedded"].items()}
    rows: dict[str, Any] = {}
    for label in labels:
        first = runs[label][0]
        again = [r for rnd in range(1, args.rounds) for r in runs[label][rnd]]
        rows[label] = {
            "first_ms": pcts([r["ms"] for r in first]),
            "again_ms": pcts([r["ms"] for r in again]),
            "after_memory_ms": pcts([r["ms"] for r in after[label]]),
            "statements_first": round(float(np.mean([r["st"] for r in first])), 1),
            "statements_again": round(float(np.mean([r["st"] for r in again])), 1)
            if again
            else None,
            "statements_after_memory": round(float(np.mean([r["st"] for r in after[label]])), 1),
            "rows_first": round(float(np.mean([r["rows"] for r in first])), 1),
            "stage_p50_ms_again": {
                k: round(float(np.median([r["stages"].get(k, 0.0) for r in again])), 1)
                for k in sorted({k for r in again for k in r["stages"]})
            },
            "memory_write_ms": pcts(writes[label]),
            "same_chunks_as_embedded": round(
                float(
                    np.mean(
                        [
                            r["chunks"] == ref[rnd][i]
                            for rnd in runs[label]
                            for i, r in enumerate(runs[label][rnd])
                        ]
                    )
                ),
                3,
            ),
        }
    if "postgres-sql" in runs:
        sql_ref = [
            r["chunks"] for rnd in sorted(runs["postgres-sql"]) for r in runs["postgres-sql"][rnd]
        ]
        pg_got = [r["chunks"] for rnd in sorted(runs["postgres"]) for r in runs["postgres"][rnd]]
        rows["postgres"]["same_chunks_as_postgres_sql"] = round(
            float(np.mean([a == b for a, b in zip(pg_got, sql_ref)])), 3
        )
    for label in labels:  # the measure: p95 against the embedded store's
        rows[label]["p95_vs_embedded"] = {
            phase: round(rows[label][phase]["p95"] / rows["embedded"][phase]["p95"], 2)
            for phase in ("first_ms", "again_ms", "after_memory_ms")
        }
    out["engines"] = rows
    n_pg = max(1, (args.rounds - 1) * len(qs))
    out["per_statement_ms"] = {
        k: {"per_query": round(c / n_pg, 2), "ms": round(ms / n_pg, 2)}
        for k, (c, ms) in sorted(BY_CALLER.items(), key=lambda kv: -kv[1][1])
    }
    c = pg._graph_cache
    out["cache"] = {
        "reloads": c.reloads,
        "catch_ups": c.catch_ups,
        "link_nodes": len(c.links),
        "link_entries": sum(map(len, c.links.values())),
        "edge_nodes": len(c.edges),
        "embeddings": len(c.embeddings),
        "nodes": len(c.nodes),
        "whole": c.whole,
        "memory_rows": None if c.memory is None else len(c.memory),
        "names": len(c.names),
    }
    out["questions"] = len(qs)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"pg_real_text_{args.passages}{copies_tag}{args.tag}.json").write_text(
        json.dumps(out, indent=2)
    )
    n = args.passages
    print(
        f"\n| {n} passages | first sight p50 / p95 ms | asked again p50 / p95 | after memory "
        "p50 / p95 | statements (first / again / after) | memory write p50 / p95 | same chunks |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, r in rows.items():
        f, a, m, w = r["first_ms"], r["again_ms"], r["after_memory_ms"], r["memory_write_ms"]
        print(
            f"| {label} | {f['p50']} / {f['p95']} | {a['p50']} / {a['p95']} | "
            f"{m['p50']} / {m['p95']} | {r['statements_first']} / {r['statements_again']} / "
            f"{r['statements_after_memory']} | {w['p50']} / {w['p95']} | "
            f"{r['same_chunks_as_embedded']} |"
        )
    for label, r in rows.items():
        print(f"{label} p95 / embedded p95:", r["p95_vs_embedded"])
    print("counts", out["counts"], "cache", out["cache"])
    print(
        "postgres same chunks as postgres-sql:", rows["postgres"].get("same_chunks_as_postgres_sql")
    )
    for label, r in rows.items():
        print(label, "stage p50 ms (asked again):", r["stage_p50_ms_again"])
    print("load average:", out["load_avg_start"], "->", out["load_avg_after"])
    for k, x in out["per_statement_ms"].items():  # postgres, asked again
        print(f"  {k:60s} {x['per_query']:6.2f} {x['ms']:8.2f}")
    out["explain"] = {}
    for k in list(out["per_statement_ms"])[:4]:  # the heaviest callers' first statements
        query, *params = FIRST_SQL[k]
        if not isinstance(query, str):
            continue
        with pg._pool.connection() as conn, conn.transaction(), conn.cursor(binary=True) as cur:
            if query.startswith("SET LOCAL"):  # lexical: SET LOCAL; the SELECT; SET LOCAL
                first, *select, _ = query.split("; ")
                cur.execute(first)
                query, params = "; ".join(select), []
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + query, *params)
            plan = [_VECTOR.sub("'[...]'", r[0]) for r in cur.fetchall()]
        out["explain"][k] = plan
        print(f"\nEXPLAIN (ANALYZE, BUFFERS), {k}:")
        print("\n".join(plan))
    (OUT / f"pg_real_text_{args.passages}{copies_tag}{args.tag}.json").write_text(
        json.dumps(out, indent=2)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
