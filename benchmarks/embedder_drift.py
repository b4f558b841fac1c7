"""How far the packaged embedder's results move between code paths (issue 32 item 3).

The packaged all-MiniLM-L6-v2 runs on onnxruntime; texts of 16 word pieces or more go through
an int8 graph whose integer kernels onnxruntime picks by processor (x86 AVX2 / AVX-512 without
VNNI: u8 x s8 pairs summed in saturating 16 bits; AVX-512 VNNI / AVX-VNNI: 32-bit sums; ARM:
its own kernels). One machine cannot run another's kernels, so each arm below is a code path
this machine can run, and every arm indexes and queries the same dev settings (zero-token
first pass, ``benchmarks.harness``), compared question by question with ``int8``:

- ``int8``: the default before issue 32 (``OnnxEmbedder`` with ``exact_int8=False``: the int8
  graph for texts of >= 16 word pieces on onnxruntime's own kernel for the processor);
- ``int8-exact``: the same graph with onnxruntime's session config entry
  ``session.x64quantprecision=1`` (weights turned to u8 so that u8 x u8 kernels run: no
  16-bit saturation; what a VNNI processor computes in its integer part): the library's
  default since issue 32;
- ``int8-7bit``: an int8 graph quantized like the packaged one but with 7-bit weights
  (``quantize_dynamic(reduce_range=True)``: |w| <= 64, so 255 x 64 x 2 fits 16 bits and the
  AVX2 kernel cannot saturate; made once into a temporary folder);
- ``fp32``: ``REMINDRAG_EMBEDDER_BACKEND=onnx-fp32`` (every text on the float32 graph);
- ``torch``: ``REMINDRAG_EMBEDDER_BACKEND=torch`` (sentence-transformers);
- ``noise``: the ``int8`` vectors, each moved by a seeded relative noise in a random direction
  and renormalised, one arm per scale of ``--noise-scales`` (``noise 0.001``: the suite's
  drift mode; ``noise 0.05``: about as far as the int8 code paths move a vector); a function
  of the text alone, as on a real processor.

    PYTHONPATH=. HF_HUB_OFFLINE=1 nice python benchmarks/embedder_drift.py \\
        --data ../shared/datasets --out benchmarks/results/embedder_drift.json
    # 2WikiMultihopQA with torch and the 7-bit graph, then embedding speed on 300 passages
    ... --settings 2wiki_dev64:pooled,2wiki_dev64:per-question --noise-scales "" \\
        --arms int8,int8-exact,int8-7bit,fp32,torch --speed 300
    ... --settings "" --loogle          # the LooGLE dev documents (evidence@5)

The default arms are ``int8,int8-exact,fp32,noise`` over the three multi-hop dev sets, pooled
and per question (37 min on 2 busy cores). Prints, per setting and arm: recall@5 (evidence@5
on long documents) of ReMindRAG's first pass, its change against ``int8`` (and how many
questions went up / down), the share of questions whose top-5 set differs from ``int8``'s
(with the mean number of its passages that are not ``int8``'s) and whose top-1 does, the same
share for the dense baseline (cosine only), the cosine between each arm's and ``int8``'s
vectors of the same chunks (median, 1st percentile), the median relative distance
``|a - b| / |a|`` between them (the unit a noise scale is in), the median cosine to
``fp32``'s vectors and the share of top-5 sets that differ from ``fp32``'s, and the share of
questions whose own vector moved; then each arm's embedding speed on the texts it embedded
and, with ``--speed N``, on N HotpotQA passages without the cache, the arms taking turns.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from indexing import table  # noqa: E402  (the same printed tables as the floor's)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import Dataset, load_dataset  # noqa: E402
from benchmarks.harness.resources import CachedEmbedder  # noqa: E402
from benchmarks.harness.runner import Bench, remindrag_query  # noqa: E402

ARMS = ("int8", "int8-exact", "int8-7bit", "fp32", "torch", "noise")
SETTINGS = tuple(
    f"{s}:{m}"
    for s in ("hotpotqa_train100", "musique_train100", "2wiki_dev64")
    for m in ("pooled", "per-question")
)
LOOGLE = ("loogle_longdep_dev:pooled", "loogle_shortdep_dev:pooled")
PRECISION_KEY = "session.x64quantprecision"  # onnxruntime_session_options_config_keys.h
K = 5


class Timed:
    """Wall and CPU seconds an embedder spends, and the texts it embedded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.wall = self.cpu = 0.0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        w, c = time.perf_counter(), time.process_time()
        out = self.inner.embed(texts)
        self.wall += time.perf_counter() - w
        self.cpu += time.process_time() - c
        self.texts += len(texts)
        return out


