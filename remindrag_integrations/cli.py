"""The ``remindrag`` command line: index, ask, inspect, trace, demo, bench.

A store is a directory written by :meth:`ReMindRAG.save`; the CLI adds ``cli.json`` to it
(the embedding model the store was built with). LLM replies are cached on disk under
``--cache`` (default ``.remindrag-cache`` next to the store).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .config import IndexConfig
from .demo import add_arguments as demo_arguments
from .types import Document, ReMindError

CLI_FILE = "cli.json"
TEXT_SUFFIXES = (".txt", ".md")
EXPECTED_COMPLETION_TOKENS = 200  # a typical extraction reply (title, entities, triples)


class CLIError(ReMindError):
    """A user error the CLI reports in one line (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# LLM, embeddings, store


def load_llm(spec: str | None) -> Any:
    """``none`` (zero-token), ``local:smollm2`` / ``local:gemma3`` / ``local:PATH.gguf``, or
    ``provider:model`` through LangChain's ``init_chat_model``."""
    if spec is None or spec.lower() == "none":
        return None
    provider, sep, model = spec.partition(":")
    if not sep or not model:
        raise CLIError(f"--llm {spec!r}: expected 'none', 'local:PATH.gguf' or 'provider:model'")
    if provider == "local":
        try:
            from .local_llm import LlamaCppChatModel, resolve_model_path
        except ImportError as exc:
            raise CLIError(f"--llm local:... needs the 'local' extra ({exc})") from exc
        resolve_model_path(model)  # fail now, not at the first call
        return LlamaCppChatModel(model_path=model)
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise CLIError(
            f"--llm {spec}: needs LangChain's init_chat_model: pip install langchain "
            f"langchain-{provider} (and that provider's API key)"
        ) from exc
    try:
        return init_chat_model(model, model_provider=provider)
    except Exception as exc:  # missing provider package, missing key, unknown provider
        raise CLIError(f"--llm {spec}: {type(exc).__name__}: {exc}") from exc


def cached(llm: Any, spec: str, cache_dir: Path | None) -> Any:
    """The engine-facing LLM, wrapped in the on-disk response cache unless disabled."""
    from .cache import CachedLLM
    from .llms import as_chat_llm

    chat = as_chat_llm(llm)
    if chat is None or cache_dir is None:
        return chat
    # the key covers what changes a reply: the spec and the model's own settings
    params = getattr(llm, "_identifying_params", None) or {}
    model_id = f"{spec} {json.dumps(params, sort_keys=True, default=str)}"
    return CachedLLM(chat, cache_dir, model_id=model_id)


def _is_dsn(args: argparse.Namespace) -> bool:
    from .stores import is_postgres_dsn

    return is_postgres_dsn(args.store)


def _cache_dir(args: argparse.Namespace) -> Path | None:
    if args.no_cache:
        return None
    if args.cache:
        return Path(args.cache)
    base = Path.cwd() if _is_dsn(args) else Path(args.store).resolve().parent
    return base / ".remindrag-cache"


def _settings(args: argparse.Namespace, engine: Any = None) -> dict[str, Any]:
    """What the CLI remembers about a store (the embedding model it was built with): in
    ``cli.json`` of a store directory, or in the namespace's settings on PostgreSQL."""
    if engine is not None and _is_dsn(args):
        return dict(engine.store.settings())
    path = Path(args.store) / CLI_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def open_engine(args: argparse.Namespace, create: bool = False) -> Any:
    from .engine import ReMindRAG
    from .stores import InMemoryGraphStore, open_store

    llm = cached(
        load_llm(getattr(args, "llm", "none")), getattr(args, "llm", "none"), _cache_dir(args)
    )
    index_cfg = IndexConfig(on_extraction_error=getattr(args, "on_extraction_error", "raise"))
    if _is_dsn(args):
        store: Any = open_store(args.store, namespace=args.namespace)  # PostgresGraphStore
        embeddings = getattr(args, "embeddings", None) or store.settings().get("embeddings")
        if not create and not store.counts()["documents"]:
            raise CLIError(
                f"namespace {args.namespace!r} at {args.store} is empty: "
                "run 'remindrag index PATH --store DSN' first"
            )
        return ReMindRAG(llm=llm, embeddings=embeddings, store=store, index_config=index_cfg)
    root = Path(args.store)
    embeddings = getattr(args, "embeddings", None) or _settings(args).get("embeddings")
    if (root / "engine.json").exists():
        engine = ReMindRAG.load(root, llm=llm, embeddings=embeddings)
        if engine.store.namespace != args.namespace:
            raise CLIError(
                f"the store at {root} holds namespace {engine.store.namespace!r}, "
                f"not {args.namespace!r}: use one directory per namespace"
            )
        engine.index_config = engine.index_config.with_overrides(
            on_extraction_error=index_cfg.on_extraction_error
        )
        return engine
    if not create:
        raise CLIError(f"no store at {root}: run 'remindrag index PATH --store {root}' first")
    return ReMindRAG(
        llm=llm,
        embeddings=embeddings,
        index_config=index_cfg,
        store=InMemoryGraphStore(namespace=args.namespace),
    )


def save_engine(engine: Any, args: argparse.Namespace) -> None:
    """Persist what a command changed (PostgreSQL writes through; a directory is saved)."""
    embeddings = getattr(args, "embeddings", None) or _settings(args, engine).get("embeddings")
    if _is_dsn(args):
        if embeddings:
            engine.store.update_settings({"embeddings": embeddings})
        return
    engine.save(args.store)
    if embeddings:
        (Path(args.store) / CLI_FILE).write_text(
            json.dumps({"embeddings": embeddings}), encoding="utf-8"
        )


# ---------------------------------------------------------------------------------------------
# index


def read_documents(paths: Sequence[str]) -> Iterator[Document]:
    """Documents from .txt / .md files (one each) and .jsonl files (one per line, with
    ``text`` and optionally ``id`` / ``pid`` and ``title``); folders are walked."""
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise CLIError(f"no such file or folder: {root}")
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for f in files:
            if f.suffix in TEXT_SUFFIXES:
                yield Document(str(f), f.read_text(encoding="utf-8"), {"source": str(f)})
            elif f.suffix == ".jsonl":
                yield from _jsonl_documents(f)
            elif not root.is_dir():
                raise CLIError(f"{f}: only .txt, .md and .jsonl files can be indexed")


def _jsonl_documents(path: Path) -> Iterator[Document]:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text = row["text"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CLIError(f"{path}:{n}: expected a JSON object with 'text' ({exc})") from exc
        doc_id = str(row.get("id") or row.get("pid") or f"{path}:{n}")
        title = row.get("title")
        if title and not text.startswith(title):
            text = f"{title}\n{text}"
        yield Document(doc_id, text, {"source": str(path), "title": title or doc_id})


def estimate_cost(engine: Any, docs: Sequence[Document]) -> dict[str, int]:
    """Expected extraction cost of the documents that would be (re)indexed."""
    from . import indexing
    from .prompts import EXTRACTION_PROMPT
    from .text import count_tokens

    fresh = [d for d in docs if engine.store.document_hash(d.id) != indexing.content_hash(d)]
    chunks = [c for d in fresh for c in indexing.make_chunks(d, engine.index_config)]
    calls = len(chunks) if engine.llm is not None else 0
    prompt = sum(count_tokens(EXTRACTION_PROMPT.format(text=c.text)) for c in chunks)
    return {
        "documents": len(fresh),
        "chunks": len(chunks),
        "llm_calls": calls,
        "prompt_tokens": prompt if calls else 0,
        "completion_tokens": calls * EXPECTED_COMPLETION_TOKENS,
    }


def progress_bar(desc: str) -> Any:
    """An ``insert(progress=...)`` callback drawing a tqdm bar (on stderr)."""
    from tqdm import tqdm

    bar = tqdm(desc=desc, unit="chunk", file=sys.stderr, disable=None)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def cmd_index(args: argparse.Namespace) -> int:
    docs = list(read_documents(args.paths))
    if not docs:
        raise CLIError("no .txt, .md or .jsonl documents found")
    engine = open_engine(args, create=True)
    est = estimate_cost(engine, docs)
    print(
        f"to index: {est['documents']} documents ({len(docs) - est['documents']} unchanged), "
        f"{est['chunks']} chunks"
    )
    print(
        f"estimated cost: {est['llm_calls']} LLM calls, ~{est['prompt_tokens']:,} prompt + "
        f"~{est['completion_tokens']:,} completion tokens"
        + (" (zero-token mode)" if engine.llm is None else "")
    )
    report = engine.insert(docs, progress=progress_bar("indexing"))
    save_engine(engine, args)
    c = report.costs
    print(
        f"indexed {report.documents} documents, {report.chunks} chunks: "
        f"{report.entities_added} entities (+{report.entities_merged} merged), "
        f"{report.relations} relations"
    )
    print(
        f"actual cost: {c.total_calls} LLM calls, {c.total_tokens:,} tokens" + _cache_note(engine)
    )
    print(f"store: {args.store}")
    return 0


def _cache_note(engine: Any) -> str:
    hits = getattr(engine.llm, "hits", None)
    return f" ({hits} replies from the cache)" if hits else ""


# ---------------------------------------------------------------------------------------------
# ask, inspect, trace


def describe_path(engine: Any, trace: Any) -> list[str]:
    """One line per seed, replayed edge and move of a trace."""
    store = engine.store

    def name(node_id: str | None) -> str:
        return store.get_node(node_id).name[:60] if node_id else "?"

    lines = [f"seed     {name(s)}" for s in trace.seeds]
    for eid in trace.replayed_edges:
        e = store.get_edge(eid)
        lines.append(f"replay   {name(e.u)} -- {name(e.v)}")
    for m in trace.moves:
        if m.action == "invalid":
            lines.append(f"invalid  {m.note[:80]}")
        elif m.action != "read":
            lines.append(f"{m.action:<8} {name(m.from_node)} -> {name(m.node_id)}")
    lines.append(f"stop     {trace.stop_reason}")
    return lines


def cmd_ask(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    answer = engine.answer(args.question)
    retrieval, trace = answer.retrieval, answer.retrieval.trace
    write = None if args.no_memorize else engine.memorize(answer.trace_id, answer.text)
    save_engine(engine, args)
    result = {
        "answer": answer.text,
        "citations": answer.citations,
        "passages": [
            {
                "chunk": rc.chunk.id,
                "doc": rc.chunk.doc_id,
                "score": round(rc.score, 4),
                "source": rc.source,
                "text": rc.chunk.text,
            }
            for rc in retrieval.chunks
        ],
        "trace_id": trace.trace_id,
        "decisions": trace.decisions,
        "replayed_edges": len(trace.replayed_edges),
        "stop_reason": trace.stop_reason,
        "llm_calls": trace.costs.total_calls,
        "tokens": trace.costs.total_tokens,
        "memorized": bool(write and write.applied),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"answer: {answer.text}\n")
    print("passages:")
    for rc in retrieval.chunks:
        mark = "*" if rc.chunk.id in answer.citations else " "
        text = " ".join(rc.chunk.text.split())
        print(
            f" {mark}[{rc.chunk.id}] {rc.chunk.doc_id} ({rc.source}, {rc.score:.2f}): {text[:160]}"
        )
    print("\npath:")
    for line in describe_path(engine, trace):
        print(f"  {line}")
    print(
        f"\ncost: {trace.costs.total_calls} LLM calls, {trace.costs.total_tokens:,} tokens "
        f"({result['decisions']} traversal decisions){_cache_note(engine)}"
    )
    if write is not None:
        status = (
            f"{len(write.enhanced)} edges enhanced, {len(write.penalised)} penalised"
            if write.applied
            else f"skipped ({write.skipped_reason})"
        )
        print(f"memory: {status}")
    print(f"trace: {trace.trace_id}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    counts = engine.store.counts()
    print("graph: " + ", ".join(f"{v:,} {k}" for k, v in counts.items()))
    print(f"memory: {engine.store.touched_edges():,} touched edges")
    rows = engine.inspect_memory(args.top, args.query)
    if rows:
        how = f"alignment with {args.query!r}" if args.query else "memory norm"
        print(f"strongest remembered edges ({how}; cluster = group of similar past queries):")
        for r in rows:
            print(
                f"  {r['score']:.3f}  [{r['cluster']}]  {r['u_name'][:50]} --[{r['kind']}]-- "
                f"{r['v_name'][:50]}"
            )
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    if args.action == "reset":
        print(f"forgot the memory of {engine.reset_memory():,} edges")
    elif args.action == "decay":
        if args.factor is None or not 0.0 <= args.factor <= 1.0:
            raise CLIError("decay needs --factor F with 0 <= F <= 1")
        print(f"scaled the memory of {engine.decay_memory(args.factor):,} edges by {args.factor}")
    elif args.action == "export":
        if not args.file:
            raise CLIError("export needs --file PATH")
        print(f"wrote {engine.export_memory(args.file):,} memory vectors to {args.file}")
        return 0
    else:
        if not args.file:
            raise CLIError("import needs --file PATH")
        n = engine.import_memory(args.file, skip_unknown=args.skip_unknown)
        print(f"loaded {n:,} memory vectors from {args.file}")
    save_engine(engine, args)
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from .html_trace import render_trace

    engine = open_engine(args)
    trace = engine.trace(args.trace_id)
    out = Path(args.html)
    out.write_text(render_trace(engine.store, trace), encoding="utf-8")
    print(f"wrote {out} ({len(trace.parents)} nodes, {len(trace.moves)} moves)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(args)


def cmd_bench(args: argparse.Namespace) -> int:
    try:
        from .bench.cli import main as bench_main
    except ImportError as exc:
        raise CLIError(f"the benchmark package is not available ({exc})") from exc
    return int(bench_main(args.bench_args) or 0)


# ---------------------------------------------------------------------------------------------
# parser


def _store_args(p: argparse.ArgumentParser, llm: bool = True) -> None:
    p.add_argument(
        "--store", required=True, help="store directory, or a postgresql:// DSN (extra 'postgres')"
    )
    p.add_argument(
        "--namespace",
        default="default",
        help="tenant whose graph and memory to use (default: 'default')",
    )
    if llm:
        p.add_argument(
            "--llm",
            default="none",
            help="'none' (zero-token, default), 'local:smollm2', 'local:gemma3', "
            "'local:PATH.gguf' or 'provider:model' (LangChain init_chat_model)",
        )
    p.add_argument(
        "--cache", help="LLM response cache directory (default: .remindrag-cache next to the store)"
    )
    p.add_argument("--no-cache", action="store_true", help="do not cache LLM replies")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remindrag", description="ReMindRAG: a knowledge-graph retriever with memory."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "index",
        help="index .txt / .md / .jsonl files or folders",
        description="Index files or folders into a store (incremental: "
        "unchanged documents are skipped).",
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    _store_args(p)
    p.add_argument(
        "--embeddings",
        help="sentence-transformers model name or path (default: packaged all-MiniLM-L6-v2)",
    )
    p.add_argument(
        "--on-extraction-error",
        choices=("raise", "fallback"),
        default="raise",
        help="a chunk whose LLM extraction fails twice: stop with nothing written (raise, "
        "default) or extract it with the rule-based extractor (fallback)",
    )
    p.set_defaults(func=cmd_index)

    p = sub.add_parser(
        "ask",
        help="answer a question from a store",
        description="Retrieve, answer (the best sentence in zero-token mode) "
        "and memorize the traversal.",
    )
    p.add_argument("question")
    _store_args(p)
    p.add_argument("--no-memorize", action="store_true", help="do not write edge memory")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser(
        "inspect",
        help="graph size and memory of a store",
        description="Show graph size and the strongest remembered edges.",
    )
    _store_args(p, llm=False)
    p.add_argument("--top", type=int, default=10, help="edges to list (default 10)")
    p.add_argument("--query", help="rank edges by how well their memory matches this question")
    p.set_defaults(func=cmd_inspect, llm="none")

    p = sub.add_parser(
        "memory",
        help="reset, decay, export or import edge memory",
        description="Administer the edge memory of a store (one namespace).",
    )
    p.add_argument("action", choices=("reset", "decay", "export", "import"))
    _store_args(p, llm=False)
    p.add_argument("--factor", type=float, help="decay: scale every memory vector by F in [0, 1]")
    p.add_argument("--file", help="export / import: a JSON file")
    p.add_argument(
        "--skip-unknown",
        action="store_true",
        help="import: leave out edges the store does not have",
    )
    p.set_defaults(func=cmd_memory, llm="none")

    p = sub.add_parser(
        "trace",
        help="write an HTML picture of one retrieval",
        description="Render a trace (seeds, replayed edges, moves, memory "
        "updates) as a self-contained HTML file.",
    )
    p.add_argument("trace_id")
    _store_args(p, llm=False)
    p.add_argument("--html", required=True, help="output .html file")
    p.set_defaults(func=cmd_trace, llm="none")

    p = sub.add_parser(
        "demo",
        help="index the packaged corpus and show memory at work",
        description="Index 50 packaged HotpotQA passages, ask, memorize, ask "
        "again, and show how memory replay cut the traversal.",
    )
    demo_arguments(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "bench",
        help="run the benchmarks (remindrag_integrations.bench)",
        description="Run the benchmarks; options go to the benchmark CLI.",
    )
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="options passed to the bench")
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "bench" and args.bench_args[:1] == ["--"]:
        args.bench_args = args.bench_args[1:]
    try:
        return int(args.func(args))
    except (CLIError, ReMindError) as exc:
        print(f"remindrag {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
