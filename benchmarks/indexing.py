"""Indexing throughput, embedder backends and cold start (issue #16, #15 item 6).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/indexing.py \\
        --data ../shared/datasets/hotpotqa_train100.corpus.jsonl --sections embedders,hotpotqa,cold \\
        --out benchmarks/results/indexing.json

Sections: ``embedders`` (sentence-transformers vs onnxruntime on the same passages and entity
names: texts/s and cosine agreement), ``hotpotqa`` (zero-token ``insert`` of the pooled corpus:
chunks/s), ``scaling`` (zero-token ``insert`` of N distinct chunks made from the corpus, one
fresh engine per size: chunks/s and peak RSS), ``cold`` (fresh ``python -c`` processes: the
frameworks' own import, ours, first ``from_texts`` + query, ``load`` + query of a saved
retriever and engine; median wall and CPU time of ``--runs``; ``benchmarks/cold_start.py``),
``floor`` (issue 35: the zero-token ``insert`` of ``--passages`` passages against its floor,
embedding each chunk and each distinct entity name once with the same embedder in the same
process; one insert per ``--workers`` count per round, rounds alternating; ``--embedder``
``default`` / ``onnx-fp32`` / ``st`` on ``--device`` (``cuda`` where there is one) /
``cached`` / ``paced`` (an emulated GPU: :class:`Paced`); ``--ahead`` the
``IndexConfig.embed_ahead`` settings to run; ``--baseline DIR``: another code tree's insert in turn, and whether every run
built the same graph)::

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/indexing.py \\
        --data ../shared/datasets/hotpotqa_train100.corpus.jsonl --sections floor \\
        --passages 400 --rounds 3 --workers 1,2 --out benchmarks/results/indexing_floor35.json

Prints a table per section and writes everything to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cold_start import bench_cold  # benchmarks/cold_start.py, next to this script


def load_passages(path: Path) -> list[str]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [r["text"] for r in rows]


def table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    print(f"\n{title}")
    cells = [header] + [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for i, r in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def bench_embedders(passages: list[str], n_passages: int, n_names: int) -> dict[str, Any]:
    """sentence-transformers, onnxruntime float32 and onnxruntime's default (int8 graph for
    texts of >= 16 tokens) on the same texts, side by side: texts/s and cosine to ST."""
    import numpy as np

    from remindrag_integrations.adapters.embeddings import (
        SentenceTransformerEmbedder,
        packaged_model_path,
    )
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    texts = passages[:n_passages]
    names = list(dict.fromkeys(re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)*", " ".join(passages))))
    names = names[:n_names]
    backends = {
        "st": SentenceTransformerEmbedder(),
        "onnx-fp32": OnnxEmbedder(packaged_model_path(), quantized=False),
        "onnx": OnnxEmbedder(packaged_model_path()),
    }
    out: dict[str, Any] = {}
    for b in backends.values():
        b.embed(["warm up", texts[0]])
    for label, items in (("passages", texts), ("entity names", names)):
        vecs = {}
        for name, b in backends.items():  # side by side, one after another
            t = time.perf_counter()
            vecs[name] = b.embed(items)
            out[f"{label}/{name}"] = len(items) / (time.perf_counter() - t)
        for name in ("onnx-fp32", "onnx"):
            cos = np.sum(vecs["st"] * vecs[name], axis=1)
            out[f"{label}/{name}/cos_min"] = float(cos.min())
            out[f"{label}/{name}/cos_mean"] = float(cos.mean())
        out[f"{label}/n"] = len(items)
    rows = [
        [
            label,
            out[f"{label}/n"],
            out[f"{label}/st"],
            out[f"{label}/onnx-fp32"],
            out[f"{label}/onnx"],
            out[f"{label}/onnx"] / out[f"{label}/st"],
            out[f"{label}/onnx-fp32/cos_min"],
            out[f"{label}/onnx/cos_min"],
            out[f"{label}/onnx/cos_mean"],
        ]
        for label in ("passages", "entity names")
    ]
    head = [
        "texts",
        "n",
        "st texts/s",
        "onnx fp32 texts/s",
        "onnx (int8 >= 16 tokens) texts/s",
        "onnx / st",
        "fp32 cos min",
        "onnx cos min",
        "onnx cos mean",
    ]
    table("Embedders (packaged all-MiniLM-L6-v2; cosine to sentence-transformers)", head, rows)
    return out


def index_once(
    docs: list[tuple[str, str]], backend: str | None = None, hash_embedder: bool = False
) -> dict[str, Any]:
    """One zero-token ``insert``; ``hash_embedder``: ``testing.HashEmbedder`` (384 dims)
    instead of MiniLM, which leaves only what grows with the store (merge, writes)."""
    from remindrag_integrations import ReMindRAG
    from remindrag_integrations.testing import HashEmbedder

    if backend:
        os.environ["REMINDRAG_EMBEDDER_BACKEND"] = backend
    engine = ReMindRAG(embeddings=HashEmbedder(384) if hash_embedder else None)
    engine.embedder.embed(["warm up"])  # model load is cold start, not throughput
    t = time.perf_counter()
    report = engine.insert(docs)
    secs = time.perf_counter() - t
    os.environ.pop("REMINDRAG_EMBEDDER_BACKEND", None)
    return {
        "embedder": type(engine.embedder).__name__,
        "backend": backend or "default",
        "documents": report.documents,
        "chunks": report.chunks,
        "entities": report.entities_added,
        "merged": report.entities_merged,
        "seconds": secs,
        "chunks_per_s": report.chunks / secs,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def bench_hotpotqa(passages: list[str], backends: list[str]) -> list[dict[str, Any]]:
    docs = [(f"p{i}", t) for i, t in enumerate(passages)]
    runs = [index_once(docs, b) for b in backends]
    head = ["embedder", "backend", "docs", "chunks", "entities", "merged", "seconds", "chunks/s"]
    rows = [
        [
            r["embedder"],
            r["backend"],
            r["documents"],
            r["chunks"],
            r["entities"],
            r["merged"],
            r["seconds"],
            r["chunks_per_s"],
        ]
        for r in runs
    ]
    table(f"Zero-token indexing, pooled HotpotQA ({len(passages)} passages)", head, rows)
    return runs


def renamed_copy(tree: Path, into: Path) -> str:
    """``tree``'s ``remindrag_integrations`` copied into ``into`` as ``remindrag_baseline``
    (its absolute imports renamed), so that another code's ``insert`` runs in this process."""
    import shutil

    name = "remindrag_baseline"
    target = into / name
    shutil.copytree(tree / "remindrag_integrations", target, ignore=shutil.ignore_patterns("*.pyc"))
    for f in target.rglob("*.py"):
        f.write_text(f.read_text(encoding="utf-8").replace("remindrag_integrations", name))
    sys.path.insert(0, str(into))
    return name