class Noisy:
    """Another embedder's vectors, each moved by ``scale`` of its norm in a random direction
    seeded by the text (and ``seed``) alone, then renormalised: cosines move by ~``scale``."""

    def __init__(self, inner: Any, scale: float, seed: int = 0) -> None:
        self.inner, self.scale, self.seed = inner, scale, seed

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.array(self.inner.embed(texts), dtype=np.float32, copy=True)
        for i, text in enumerate(texts):
            digest = hashlib.sha256(f"{self.seed}\x00{text}".encode()).digest()
            g = np.random.default_rng(int.from_bytes(digest[:8], "little")).standard_normal(
                out.shape[1]
            )
            norm = float(np.linalg.norm(out[i]))
            moved = out[i] + self.scale * norm * g / np.linalg.norm(g)
            out[i] = moved * (norm / float(np.linalg.norm(moved)))
        return out


def exact_int8_embedder(model_dir: Path) -> Any:
    """``OnnxEmbedder`` whose int8 session sets ``session.x64quantprecision=1``: the library's
    default since issue 32."""
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    return OnnxEmbedder(model_dir)


def saturating_int8_embedder(model_dir: Path) -> Any:
    """``OnnxEmbedder`` as it was before issue 32: onnxruntime's own int8 kernel for the
    processor (on AVX2, uint8 x int8 pairs summed in 16 bits, which can saturate)."""
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    emb = OnnxEmbedder(model_dir)
    emb.exact_int8 = False
    return emb


def seven_bit_embedder(model_dir: Path, folder: Path) -> Any:
    """``OnnxEmbedder`` whose int8 graph has 7-bit weights, written into ``folder``."""
    import onnxruntime.quantization as quantization

    from remindrag_integrations.adapters import onnx_embedder
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    where = onnx_embedder.export(model_dir)
    graph = folder / "model-int8-7bit.onnx"
    real = quantization.quantize_dynamic

    def seven_bit(*args: Any, **kwargs: Any) -> Any:  # the packaged graph's nodes, 7 bits
        return real(*args, **{**kwargs, "reduce_range": True})

    root = logging.getLogger()
    handlers = list(root.handlers)
    quantization.quantize_dynamic = seven_bit  # type: ignore[assignment]
    try:
        onnx_embedder._quantize(where / onnx_embedder.MODEL_FILE, graph)
    finally:
        quantization.quantize_dynamic = real  # type: ignore[assignment]
        root.handlers[:] = handlers  # the quantizer's basicConfig left one on the root logger

    class SevenBit(OnnxEmbedder):
        exact_int8 = False  # as measured: onnxruntime's own kernel

        def _load(self) -> tuple[Any, Any]:
            session, tok = super()._load()
            self._int8_file = graph
            return session, tok

    return SevenBit(model_dir)


