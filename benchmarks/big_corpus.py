"""A big corpus streams in (issue 35): N passages recombined from the dev corpora, indexed from
one JSONL through ``remindrag index``, then queried.

    python benchmarks/big_corpus.py --passages 100000 [--store DIR] [--batch-size 1000]
        [--queries 200] [--pg [DSN]] [--build-only PATH] [--tag T]

The corpus: every passage of the three multi-hop dev corpora (HotpotQA, MuSiQue, 2Wiki;
``../shared/datasets``, 3,441 passages) split into sentences; passage ``i`` keeps a base
passage's title and lead sentence and adds sentences drawn from the base and from other
passages: real sentences, titles and names, each passage about as long as the originals (one
chunk), every text distinct, deterministic (``--seed``). What it cannot give is a growing
vocabulary: the names are the pool's, so the entity count levels off (18.5 K at 5 K passages,
22 K at 30 K) where a real corpus of that size would keep adding names; edges grow with the
passages. Written under a temporary folder (or ``--build-only PATH``), never into the
repository.

Then ``remindrag index CORPUS --store STORE --batch-size B`` runs in a child process under
``/usr/bin/time -v`` (peak RSS of the whole process), its progress lines stamped (kept in
``benchmarks/results/raw/``, which git ignores). ``--pg``: into PostgreSQL, namespace
``big-corpus``, on the tests' embedded server unless a DSN is given. Then a fresh process
loads the store, runs ``--queries`` zero-token retrievals (the dev sets' questions, cycled)
through the whole query (the first, cold, apart; p50 / p95 ms of the others) and times one
more save of the finished folder store. ``uptime`` before and after. Writes
``benchmarks/results/big_corpus_<passages>[_pg]<tag>.json`` (a summary only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
SETS = ("hotpotqa_train100", "musique_train100", "2wiki_dev64")
OUT = ROOT / "benchmarks" / "results"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def _pool(datasets: Path) -> list[tuple[str, str, list[str]]]:
    """``(pid, title, sentences)`` of every passage of :data:`SETS`."""
    pool = []
    for name in SETS:
        with open(datasets / f"{name}.corpus.jsonl", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                sentences = [s.strip() for s in _SENTENCE.split(row["text"]) if s.strip()]
                if sentences:
                    pool.append((row["pid"], row["title"], sentences))
    return pool


def build(path: Path, passages: int, seed: int = 35, datasets: Path = DATASETS) -> dict:
    """Write ``passages`` recombined passages to ``path`` (JSONL: ``id``, ``title``,
    ``text``); returns what it wrote (rows, bytes, the source passages)."""
    pool = _pool(datasets)
    rng = random.Random(seed)
    order: list[int] = []
    seen: set[bytes] = set()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(passages):
            if not order:  # one shuffled round over the pool, then the next
                order = list(range(len(pool)))
                rng.shuffle(order)
            pid, title, sentences = pool[order.pop()]
            while True:
                text = _recombined(rng, pool, sentences)
                digest = hashlib.sha1(text.encode()).digest()
                if digest not in seen:
                    seen.add(digest)
                    break
            row = {"id": f"{pid}~{i}", "title": title, "text": text}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {"passages": passages, "bytes": path.stat().st_size, "pool": len(pool), "seed": seed}


def _recombined(rng: random.Random, pool: list, sentences: list[str]) -> str:
    """The lead sentence, then as many sentences as the base had (at least two more), each
    the base's own next one or, half the time, a sentence of another passage."""
    out = [sentences[0]]
    own = iter(sentences[1:])
    for _ in range(max(2, len(sentences) - 1)):
        mine = next(own, None)
        if mine is None or rng.random() < 0.5:
            other = pool[rng.randrange(len(pool))][2]
            mine = other[rng.randrange(len(other))]
        out.append(mine)
    return " ".join(out)


def questions(datasets: Path = DATASETS) -> list[str]:
    found = []
    for name in SETS:
        with open(datasets / f"{name}.questions.jsonl", encoding="utf-8") as f:
            found += [json.loads(line)["question"] for line in f]
    return found


def load_avg() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _time_v(stderr: str) -> dict[str, Any]:
    """Peak RSS and times from ``/usr/bin/time -v``'s report."""
    found: dict[str, Any] = {}
    for key, label in (
        ("peak_rss_kb", "Maximum resident set size (kbytes)"),
        ("user_s", "User time (seconds)"),
        ("system_s", "System time (seconds)"),
        ("cpu_percent", "Percent of CPU this job got"),
    ):
        m = re.search(re.escape(label) + r":\s*([\d.]+)", stderr)
        if m:
            found[key] = float(m.group(1))
    return found