def graph_signature(engine: Any) -> dict[str, Any]:
    """What an insert indexed: node and edge counts, a hash of their ids (entity aliases
    included) and the stored vectors, to compare two codes' graphs."""
    import hashlib

    import numpy as np

    nodes, edges = engine.store.whole_graph()
    ids = sorted(f"{n.id}|{'|'.join(sorted(n.aliases))}" for n in nodes)
    vecs = engine.store.node_embeddings(sorted(n.id for n in nodes))
    return {
        "nodes": len(nodes),
        "edges": len(edges),
        "ids_sha": hashlib.sha256(
            "\n".join(ids + sorted(e.id for e in edges)).encode()
        ).hexdigest(),
        "vectors": np.asarray(vecs, dtype=np.float32),
    }


class Cached:
    """The default embedder's vectors of every text a floor run embeds, computed before the
    clock starts and then read from memory: an insert with the embedding almost free (what a
    fast GPU leaves of it), so what remains is the rest of the insert."""

    identity = "all-MiniLM-L6-v2"

    def __init__(self, inner: Any) -> None:
        self.inner, self.vectors = inner, {}

    def fill(self, texts: list[str]) -> None:
        todo = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        self.vectors.update(zip(todo, self.inner.embed(todo)))

    def embed(self, texts: Any) -> Any:
        import numpy as np

        return np.stack([self.vectors[t] for t in texts])


