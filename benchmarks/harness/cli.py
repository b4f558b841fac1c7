"""``python -m benchmarks.harness ...`` (from the repository root).

    run    bm25 / dense / ppr / remindrag side by side on one dataset and setting (and the
           frameworks' own retrievers: li_fusion, lc_ensemble, lc_graph; extra 'peers')
    curve  the learning curve (Same × N turns, Similar / Different variants, alternating)
    teach  ask, teach every question its gold passages (no LLM), ask again (+ --also SET)
    sequence  memorize 100 questions, then 100 sub-questions; re-ask the first 100
    real   the paper's protocol with a real LLM, per question (navigation, Same, Similar)
    scale  latency, RAM and disk size on synthetic graphs of growing size
    plot   PNG charts from result JSON files
    table  the Markdown tables of result JSON files
    prepare  HotpotQA / MuSiQue / 2WikiMultihopQA files as downloaded -> the format above

Each command prints a Markdown table and writes a JSON result file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from . import report
from .learning import FEEDBACKS
from .results import raw_path, write_result

DEFAULT_OUT = Path("benchmarks/results")


def _progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        default=None,
        help="directory of <set>.*.jsonl files, e.g. written by 'bench prepare' "
        "(default $REMINDRAG_BENCH_DATA)",
    )
    p.add_argument("--set", dest="set_name", required=True, help="dataset prefix")
    p.add_argument("--setting", choices=("pooled", "per-question"), default="pooled")
    p.add_argument(
        "--llm", default="none", help="none | oracle | local:PATH.gguf | provider:model (LangChain)"
    )
    p.add_argument(
        "--embedder",
        default="minilm",
        help="minilm (packaged all-MiniLM-L6-v2) | hash (tests) | a model name/path",
    )
    p.add_argument(
        "--embed-cache",
        default=_bench_cache(),
        help="directory keeping embeddings between runs ('' = off)",
    )
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--k", type=int, default=10, help="chunks retrieved per query")
    p.add_argument("--out", default=None, help="JSON result file")
    p.add_argument("--plot", action="store_true", help="also write PNG charts")


def _add_run_curve(sub: Any) -> None:
    run = sub.add_parser("run", help="methods side by side")
    _common(run)
    run.add_argument(
        "--methods",
        default="bm25,dense,ppr,remindrag",
        help="comma-separated: bm25, dense, ppr, remindrag, and the frameworks' retrievers "
        "li_fusion (LlamaIndex QueryFusionRetriever), lc_ensemble (LangChain "
        "EnsembleRetriever), lc_graph (langchain-graph-retriever; extra 'peers')",
    )
    run.add_argument(
        "--answers",
        action="store_true",
        help="ReMindRAG also answers (EM / F1 / option accuracy; needs a real LLM)",
    )
    curve = sub.add_parser("curve", help="learning curve over memorization turns")
    _common(curve)
    curve.add_argument("--turns", type=int, default=3)
    curve.add_argument(
        "--feedback",
        choices=FEEDBACKS,
        default="filter",
        help="memorize with the LLM filter, the gold passages (thumbs-up), or label-free: "
        "none-<self_memorize policy>, cite (a scripted reader citing the chunks holding the "
        "answer), llm-cite (--reader-llm answers and cites)",
    )
    curve.add_argument(
        "--reader-llm", default="local:qwen2.5-1.5b", help="the answering LLM of llm-cite"
    )
    curve.add_argument(
        "--probe-filter",
        type=int,
        default=0,
        help="llm-cite: also ask the LLM filter (not written) on the first N questions",
    )
    curve.add_argument("--record", default=None, help="llm-cite: save every reply (replay)")
    curve.add_argument(
        "--untaught",
        action="store_true",
        help="with --limit N (pooled): the set's other questions are asked read-only before "
        "and after the turns",
    )
    curve.add_argument(
        "--summary-only",
        action="store_true",
        help="write no raw/ file of per-question records (the summary is always written)",
    )
    curve.add_argument(
        "--alternating",
        type=int,
        default=6,
        help="rounds of the alternating Origin / Different protocol (0 = off)",
    )
    curve.add_argument(
        "--self-memorize",
        choices=("cache", "enhance", "full", "off"),
        default=None,
        help="policy of memorize() with no judge (zero-token filter); default: the config's",
    )


def _add_memory_protocols(sub: Any) -> None:
    teach = sub.add_parser("teach", help="teach gold passages, then ask (pooled, no LLM)")
    _common(teach)
    teach.add_argument("--also", default=None, help="another set indexed into the same graph")
    seq = sub.add_parser("sequence", help="memorize two sets in sequence (pooled, no LLM)")
    _common(seq)
    seq.add_argument("--feedback", choices=("filter", "gold"), default="gold")
    seq.add_argument("--second", type=int, default=100, help="sub-questions memorized second")


def _add_real_scale(sub: Any) -> None:
    real = sub.add_parser("real", help="the paper's protocol with a real LLM, per question")
    _common(real)
    real.add_argument("--extraction", type=int, default=0, help="also LLM-extract N passages")
    real.add_argument("--jsonl", default=None, help="append each question's record here")
    real.add_argument("--record", default=None, help="save every reply as a replay fixture")
    real.add_argument(
        "--overrides", default="{}", help="JSON of RetrievalConfig fields for the LLM walks"
    )
    scale = sub.add_parser("scale", help="latency / RAM / disk vs graph size")
    scale.add_argument("--sizes", default="1000,10000,100000,1000000")
    scale.add_argument("--queries", type=int, default=50)
    scale.add_argument("--dim", type=int, default=384)
    scale.add_argument("--no-save", action="store_true", help="skip the on-disk size")
    scale.add_argument("--out", default=None)
    scale.add_argument("--plot", action="store_true")
    scale.add_argument(
        "--ann", choices=("auto", "on", "off"), default="auto", help="the store's ann= option"
    )
    scale.add_argument("--vectors", choices=("float16", "float32"), default="float16")
    scale.add_argument(
        "--embeddings",
        choices=("random", "minilm"),
        default="random",
        help="node vectors: i.i.d. random, or drawn with real MiniLM statistics (--corpus)",
    )
    scale.add_argument(
        "--corpus",
        default=None,
        help="corpus JSONL whose MiniLM vectors give --embeddings minilm its mean and covariance",
    )
    scale.add_argument(
        "--embed-cache", default=_bench_cache(), help="directory keeping the fitted MiniLM moments"
    )


def _bench_cache() -> str:
    return os.environ.get("REMINDRAG_BENCH_CACHE", str(Path.home() / ".cache" / "remindrag-bench"))


def _add_files(sub: Any) -> None:
    pl = sub.add_parser("plot", help="PNG charts from result files")
    pl.add_argument("files", nargs="+")
    tb = sub.add_parser("table", help="Markdown tables of result files")
    tb.add_argument("files", nargs="+")
    pr = sub.add_parser(
        "prepare",
        help="convert a downloaded HotpotQA / MuSiQue / 2Wiki file into --data format",
        description="Write <out>/<name>.questions.jsonl and .corpus.jsonl from a HotpotQA "
        "(hotpot_dev_distractor_v1.json), MuSiQue (musique_ans_v1.0_dev.jsonl) or "
        "2WikiMultihopQA (dev.json) file; then: bench run --data <out> --set <name>.",
    )
    pr.add_argument("file", help="the downloaded .json / .jsonl file")
    pr.add_argument("--out", required=True, help="directory to write into (the --data DIR)")
    pr.add_argument("--name", required=True, help="dataset prefix (the --set NAME)")
    pr.add_argument("--format", choices=("auto", "hotpotqa", "musique", "2wiki"), default="auto")
    pr.add_argument("--limit", type=int, default=None, help="first N questions only")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.harness",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_run_curve, _add_memory_protocols, _add_real_scale, _add_files):
        add(sub)
    return parser


def _prepare(args: argparse.Namespace) -> int:
    from .prepare import PrepareError, prepare

    try:
        qpath, cpath, nq, nc = prepare(args.file, args.out, args.name, args.format, args.limit)
    except PrepareError as exc:
        print(f"python -m benchmarks.harness prepare: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {nq} questions to {qpath} and {nc} passages to {cpath}")
    print(f"next: python -m benchmarks.harness run --data {args.out} --set {args.name}")
    return 0


def _write(
    result: dict[str, Any], out: str | None, stem: str, plot: bool, *, keep_records: bool = True
) -> Path:
    path = Path(out) if out else DEFAULT_OUT / f"{stem}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result["command"] = _command()
    write_result(result, path, keep_records=keep_records)
    print(report.to_markdown(result))
    print(f"result: {path}", file=sys.stderr)
    if plot:
        for png in report.plot(result, path.parent, path.stem):
            print(f"plot: {png}", file=sys.stderr)
    return path


def _stem(args: argparse.Namespace, kind: str) -> str:
    llm = args.llm.split(":")[0] if args.llm.startswith("local:") else args.llm.replace(":", "-")
    return f"{kind}-{args.set_name}-{args.setting}-{llm}"


def _print_files(args: argparse.Namespace) -> int:
    for f in args.files:
        if f.endswith(".jsonl"):  # the records of a `real` run, finished or not
            from .real_report import from_jsonl, to_markdown

            print(to_markdown(from_jsonl(f)) + "\n")
            continue
        res = json.loads(Path(f).read_text(encoding="utf-8"))
        if args.command == "table":
            print(report.to_markdown(res))
            print(f"Command: `{res.get('command', '?')}`\n")
            continue
        for png in report.plot(res, Path(f).parent, Path(f).stem):
            print(png)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.command == "prepare":
        return _prepare(args)
    if args.command in ("plot", "table"):
        return _print_files(args)
    if args.command == "scale":
        from .scale import run_scale

        sizes = [int(s) for s in args.sizes.split(",")]
        ann = {"auto": None, "on": True, "off": False}[args.ann]
        moments = None
        if args.embeddings == "minilm":
            if not args.corpus:
                raise SystemExit("--embeddings minilm needs --corpus FILE.jsonl")
            from .scale_vectors import minilm_moments

            moments = str(minilm_moments(args.corpus, args.embed_cache))
        res = run_scale(
            sizes,
            queries=args.queries,
            dim=args.dim,
            save=not args.no_save,
            progress=_progress,
            moments=moments,
            ann=ann,
            vectors=args.vectors,
        )
        _write(res, args.out, "scale", args.plot)
        return 0
    from .data import load_dataset
    from .resources import make_embedder

    if args.command == "run":  # before minutes of indexing
        bad = _bad_methods(args.methods)
        if bad:
            print(f"python -m benchmarks.harness run: error: {bad}", file=sys.stderr)
            return 2
    ds = load_dataset(args.set_name, args.data).head(args.limit)
    embedder = make_embedder(args.embedder, args.embed_cache or None)
    if args.command == "real":
        return _real(args, ds, embedder)
    t0 = time.perf_counter()
    res, stem = _experiment(args, ds, embedder)
    res["seconds"] = time.perf_counter() - t0
    from .resources import machine

    res["machine"] = machine()
    res["embedder"] = args.embedder
    res["embedder_class"] = type(getattr(embedder, "inner", embedder)).__name__
    _write(res, args.out, stem, args.plot, keep_records=not getattr(args, "summary_only", False))
    return 0


def _bad_methods(methods: str) -> str:
    """What is wrong with ``--methods`` ('' when nothing): an unknown name, or a peer whose
    packages are not installed."""
    from .peers import PEER_EXTRA, PEERS, available

    names = [m.strip() for m in methods.split(",") if m.strip()]
    known = ("bm25", "dense", "ppr", "remindrag", *PEERS)
    unknown = [m for m in names if m not in known]
    if unknown or not names:
        return f"unknown method(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(known)}"
    missing = [m for m in names if m in PEERS and not available(m)]
    if missing:
        return f"{', '.join(missing)} need(s) the 'peers' extra: {PEER_EXTRA}"
    return ""


def _experiment(args: argparse.Namespace, ds: Any, embedder: Any) -> tuple[dict[str, Any], str]:
    """Run the ``run`` / ``curve`` / ``teach`` / ``sequence`` experiment; (result, file stem)."""
    from .data import load_dataset
    from .runner import run_retrieval

    if args.command in ("teach", "sequence"):
        from . import memory_bench

        if args.command == "teach":
            other = load_dataset(args.also, args.data).head(args.limit) if args.also else None
            res = memory_bench.run_teach(ds, embedder, args.k, other, _progress)
            stem = _stem(args, "teach") + (f"-also-{args.also}" if args.also else "")
        else:
            res = memory_bench.run_sequence(
                ds, embedder, args.k, args.feedback, args.second, _progress
            )
            stem = _stem(args, "sequence") + f"-{args.feedback}"
    elif args.command == "run":
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        res = run_retrieval(
            ds, args.setting, methods, args.llm, embedder, args.k, _progress, args.answers
        )
        stem = _stem(args, "run")
    else:
        res, stem = _curve(args, ds, embedder)
    return res, stem


def _curve(args: argparse.Namespace, ds: Any, embedder: Any) -> tuple[dict[str, Any], str]:
    """The learning curve; with ``llm-cite`` the reader's replies are recorded and the result
    so far is written after every phase (a long local-model run leaves partial results)."""
    from .runner import run_learning_curve

    stem = _stem(args, "curve") + f"-{args.feedback}"
    if args.self_memorize:
        stem += f"-{args.self_memorize}"
    reader, checkpoint = None, None
    if args.feedback == "llm-cite":
        from remindrag_integrations.adapters.cache import CachedLLM
        from remindrag_integrations.adapters.llm import as_chat_llm

        from .real import PrefixLog  # a RecordingLLM that reports each call
        from .resources import make_llm as load_llm

        llm = as_chat_llm(load_llm(args.reader_llm))
        if llm is None:
            raise SystemExit("--feedback llm-cite needs a reader LLM (--reader-llm)")
        if args.embed_cache:  # replies on disk: a restarted run resumes where it stopped
            llm = CachedLLM(llm, Path(args.embed_cache) / "replies", f"{args.reader_llm}@t0")
        reader = PrefixLog(llm, args.reader_llm, _progress)
        path = Path(args.out) if args.out else DEFAULT_OUT / f"{stem}.json"
        checkpoint = _checkpointer(args, path, reader)
    res = run_learning_curve(
        ds,
        args.setting,
        args.llm,
        embedder,
        args.turns,
        args.feedback,
        args.k,
        args.alternating,
        _progress,
        {"self_memorize": args.self_memorize} if args.self_memorize else None,
        reader_llm=reader,
        probe_filter=args.probe_filter,
        checkpoint=checkpoint,
        untaught=_untaught(args, ds),
    )
    if checkpoint:
        checkpoint(res)
    return res, stem


def _untaught(args: argparse.Namespace, ds: Any) -> list[dict[str, Any]]:
    """The questions of the set that ``--limit`` left out (``--untaught``)."""
    if not args.untaught or args.limit is None:
        return []
    from .data import load_dataset

    return load_dataset(args.set_name, args.data).questions[args.limit :]


def _checkpointer(args: argparse.Namespace, path: Path, log: Any) -> Any:
    def save(res: dict[str, Any]) -> None:
        partial = {**res, "partial": True, "reader_llm": args.reader_llm}
        partial_path = raw_path(path).with_suffix(".partial.json")
        partial_path.parent.mkdir(parents=True, exist_ok=True)
        partial_path.write_text(json.dumps(partial, indent=1, default=float), encoding="utf-8")
        if args.record:
            fixture = log.fixture(set=args.set_name, questions=args.limit, command=_command())
            Path(args.record).write_text(json.dumps(fixture, indent=0), encoding="utf-8")

    return save


def _command() -> str:
    return "python -m benchmarks.harness " + " ".join(sys.argv[1:])


def _real(args: argparse.Namespace, ds: Any, embedder: Any) -> int:
    from remindrag_integrations.adapters.llm import as_chat_llm

    from .real import run_real
    from .real_report import to_markdown
    from .resources import make_llm as load_llm

    llm = as_chat_llm(load_llm(args.llm))
    if llm is None:
        raise SystemExit("bench real needs an LLM (--llm local:qwen2.5-1.5b or provider:model)")
    t0 = time.perf_counter()
    res, log = run_real(
        ds,
        llm,
        embedder,
        k=args.k,
        overrides=json.loads(args.overrides),
        progress=_progress,
        jsonl=args.jsonl,
        extraction=args.extraction,
        model=args.llm,
    )
    res["seconds"] = time.perf_counter() - t0
    res["command"] = "python -m benchmarks.harness " + " ".join(sys.argv[1:])
    path = Path(args.out) if args.out else DEFAULT_OUT / f"{_stem(args, 'real')}.json"
    write_result(res, path)
    if args.record:
        fixture = log.fixture(set=ds.name, questions=len(ds.questions), command=res["command"])
        Path(args.record).write_text(json.dumps(fixture, indent=0), encoding="utf-8")
    if hasattr(embedder, "persist"):
        embedder.persist()
    print(to_markdown(res))
    print(f"result: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