def index(corpus: Path, store: str, batch: int, log: Path, namespace: str) -> dict[str, Any]:
    """``remindrag index`` in a child process under ``/usr/bin/time -v``, each line of its
    output stamped with the seconds since the start (batch by batch timings)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "remindrag_integrations.app.cli", "index", str(corpus)]
    cmd += ["--store", store, "--batch-size", str(batch), "--namespace", namespace]
    started = time.monotonic()
    stamped: list[tuple[float, str]] = []
    with open(log, "w", encoding="utf-8") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            ["/usr/bin/time", "-v", *cmd], env=env, stdout=subprocess.PIPE, stderr=err, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            at = time.monotonic() - started
            stamped.append((at, line.rstrip("\n")))
            out.write(f"{at:9.1f}  {line}")
            out.flush()
        proc.wait()
        err.seek(0)
        stderr = err.read()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"remindrag index failed ({proc.returncode}):\n{stderr[-3000:]}")
    commits = [at for at, line in stamped if line.startswith("committed ")]
    checked = next(at for at, line in stamped if line.startswith("estimated cost"))
    gaps = [b - a for a, b in zip([checked, *commits], commits, strict=False)]
    done = next(line for _, line in stamped if line.startswith("indexed "))
    chunks = int(re.search(r"indexed \d+ documents, (\d+) chunks", done).group(1))  # type: ignore[union-attr]
    return {
        "wall_s": round(wall, 1),
        "checked_s": round(checked, 1),  # start, model load, every line read and planned
        "indexing_s": round(commits[-1] - checked, 1),
        "chunks": chunks,
        "chunks_per_s": round(chunks / (commits[-1] - checked), 1),
        "chunks_per_s_wall": round(chunks / wall, 1),
        "batches": len(commits),
        "batch_s": {
            "first": round(gaps[0], 1),
            "median": round(sorted(gaps)[len(gaps) // 2], 1),
            "last": round(gaps[-1], 1),
        },
        **_time_v(stderr),
        "log_tail": [line for _, line in stamped[-6:]],
    }


_QUERY = """
import json, resource, shutil, sys, tempfile, time
from remindrag_integrations import ReMindRAG
store, n, namespace = sys.argv[1], int(sys.argv[2]), sys.argv[3]
qs = json.loads(sys.stdin.read())
t0 = time.perf_counter()
if store.startswith("postgresql://"):
    eng = ReMindRAG(store=store, namespace=namespace)
else:
    eng = ReMindRAG.load(store)
load_s = time.perf_counter() - t0
times = []
for i in range(n):
    t = time.perf_counter()
    r = eng.retrieve(qs[i % len(qs)])
    times.append((time.perf_counter() - t) * 1000)
    assert r.chunks, qs[i % len(qs)]
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
save_s = None
if not store.startswith("postgresql://"):  # what one more commit costs at this size
    where = tempfile.mkdtemp(prefix="big-corpus-save-")
    t0 = time.perf_counter()
    eng.store.save(where + "/kb")
    save_s = time.perf_counter() - t0
    shutil.rmtree(where)
print(json.dumps({"load_s": load_s, "save_s": save_s, "ms": times,
  "counts": eng.store.counts(), "rss_kb": rss}))
"""


def query(store: str, n: int, namespace: str) -> dict[str, Any]:
    """``n`` zero-token retrievals in a fresh process that loads ``store``; the first one
    (cold: the BM25 and graph indexes are built on first use) reported apart."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _QUERY, store, str(n + 1), namespace],
        input=json.dumps(questions()),
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the queries failed:\n{proc.stderr[-3000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    ms = sorted(got["ms"][1:])
    return {
        "load_s": round(got["load_s"], 1),
        "save_s": got["save_s"] and round(got["save_s"], 1),
        "first_ms": round(got["ms"][0], 1),
        "queries": n,
        "p50_ms": round(ms[len(ms) // 2], 1),
        "p95_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 1),
        "counts": got["counts"],
        "query_process_peak_rss_kb": got["rss_kb"],
    }


def _pg(dsn: str) -> str:
    """The DSN (the tests' embedded server when empty), namespace ``big-corpus`` emptied."""
    if not dsn:
        sys.path.insert(0, str(ROOT / "tests"))
        from pg_fixture import pg_server_dsn  # started here, stopped at exit

        dsn = pg_server_dsn()
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    pg = PostgresGraphStore(dsn, namespace="big-corpus")
    pg.drop_namespace()
    pg.close()
    return dsn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--store", help="the store folder (default: a temporary one)")
    ap.add_argument("--pg", nargs="?", const="", help="into PostgreSQL (DSN; none: embedded)")
    ap.add_argument("--build-only", type=Path, help="write the corpus here and stop")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    if args.build_only:
        print(json.dumps(build(args.build_only, args.passages, args.seed)))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="big-corpus-"))
    try:
        corpus = tmp / "corpus.jsonl"
        made = build(corpus, args.passages, args.seed)
        store, namespace = args.store or str(tmp / "store"), "default"
        if args.pg is not None:
            store, namespace = _pg(args.pg), "big-corpus"
        before = load_avg()
        indexed = index(corpus, store, args.batch_size, tmp / "index.log", namespace)
        middle = load_avg()
        queried = query(store, args.queries, namespace)
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "remindrag_integrations"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        summary = {
            "code": head.stdout.strip() + (" + uncommitted changes" if dirty else ""),
            "corpus": made,
            "command": f"remindrag index CORPUS --store {'DSN' if args.pg is not None else 'DIR'} "
            f"--batch-size {args.batch_size} --namespace {namespace}",
            "index": indexed,
            "query": queried,
            "uptime": {"before": before, "after_index": middle, "after_queries": load_avg()},
        }
        OUT.mkdir(parents=True, exist_ok=True)
        pg = "_pg" if args.pg is not None else ""
        out = OUT / f"big_corpus_{args.passages}{pg}{args.tag}.json"
        out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        raw = OUT / "raw"  # the stamped progress lines (git ignores raw/)
        raw.mkdir(exist_ok=True)
        shutil.copy(tmp / "index.log", raw / f"{out.stem}.index.log")
        print(json.dumps(summary, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
