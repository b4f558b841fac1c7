"""Entity names on int8 with per-token activation scales: cost, vectors and merges
(issue 25 item 4, a measurement; nothing here is wired into the library).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/name_embedding.py \\
        --data ../shared/datasets --out benchmarks/results/name_embedding.json

The library embeds entity names (texts under 16 tokens) on the float32 graph, batched, and
long texts on the int8 graph one text per call (its activations get one scale per call, so a
batch would make a vector depend on its neighbours). This script builds, from the same
exported float32 model, a graph whose quantized MatMuls take one activation scale *per
token* (symmetric, stored as uint8 around 128, per-channel int8 weights): a text's vector
then does not depend on its batch, so names can be batched on int8. It measures, on the new
names of a zero-token insert of ``--passages`` HotpotQA passages (rounds alternating, one
process): CPU and wall seconds per variant, cosine to float32, batch independence, the
largest pairwise-cosine error, and whether synonym merges decided on int8 vectors with the
pairs near ``synonym_threshold`` re-decided on float32 are float32's merges (on the 400
passages and on each pooled dev corpus, ``--sets``). Prints tables, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from remindrag_integrations import ReMindRAG
from remindrag_integrations.adapters.onnx_embedder import MODEL_FILE, _batches, _padded, _pooled
from remindrag_integrations.core import indexing
from remindrag_integrations.core.extract_rules import rule_based_extraction
from remindrag_integrations.core.insert import plan

sys.path.insert(0, str(Path(__file__).resolve().parent))
from indexing import table  # noqa: E402  (the same printed tables as the floor's)

QUANTIZED = {
    "int8/token q,k,v,up": lambda name: "/attention/self/" in name or "/intermediate/" in name,
    "int8/token all": lambda name: True,
}


def per_token_graph(src: Path, out: Path, which: Callable[[str], bool]) -> None:
    """``src`` with each weight MatMul chosen by ``which`` replaced by an int8 product whose
    activation scale is the row's (token's) largest magnitude / 127."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    weights = {w.name: w for w in graph.initializer}
    nodes, extra = [], []
    for n in graph.node:
        if n.op_type != "MatMul" or n.input[1] not in weights or not which(n.name):
            nodes.append(n)
            continue
        w = numpy_helper.to_array(weights[n.input[1]]).astype(np.float32)
        w_scale = np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0
        p, x = n.name.replace("/", "_"), n.input[0]
        extra += [
            numpy_helper.from_array(np.round(w / w_scale).astype(np.int8), p + "_wq"),
            numpy_helper.from_array(w_scale.astype(np.float32), p + "_ws"),
            numpy_helper.from_array(np.array([1e-8], np.float32), p + "_eps"),
            numpy_helper.from_array(np.array([127.0], np.float32), p + "_127"),
            numpy_helper.from_array(np.array([128.0], np.float32), p + "_128"),
            numpy_helper.from_array(np.array(128, np.uint8), p + "_zp"),
        ]

        def node(op: str, ins: list[str], out: str, p: str = p, x: str = x, **kw: Any) -> Any:
            return helper.make_node(op, [i if i == x else p + i for i in ins], [out], **kw)

        nodes += [
            node("Abs", [x], p + "_abs"),
            node("ReduceMax", ["_abs"], p + "_amax", axes=[-1], keepdims=1),
            node("Max", ["_amax", "_eps"], p + "_amax1"),
            node("Div", ["_amax1", "_127"], p + "_s"),
            node("Div", [x, "_s"], p + "_xs"),
            node("Round", ["_xs"], p + "_xr"),
            node("Add", ["_xr", "_128"], p + "_xu"),
            node("Cast", ["_xu"], p + "_xq", to=TensorProto.UINT8),
            node("MatMulInteger", ["_xq", "_wq", "_zp"], p + "_y32"),
            node("Cast", ["_y32"], p + "_yf", to=TensorProto.FLOAT),
            node("Mul", ["_yf", "_s"], p + "_y1"),
            node("Mul", ["_y1", "_ws"], n.output[0]),
        ]
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(extra)
    used = {i for n in graph.node for i in n.input}
    kept = [w for w in graph.initializer if w.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.save(model, str(out))


def new_names(engine: Any, docs: list[tuple[str, str]]) -> list[str]:
    """The names a zero-token insert of ``docs`` into ``engine``'s (empty) store embeds."""
    cfg = engine.index_config
    chunks = plan(engine.store, docs, cfg).chunks
    found = [rule_based_extraction(c.text, cfg.max_entities_per_chunk) for c in chunks]
    _, pending = indexing._known_entities(found, engine.store)
    return [name for _, name in pending]


class Runner:
    """Embeds texts on one ONNX session: batched (sorted, token budget) or one per call."""

    def __init__(self, engine: Any) -> None:
        self.emb = engine.embedder
        self.emb.embed(["warm up", "a longer text to warm the int8 graph up " * 3])
        self.fp32, self.tok = self.emb._load()
        self.int8_call = self.emb._int8_session(self.emb._int8_file)
        self.sessions: dict[str, Any] = {"float32": self.fp32}

    def add(self, label: str, path: Path) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.sessions[label] = ort.InferenceSession(
            str(path), opts, providers=["CPUExecutionProvider"]
        )

    def batched(self, label: str, texts: list[str]) -> np.ndarray:
        enc = self.tok.encode_batch(texts)
        lens = np.array([len(e.ids) for e in enc])
        order = np.argsort(lens, kind="stable")
        out = np.zeros((len(texts), self.emb.dimension), np.float32)
        for rows in _batches(order, lens, self.emb.batch_size, self.emb.token_budget):
            out[rows] = _pooled(self.sessions[label], *_padded([enc[j].ids for j in rows]))
        return out

    def alone(self, label: str, texts: list[str]) -> np.ndarray:
        s = self.sessions[label]
        return np.stack([_pooled(s, *_padded([self.tok.encode(t).ids]))[0] for t in texts])


def timed(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float, float, float]:
    load = os.getloadavg()[0]
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c, load


def insert_parts(run: Runner, docs: list[tuple[str, str]]) -> dict[str, float]:
    """A zero-token ``insert`` of ``docs`` into a fresh engine sharing the warm embedder:
    wall and CPU seconds, and the CPU seconds spent inside embedder calls."""
    inside = [0.0]
    embed = run.emb.embed

    def counted(texts: Any) -> np.ndarray:
        c = time.process_time()
        try:
            return embed(texts)
        finally:
            inside[0] += time.process_time() - c

    engine = ReMindRAG()
    engine.embedder = run.emb
    run.emb.embed = counted  # type: ignore[method-assign]
    try:
        t, c = time.perf_counter(), time.process_time()
        engine.insert(docs)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    finally:
        del run.emb.embed
    return {"wall_s": wall, "cpu_s": cpu, "embed_cpu_s": inside[0]}


def exact_targets(
    approx: np.ndarray, exact: Callable[[np.ndarray], np.ndarray], threshold: float, margin: float
) -> tuple[list[Any], int]:
    """Merge targets (an empty store) from ``approx`` vectors, every row with a partner at
    cosine ≥ threshold − margin taking its ``exact`` vector first. Returns (targets, rows
    re-embedded). Equal to the exact targets when ``margin`` bounds the cosine error."""
    sims = approx @ approx.T
    np.fill_diagonal(sims, -1.0)
    near = np.flatnonzero((sims >= threshold - margin).any(axis=1))
    mixed = approx.copy()
    if len(near):
        mixed[near] = exact(near)
    return indexing.synonym_targets(mixed, [None] * len(mixed), threshold), len(near)


def merges(targets: list[Any]) -> int:
    return sum(t is not None for t in targets)


def merge_check(
    run: Runner, names: list[str], threshold: float, margins: list[float], label: str
) -> dict[str, Any]:
    fp = run.batched("float32", names)
    q = run.batched(label, names)
    truth = indexing.synonym_targets(fp, [None] * len(fp), threshold)
    plain = indexing.synonym_targets(q, [None] * len(q), threshold)
    iu = np.triu_indices(len(names), 1)
    err = np.abs((fp @ fp.T)[iu] - (q @ q.T)[iu])
    out: dict[str, Any] = {
        "names": len(names),
        "merges_float32": merges(truth),
        "int8_decisions_differing": sum(a != b for a, b in zip(truth, plain)),
        "pair_cos_error_max": float(err.max()),
        "pair_cos_error_p9999": float(np.quantile(err, 0.9999)),
        "name_cos_min": float(np.min(np.sum(fp * q, axis=1))),
        "margins": {},
    }
    for m in margins:
        got, redone = exact_targets(q, lambda rows: fp[rows], threshold, m)
        out["margins"][str(m)] = {
            "re_embedded": redone,
            "differing": sum(a != b for a, b in zip(truth, got)),
        }
    return out


def corpus(data: Path, name: str) -> list[tuple[str, str]]:
    path = data / f"{name}.corpus.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [(str(r.get("id", i)), r["text"]) for i, r in enumerate(rows)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/datasets"))
    ap.add_argument("--passages", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--margins", default="0.05,0.1")
    ap.add_argument("--sets", default="hotpotqa_train100,musique_train100,2wiki_dev64")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/name_embedding.json"))
    args = ap.parse_args()
    margins = [float(m) for m in args.margins.split(",")]
    engine = ReMindRAG()
    threshold = engine.index_config.synonym_threshold
    run = Runner(engine)
    tmp = tempfile.TemporaryDirectory()
    src = Path(run.emb._int8_file).parent / MODEL_FILE
    for label, which in QUANTIZED.items():
        path = Path(tmp.name) / (label.replace("/", "-").replace(",", "") + ".onnx")
        per_token_graph(src, path, which)
        run.add(label, path)
    docs = corpus(args.data, "hotpotqa_train100")[: args.passages]
    names = new_names(engine, docs)
    chunks = [c.text for c in plan(engine.store, docs, engine.index_config).chunks]
    result: dict[str, Any] = {"load_start": os.getloadavg(), "names": len(names), "timing": []}

    # cost: the floor (the library's embed of the chunks), names per variant, chunks batched
    jobs: dict[str, Callable[[], np.ndarray]] = {
        "chunks: library (int8 one per call)": lambda: run.emb.embed(chunks),
        "names: library (float32 batched)": lambda: run.emb.embed(names),
    }
    for label in QUANTIZED:
        jobs[f"names: {label} batched"] = lambda label=label: run.batched(label, names)
        jobs[f"chunks: {label} batched"] = lambda label=label: run.batched(label, chunks)
    ref = {"names": run.batched("float32", names), "chunks": run.batched("float32", chunks)}
    result["insert"] = []
    for r in range(args.rounds):
        result["insert"].append({"round": r + 1, "load": os.getloadavg()[0]})
        result["insert"][-1].update(insert_parts(run, docs))
        for what, fn in jobs.items():
            vecs, wall, cpu, load = timed(fn)
            cos = np.sum(vecs * ref[what.split(":")[0]], axis=1)
            result["timing"].append(
                {
                    "round": r + 1,
                    "job": what,
                    "wall_s": wall,
                    "cpu_s": cpu,
                    "cos_min": float(cos.min()),
                    "cos_mean": float(cos.mean()),
                    "load": load,
                }
            )
    rows = [
        [x["round"], x["job"], x["wall_s"], x["cpu_s"], x["cos_min"], x["cos_mean"], x["load"]]
        for x in result["timing"]
    ]
    head = ["round", "texts: graph", "wall s", "CPU s", "cos min", "cos mean", "load"]
    table(f"{len(chunks)} chunks, {len(names)} new names (cosine to float32)", head, rows)

    by_job: dict[str, list[float]] = {}
    for x in result["timing"]:
        by_job.setdefault(x["job"], []).append(x["cpu_s"])
    med = {job: float(np.median(v)) for job, v in by_job.items()}
    floor = med["chunks: library (int8 one per call)"]
    names_now = med["names: library (float32 batched)"]
    ins = {k: float(np.median([x[k] for x in result["insert"]])) for k in ("cpu_s", "embed_cpu_s")}
    rows = [["insert (library)", ins["cpu_s"], ins["cpu_s"] / floor]]
    rows.append(
        ["insert, names free", ins["cpu_s"] - names_now, (ins["cpu_s"] - names_now) / floor]
    )
    for label in QUANTIZED:
        proj = ins["cpu_s"] - names_now + med[f"names: {label} batched"]
        rows.append([f"insert, names on {label}", proj, proj / floor])
    result["cpu_medians"] = {"jobs": med, "insert": ins, "floor": floor}
    print(
        f"\ninsert CPU s by round: {[round(x['cpu_s'], 2) for x in result['insert']]}, "
        f"inside the embedder {[round(x['embed_cpu_s'], 2) for x in result['insert']]}"
    )
    table(
        f"CPU seconds (medians), floor = the chunks' embed {floor:.2f} s",
        ["what", "CPU s", "/ floor"],
        rows,
    )

    sample = names[:: max(1, len(names) // 300)]
    result["batch_independence_cos_min"] = {
        label: float(np.min(np.sum(run.alone(label, sample) * run.batched(label, sample), 1)))
        for label in QUANTIZED
    }
    print(f"\nalone vs batched, {len(sample)} names: {result['batch_independence_cos_min']}")

    result["merges"] = {}
    label = "int8/token all"
    sets = [(f"{args.passages} HotpotQA passages", docs)]
    sets += [(f"{s} pooled", corpus(args.data, s)) for s in args.sets.split(",") if s]
    for title, set_docs in sets:
        set_names = new_names(ReMindRAG(), set_docs)
        result["merges"][title] = merge_check(run, set_names, threshold, margins, label)
    rows = []
    for title, m in result["merges"].items():
        for margin, x in m["margins"].items():
            rows.append(
                [
                    title,
                    m["names"],
                    m["merges_float32"],
                    m["int8_decisions_differing"],
                    m["pair_cos_error_max"],
                    margin,
                    x["re_embedded"],
                    x["differing"],
                ]
            )
    head = ["names of", "n", "merges fp32", "int8 alone: differ", "pair err max", "margin"]
    head += ["re-embedded fp32", "differ"]
    table(f"Synonym merges at {threshold}: {label} vs float32 (one batch, empty store)", head, rows)
    result["load_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"\nload {result['load_start']} -> {result['load_end']}; wrote {args.out}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