class Paced(Cached):
    """:class:`Cached`, each call sleeping as long as the issue's H100 took to embed (issue
    35: 5,872 passages, 2.98 M characters in 4.1 s, float32, batch 128): 1.38 µs a
    character, plus 1.5 ms per 128 texts. An emulation of a GPU embedder on a machine
    without one: like a CUDA call, the sleep leaves the cores and the GIL to the rest of the
    insert. Not a measurement of a GPU."""

    SECONDS_PER_CHAR = 4.1 / 2.98e6
    SECONDS_PER_BATCH = 0.0015

    def embed(self, texts: Any) -> Any:
        texts = list(texts)
        batches = -(-len(texts) // 128)
        time.sleep(batches * self.SECONDS_PER_BATCH + self.SECONDS_PER_CHAR * sum(map(len, texts)))
        return super().embed(texts)


def make_embedder(mod: Any, kind: str, device: str) -> Any:
    """The embedder a floor run uses, from the code under test (``mod``): ``default`` (what
    ``ReMindRAG()`` picks), ``onnx-fp32``, ``st`` (sentence-transformers on ``device``),
    ``cached`` (:class:`Cached`) or ``paced`` (:class:`Paced`)."""
    import importlib

    emb = importlib.import_module(f"{mod.__name__}.adapters.embeddings")
    if kind == "st":
        return emb.SentenceTransformerEmbedder(device=device)
    if kind in ("cached", "paced"):
        return (Paced if kind == "paced" else Cached)(emb.default_embedder())
    if kind == "onnx-fp32":
        os.environ["REMINDRAG_EMBEDDER_BACKEND"] = "onnx-fp32"
        try:
            return emb.default_embedder()
        finally:
            os.environ.pop("REMINDRAG_EMBEDDER_BACKEND", None)
    return emb.default_embedder()


def distinct_names(mod: Any, chunks: list[str], cfg: Any) -> list[str]:
    """The entity names an insert of ``chunks`` into an empty store embeds: each distinct
    normalised name once, in its first spelling (the code's own extractor, not timed)."""
    import importlib

    rules = importlib.import_module(f"{mod.__name__}.core.extract_rules")
    ids = importlib.import_module(f"{mod.__name__}.core.ids")
    names: dict[str, str] = {}
    for text in chunks:
        x = rules.rule_based_extraction(text, cfg.max_entities_per_chunk)
        for n in [*x.entities, *(t[0] for t in x.triples), *(t[2] for t in x.triples)]:
            names.setdefault(ids.norm_name(n), n)
    return list(names.values())


def cpu_time() -> float:
    """CPU seconds of this process and of its children that ended (the extraction workers
    of an insert are joined when it returns)."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system


def bench_floor(
    passages: list[str],
    n: int,
    rounds: int,
    baseline: Path | None,
    workers: list[int],
    embedder: str = "default",
    device: str = "cpu",
    aheads: tuple[bool | None, ...] = (None,),
) -> dict[str, Any]:
    """Zero-token ``insert`` of ``n`` passages against the floor: embedding each chunk and
    each distinct entity name once, with the same embedder, in this process (two calls:
    the chunks, then the names). Each worker count in ``workers`` is one insert per round
    (``IndexConfig(workers=...)``; a code without the knob runs once, as ``-``), and each
    ``aheads`` setting of ``IndexConfig.embed_ahead`` (None: the default) likewise; with
    ``baseline`` (another code tree) its ``insert`` runs in turn in the same process. Rounds
    alternate the codes and worker counts; every insert gets a fresh engine, the embedder is
    loaded once per code."""
    import importlib
    import tempfile

    import numpy as np

    docs = [(f"p{i}", t) for i, t in enumerate(passages[:n])]
    codes = {"now": importlib.import_module("remindrag_integrations")}
    tmp = tempfile.TemporaryDirectory()
    if baseline is not None:
        codes["baseline"] = importlib.import_module(renamed_copy(baseline, Path(tmp.name)))
    embedders = {label: make_embedder(mod, embedder, device) for label, mod in codes.items()}
    texts: dict[str, tuple[list[str], list[str]]] = {}
    for label, mod in codes.items():
        engine = mod.ReMindRAG(embeddings=embedders[label])
        plan = importlib.import_module(f"{mod.__name__}.core.insert").plan
        chunks = [c.text for c in plan(engine.store, docs, engine.index_config).chunks]
        texts[label] = (chunks, distinct_names(mod, chunks, engine.index_config))
        if isinstance(embedders[label], Cached):  # Paced too
            embedders[label].fill(chunks + texts[label][1] + ["warm up"])
        embedders[label].embed(["warm up", chunks[0]])  # model load is cold start
    runs: list[dict[str, Any]] = []
    graphs: dict[str, dict[str, Any]] = {}
    for r in range(rounds):
        for label, mod in codes.items():
            has_knob = "workers" in mod.IndexConfig.model_fields
            has_ahead = "embed_ahead" in mod.IndexConfig.model_fields
            for w, ah in [
                (w, ah)
                for w in (workers if has_knob else [None])
                for ah in (aheads if has_ahead else ["-"])
            ]:
                emb = embedders[label]
                chunks, names = texts[label]
                load = os.getloadavg()[0]
                t, floor_cpu = time.perf_counter(), cpu_time()
                emb.embed(chunks)
                emb.embed(names)
                floor, floor_cpu = time.perf_counter() - t, cpu_time() - floor_cpu
                cfg: dict[str, Any] = {"workers": w} if w is not None else {}
                if ah != "-":
                    cfg["embed_ahead"] = ah
                engine = mod.ReMindRAG(embeddings=emb, index_config=cfg)
                t, cpu = time.perf_counter(), cpu_time()
                report = engine.insert(docs)
                secs, cpu = time.perf_counter() - t, cpu_time() - cpu
                graphs[f"{label}/{w}/{ah}"] = graph_signature(engine)
                runs.append(
                    {
                        "round": r + 1,
                        "code": label,
                        "workers": w,
                        "embed_ahead": ah,
                        "chunks": len(chunks),
                        "names": len(names),
                        "entities": report.entities_added,
                        "merged": report.entities_merged,
                        "floor_s": floor,
                        "floor_cpu_s": floor_cpu,
                        "insert_s": secs,
                        "insert_cpu_s": cpu,
                        "ratio": secs / max(floor, 1e-9),
                        "cpu_ratio": cpu / max(floor_cpu, 1e-9),
                        "load": [load, os.getloadavg()[0]],
                    }
                )
    tmp.cleanup()
    first = next(iter(graphs.values()))
    same = {
        key: {
            "nodes": g["nodes"],
            "edges": g["edges"],
            "same_ids": g["ids_sha"] == first["ids_sha"],
            "vector_max_diff": float(np.abs(g["vectors"] - first["vectors"]).max())
            if g["vectors"].shape == first["vectors"].shape
            else None,
        }
        for key, g in graphs.items()
    }
    medians = {}
    for key in graphs:
        label, w, ah = key.split("/")
        mine = [
            x
            for x in runs
            if x["code"] == label and str(x["workers"]) == w and str(x["embed_ahead"]) == ah
        ]
        medians[key] = {
            m: float(np.median([x[m] for x in mine]))
            for m in ("floor_s", "insert_s", "ratio", "cpu_ratio")
        }
    head = ["round", "code", "workers", "ahead", "chunks", "names", "floor s", "insert s"]
    head += ["insert / floor"]
    head += ["CPU s: floor", "insert", "insert / floor", "load"]
    rows = [
        [
            x["round"],
            x["code"],
            "-" if x["workers"] is None else x["workers"],
            x["embed_ahead"],
            x["chunks"],
            x["names"],
            x["floor_s"],
            x["insert_s"],
            x["ratio"],
            x["floor_cpu_s"],
            x["insert_cpu_s"],
            x["cpu_ratio"],
            f"{x['load'][0]:.1f}-{x['load'][1]:.1f}",
        ]
        for x in runs
    ]
    what = f"{embedder} embedder on {device}" if embedder == "st" else f"{embedder} embedder"
    table(
        f"Zero-token insert vs the floor: chunks + distinct names ({n} passages, {what})",
        head,
        rows,
    )
    table(
        "Medians",
        ["code/workers/ahead", "floor s", "insert s", "insert / floor", "CPU insert / floor"],
        [[k, v["floor_s"], v["insert_s"], v["ratio"], v["cpu_ratio"]] for k, v in medians.items()],
    )
    print(f"graphs against {next(iter(graphs))}: {same}")
    return {
        "embedder": embedder,
        "device": device,
        "runs": runs,
        "medians": medians,
        "graphs": same,
    }


def synthetic(passages: list[str], n: int) -> list[tuple[str, str]]:
    """``n`` distinct one-chunk documents: the corpus repeated, each copy numbered."""
    return [
        (f"s{i}", f"{passages[i % len(passages)]} (copy {i // len(passages)})") for i in range(n)
    ]


def bench_scaling(
    passages: list[str], sizes: list[int], out_path: Path, hash_embedder: bool
) -> list[dict]:
    """Each size in a fresh process (peak RSS per size); results appended as they finish."""
    runs = []
    for n in sizes:
        code = (
            "import json,sys; sys.path.insert(0, 'benchmarks'); import indexing as b; "
            f"p=b.load_passages(b.Path({str(DATA)!r})); "
            f"print(json.dumps(b.index_once(b.synthetic(p, {n}), None, {hash_embedder})))"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
            break
        runs.append({"size": n, **json.loads(done.stdout.strip().splitlines()[-1])})
        first = runs[0]["chunks_per_s"]
        for r in runs:
            r["vs_first"] = r["chunks_per_s"] / first
        out_path.write_text(json.dumps({"scaling": runs}, indent=1), encoding="utf-8")
        head = ["chunks", "seconds", "chunks/s", "vs smallest", "entities", "peak RSS MB"]
        rows = [
            [
                r["chunks"],
                r["seconds"],
                r["chunks_per_s"],
                r["vs_first"],
                r["entities"],
                r["peak_rss_mb"],
            ]
            for r in runs
        ]
        what = "HashEmbedder" if hash_embedder else "MiniLM"
        table(f"Scaling ({what}, zero-token, distinct chunks of repeated HotpotQA)", head, rows)
    return runs


DATA = Path("../shared/datasets/hotpotqa_train100.corpus.jsonl")


def main() -> None:
    global DATA
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="a corpus file, or several: a,b,c")
    ap.add_argument("--sections", default="embedders,hotpotqa,cold")
    ap.add_argument("--backends", default="onnx,onnx-fp32,torch", help="for hotpotqa and cold")
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--embed-passages", type=int, default=300)
    ap.add_argument("--embed-names", type=int, default=1000)
    ap.add_argument("--hash-embedder", action="store_true", help="scaling without MiniLM")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--passages", type=int, default=400, help="floor: passages inserted")
    ap.add_argument("--rounds", type=int, default=3, help="floor: rounds of each code")
    ap.add_argument("--baseline", type=Path, help="cold, floor: another code tree, side by side")
    ap.add_argument("--workers", default="1,2", help="floor: IndexConfig.workers of each insert")
    ap.add_argument(
        "--embedder",
        default="default",
        choices=["default", "onnx-fp32", "st", "cached", "paced"],
        help="floor: the packaged model as ReMindRAG() picks it, on float32 ONNX, on "
        "sentence-transformers (st, on --device), the default's vectors computed before "
        "the clock (cached: the insert without the embedding), or those vectors paced like "
        "the issue's H100 (paced: an emulation, class Paced)",
    )
    ap.add_argument(
        "--ahead",
        default="default",
        help="floor: IndexConfig.embed_ahead of each insert: default,on,off (comma-separated)",
    )
    ap.add_argument("--device", default="cpu", help="floor: the st embedder's device (cuda)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/indexing.json"))
    args = ap.parse_args()
    files = [Path(f).resolve() for f in str(args.data).split(",")]  # several: one corpus
    DATA = files[0]
    passages = [p for f in files for p in load_passages(f)]
    sections = args.sections.split(",")
    backends = args.backends.split(",")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"uptime": os.getloadavg(), "nproc": os.cpu_count()}
    if "embedders" in sections:
        result["embedders"] = bench_embedders(passages, args.embed_passages, args.embed_names)
    if "hotpotqa" in sections:
        result["hotpotqa"] = bench_hotpotqa(passages, backends)
    if "floor" in sections:
        workers = [int(w) for w in args.workers.split(",")]
        result["floor"] = bench_floor(
            passages,
            args.passages,
            args.rounds,
            args.baseline,
            workers,
            args.embedder,
            args.device,
            tuple({"default": None, "on": True, "off": False}[a] for a in args.ahead.split(",")),
        )
    if "cold" in sections:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "store"
            result["cold"] = bench_cold(args.runs, backends, store, args.baseline)
    if "scaling" in sections:
        sizes = [int(s) for s in args.sizes.split(",")]
        result["scaling"] = bench_scaling(
            passages, sizes, args.out.with_suffix(".scaling.json"), args.hash_embedder
        )
    result["load_after"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(
        f"\nload average before {result['uptime']}, after {result['load_after']}; wrote {args.out}"
    )


if __name__ == "__main__":
    main()