def make_arms(
    names: Sequence[str], scales: Sequence[float], seed: int
) -> dict[str, CachedEmbedder]:
    """One in-memory cached embedder per arm (a text is embedded once per arm)."""
    from remindrag_integrations.adapters.embeddings import (
        SentenceTransformerEmbedder,
        packaged_model_path,
    )
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    path = packaged_model_path()
    arms: dict[str, CachedEmbedder] = {
        "int8": CachedEmbedder(Timed(saturating_int8_embedder(path)))
    }
    for name in names:
        if name == "int8-exact":
            arms[name] = CachedEmbedder(Timed(exact_int8_embedder(path)))
        elif name == "int8-7bit":
            folder = Path(tempfile.mkdtemp(prefix="drift-7bit-"))
            atexit.register(shutil.rmtree, folder, True)
            arms[name] = CachedEmbedder(Timed(seven_bit_embedder(path, folder)))
        elif name == "fp32":
            arms[name] = CachedEmbedder(Timed(OnnxEmbedder(path, quantized=False)))
        elif name == "torch":
            arms[name] = CachedEmbedder(Timed(SentenceTransformerEmbedder()))
        elif name == "noise":
            for scale in scales:
                arms[f"noise {scale:g}"] = CachedEmbedder(Noisy(arms["int8"], scale, seed))
    for t in timers(arms).values():  # model loads are not embedding speed
        t.inner.embed(["warm up", "a warm-up text long enough for the int8 graph of the model"])
    return arms


def timers(arms: dict[str, CachedEmbedder]) -> dict[str, Timed]:
    return {n: a.inner for n, a in arms.items() if isinstance(a.inner, Timed)}


def top_k(bench: Bench, item: dict, k: int) -> dict[str, Any]:
    """ReMindRAG's first pass and the dense baseline: recall and the returned chunk ids."""
    rec = remindrag_query(bench, item, 10)
    kb = bench.kbs[item["qid"]]
    qvec = kb.engine.embedder.embed([item["question"]])[0]
    dense = kb.baseline("dense").retrieve(item["question"], qvec, k)
    key = "evidence@5" if bench.ds.long_document else "recall@5"
    return {"score": rec[key], "top": rec["retrieved"][:k], "dense": [c.id for c in dense]}


def cosines(arms: dict[str, CachedEmbedder], texts: list[str], ref: str) -> dict[str, np.ndarray]:
    """Per arm: the cosine of each text's vector to arm ``ref``'s (all unit vectors)."""
    base = arms[ref].embed(texts)
    return {n: np.sum(base * a.embed(texts), axis=1) for n, a in arms.items()}


def run_setting(
    spec: str, data: str, arms: dict[str, CachedEmbedder], limit: int | None
) -> dict[str, Any]:
    name, setting = spec.split(":")
    ds: Dataset = load_dataset(name, data)
    if limit:
        ds = ds.head(limit)
    per_arm: dict[str, dict[str, Any]] = {}
    chunk_texts: list[str] = []
    for arm, emb in arms.items():
        bench = Bench(ds, setting, "none", emb)
        per_arm[arm] = {q["qid"]: top_k(bench, q, K) for q in ds.questions}
        if arm == "int8":
            chunk_texts = list(
                dict.fromkeys(c.text for kb in bench.unique_kbs() for c in kb.chunks)
            )
        del bench
    cos = cosines(arms, chunk_texts, "int8")
    to_fp32 = cosines(arms, chunk_texts, "fp32") if "fp32" in arms else {}
    questions = list(dict.fromkeys(q["question"] for q in ds.questions))
    q_cos = cosines(arms, questions, "int8")
    ref, qids = per_arm["int8"], [q["qid"] for q in ds.questions]
    out: dict[str, Any] = {
        "setting": spec,
        "questions": len(qids),
        "chunks": len(chunk_texts),
        "key": "evidence@5" if ds.long_document else "recall@5",
        "arms": {},
    }
    fp = per_arm.get("fp32")
    for arm, res in per_arm.items():
        delta = [res[q]["score"] - ref[q]["score"] for q in qids]
        c = cos[arm]
        out["arms"][arm] = {
            "top5_differs_from_fp32": None
            if fp is None
            else share([set(res[q]["top"]) != set(fp[q]["top"]) for q in qids]),
            "score": float(np.mean([res[q]["score"] for q in qids])),
            "delta": float(np.mean(delta)),
            "up": sum(d > 1e-9 for d in delta),
            "down": sum(d < -1e-9 for d in delta),
            "top5_differs": share([set(res[q]["top"]) != set(ref[q]["top"]) for q in qids]),
            "top1_differs": share([res[q]["top"][:1] != ref[q]["top"][:1] for q in qids]),
            # where the top-5 set differs: how many of its passages are not int8's
            "swapped": float(np.mean(swaps)) if (swaps := swapped(res, ref, qids)) else 0.0,
            "dense_top5_differs": share(
                [set(res[q]["dense"]) != set(ref[q]["dense"]) for q in qids]
            ),
            "chunk_cos_median": float(np.median(c)),
            "chunk_cos_p1": float(np.percentile(c, 1)),
            "chunk_rel_dist_median": float(np.median(np.sqrt(np.maximum(2 - 2 * c, 0)))),
            "chunk_cos_to_fp32_median": float(np.median(to_fp32[arm])) if to_fp32 else None,
            "chunk_cos_to_fp32_min": float(np.min(to_fp32[arm])) if to_fp32 else None,
            "questions_moved": share((q_cos[arm] < 1 - 1e-6).tolist()),
        }
    return out


def swapped(res: dict[str, Any], ref: dict[str, Any], qids: list[str]) -> list[int]:
    sets = [(set(res[q]["top"]), set(ref[q]["top"])) for q in qids]
    return [len(a - b) for a, b in sets if a != b]


def share(flags: Sequence[bool]) -> float:
    return float(np.mean(flags)) if len(flags) else 0.0


def passage_speed(
    arms: dict[str, CachedEmbedder], texts: list[str], rounds: int
) -> dict[str, dict[str, float]]:
    """Each embedding arm on the same passages, uncached, the arms taking turns for
    ``rounds`` rounds (a load change hits them alike): CPU and wall seconds, best round."""
    out: dict[str, dict[str, float]] = {}
    for _ in range(rounds):
        for name, t in timers(arms).items():
            w, c = time.perf_counter(), time.process_time()
            t.inner.embed(texts)
            cpu, wall = time.process_time() - c, time.perf_counter() - w
            best = out.setdefault(name, {"passages": len(texts), "cpu_s": cpu, "wall_s": wall})
            best["cpu_s"], best["wall_s"] = min(best["cpu_s"], cpu), min(best["wall_s"], wall)
    for s in out.values():
        s["per_cpu_s"] = s["passages"] / s["cpu_s"]
        s["cpu_vs_int8"] = s["cpu_s"] / out["int8"]["cpu_s"]
    return out


def report(results: list[dict[str, Any]], speed: dict[str, dict[str, float]]) -> None:
    head = [
        "setting",
        "arm",
        "R@5",
        "dR@5",
        "up/down",
        "top-5 differs (swapped)",
        "top-1 differs",
        "dense top-5 differs",
        "chunk cos med",
        "chunk cos p1",
        "rel dist med",
        "cos to fp32 med",
        "top-5 differs from fp32",
        "questions moved",
    ]
    rows = []
    for res in results:
        for arm, a in res["arms"].items():
            row: list[Any] = [f"{res['setting']} ({res['questions']} q)", arm, a["score"]]
            if arm == "int8":
                row += [""] * 8
            else:
                row += [
                    f"{a['delta']:+.3f}",
                    f"{a['up']}/{a['down']}",
                    f"{a['top5_differs']:.0%} ({a['swapped']:.1f})",
                    f"{a['top1_differs']:.0%}",
                    f"{a['dense_top5_differs']:.0%}",
                    f"{a['chunk_cos_median']:.5f}",
                    f"{a['chunk_cos_p1']:.5f}",
                    f"{a['chunk_rel_dist_median']:.4f}",
                ]
            fp = a["chunk_cos_to_fp32_median"]
            row += ["" if fp is None else f"{fp:.5f}"]
            d = a["top5_differs_from_fp32"]
            row += ["" if d is None else f"{d:.0%}", f"{a['questions_moved']:.0%}"]
            rows.append(row)
    title = "Each arm against int8 (ReMindRAG zero-token first pass; R@5: evidence@5 on LooGLE)"
    table(title, head, rows)
    srows = [
        [n, s["texts"], s["wall_s"], s["cpu_s"], s["texts_per_cpu_s"]] for n, s in speed.items()
    ]
    head = ["arm", "texts", "wall s", "CPU s", "texts/CPU s"]
    table("Embedding (the texts each arm embedded, each once)", head, srows)


def machine() -> dict[str, Any]:
    import onnxruntime

    flags = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        model = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in text.splitlines()
                if ln.startswith("model name")
            ),
            "",
        )
        have = set(
            next(
                (ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")),
                [],
            )
        )
        flags = " ".join(
            f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in have
        )
    except OSError:
        model = platform.processor()
    return {
        "cpu": model,
        "isa": flags,
        "cpus": os.cpu_count(),
        "onnxruntime": onnxruntime.__version__,
        "python": sys.version.split()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/datasets")
    ap.add_argument("--settings", default=",".join(SETTINGS), help="SET:pooled|per-question,...")
    ap.add_argument("--loogle", action="store_true", help="add " + ", ".join(LOOGLE))
    ap.add_argument("--arms", default="int8,int8-exact,fp32,noise", help=f"of {','.join(ARMS)}")
    ap.add_argument("--questions", type=int, default=None, help="first N questions per set")
    ap.add_argument("--noise-scales", default="0.001,0.05", help="one noise arm per scale")
    ap.add_argument("--noise-seed", type=int, default=0)
    ap.add_argument("--speed", type=int, default=0, help="then N HotpotQA passages per arm")
    ap.add_argument("--rounds", type=int, default=3, help="--speed: rounds, best kept")
    ap.add_argument("--out", type=Path, default=None, help="JSON summary: a run added to its runs")
    args = ap.parse_args()
    names = [a for a in args.arms.split(",") if a]
    bad = [a for a in names if a not in ARMS]
    if bad:
        ap.error(f"unknown arm(s) {bad}: choose from {ARMS}")
    specs = [s for s in args.settings.split(",") if s] + (list(LOOGLE) if args.loogle else [])
    t0 = time.perf_counter()
    load = [os.getloadavg()[0]]
    scales = [float(x) for x in args.noise_scales.split(",") if x]
    arms = make_arms(names, scales, args.noise_seed)
    results = []
    for spec in specs:
        results.append(run_setting(spec, args.data, arms, args.questions))
        load.append(os.getloadavg()[0])
        print(
            f"  {spec}: done at {time.perf_counter() - t0:.0f} s (load {load[-1]:.1f})", flush=True
        )
    speed = {
        n: {
            "texts": t.texts,
            "wall_s": t.wall,
            "cpu_s": t.cpu,
            "texts_per_cpu_s": t.texts / t.cpu if t.cpu else 0.0,
        }
        for n, t in timers(arms).items()
    }
    report(results, speed)
    passages: dict[str, dict[str, float]] = {}
    if args.speed:
        corpus = load_dataset("hotpotqa_train100", args.data).documents()[: args.speed]
        passages = passage_speed(arms, [d.text for d in corpus], args.rounds)
        load.append(os.getloadavg()[0])
        rows = [
            [n, s["passages"], s["wall_s"], s["cpu_s"], s["per_cpu_s"], s["cpu_vs_int8"]]
            for n, s in passages.items()
        ]
        head = ["arm", "passages", "wall s", "CPU s", "passages/CPU s", "CPU / int8"]
        table(f"HotpotQA passages, uncached (best of {args.rounds} rounds)", head, rows)
    seconds = time.perf_counter() - t0
    print(f"\n({seconds:.0f} s, load {min(load):.1f}-{max(load):.1f})")
    if args.out:
        summary = {
            "command": " ".join(["python", *sys.argv]),
            "machine": machine(),
            "load": [min(load), max(load)],
            "seconds": round(seconds),
            "noise": {"scales": scales, "seed": args.noise_seed},
            "settings": results,
            "embedding": speed,
            "passages": passages,
        }
        runs = json.loads(args.out.read_text(encoding="utf-8"))["runs"] if args.out.exists() else []
        runs.append(summary)  # one entry per command: a file keeps the runs written to it
        args.out.write_text(json.dumps({"runs": runs}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
