"""The ``remindrag`` command line: index, ask, inspect, memory, trace, mcp, serve, demo. (The
benchmark harness is not part of the library: ``python -m benchmarks.harness`` in a checkout.)

A store is a directory holding an SQLite database (``ReMindRAG(store=DIR)``: every write is
committed as it is made, and commands on one store may run at once) or a PostgreSQL DSN; the
CLI keeps the embedding model the store was built with in its settings. LLM replies are cached
on disk under ``--cache`` (default ``.remindrag-cache`` next to the store).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.config import RECOMMENDED_MIN_SCORE
from ..core.errors import ReMindError
from . import parser
from .display import describe_path, progress_bar
from .documents import Sources, scan
from .session import open_engine, save_engine
from .specs import CLIError


def cmd_index(args: argparse.Namespace) -> int:
    found = scan(args.paths)
    if not found.files:
        _print_skipped(found.skipped)
        raise CLIError("no readable documents found (.txt, .md, .jsonl; .pdf, .docx, .csv, .html)")
    made = _new_folder_store(args)
    engine = open_engine(args, create=True)
    size = args.batch_size
    # every document read and checked once before anything is written (a bad .jsonl line
    # stops here, not after hours of indexing), one batch at a time: the cost, and the total
    try:
        est, total = _estimate(engine, found, size)
        _print_skipped(found.skipped)
        if not total:
            raise CLIError(
                "no readable documents found (.txt, .md, .jsonl; .pdf, .docx, .csv, .html)"
            )
    except BaseException:
        _close_unwritten(engine, args, made)
        raise
    print(
        f"to index: {est['documents']} documents ({total - est['documents']} unchanged), "
        f"{est['chunks']} chunks, in batches of {size:,} documents"
    )
    print(
        f"estimated cost: {est['llm_calls']} LLM calls, ~{est['prompt_tokens']:,} prompt + "
        f"~{est['completion_tokens']:,} completion tokens"
        + (" (zero-token mode)" if engine.llm is None else ""),
        flush=True,
    )

    def commit(batch: Any) -> None:  # each batch is one transaction, committed already
        del batch

    report = engine.insert_stream(
        found.documents(),
        batch_documents=size,
        total=total,
        progress=lambda p: print(f"committed {p}", flush=True),
        on_batch=commit,
    )
    save_engine(engine, args)  # the embedding model in the store's settings; closed
    c = report.costs
    print(
        f"indexed {report.documents} documents, {report.chunks} chunks: "
        f"{report.entities_added} entities (+{report.entities_merged} merged), "
        f"{report.relations} relations"
    )
    if report.empty_documents:
        print(f"skipped {len(report.empty_documents)} empty: {', '.join(report.empty_documents)}")
    print(
        f"actual cost: {c.total_calls} LLM calls, {c.total_tokens:,} tokens" + _cache_note(engine)
    )
    print(f"store: {args.store}")
    return 0


def _new_folder_store(args: argparse.Namespace) -> bool | None:
    """For a folder store not made yet, whether its folder is missing too; else None."""
    from ..stores import SQLiteGraphStore, is_postgres_dsn

    if is_postgres_dsn(args.store) or SQLiteGraphStore.exists(args.store):
        return None
    return not Path(args.store).exists()


def _close_unwritten(engine: Any, args: argparse.Namespace, made: bool | None) -> None:
    """Close the store of an index that stopped before writing; one this command made
    (``made``: see :func:`_new_folder_store`) is removed again while no write reached it, so a
    first index stopped by a bad line leaves no empty store that the next command would open."""
    from ..stores import sqlite_store

    engine.close()
    root = Path(args.store)
    if made is None or sqlite_store.change_seq(root) != 0:
        return
    for suffix in ("", "-wal", "-shm"):
        (root / f"{sqlite_store.DB_FILE}{suffix}").unlink(missing_ok=True)
    if made and not any(root.iterdir()):
        root.rmdir()


def _estimate(engine: Any, found: Sources, size: int) -> tuple[dict[str, int], int]:
    """What indexing ``found`` costs (summed over batches of ``size`` documents, each
    planned against the store) and how many documents it holds."""
    from ..core.stream import batched

    est: dict[str, int] = {}
    total = 0
    for docs, failure in batched(found.documents(), size):
        if failure is not None:
            engine.store.close()
            raise failure
        total += len(docs)
        for k, v in engine.estimate_insert(docs).items():
            est[k] = est.get(k, 0) + v
    keys = ("documents", "chunks", "llm_calls", "prompt_tokens", "completion_tokens")
    return {k: est.get(k, 0) for k in keys}, total


def _print_skipped(skipped: dict[str, str]) -> None:
    if skipped:
        print(f"cannot read {len(skipped)} file(s), skipped:")
        for name, why in skipped.items():
            print(f"  {name}: {why}")


def _cache_note(engine: Any) -> str:
    hits = getattr(engine.llm, "hits", None)
    return f" ({hits} replies from the cache)" if hits else ""


# ---------------------------------------------------------------------------------------------
# ask, inspect, trace


def _filter_arg(text: str) -> dict[str, Any]:
    """``--filter``'s JSON as a dict (NaN / Infinity refused by name, as over MCP)."""

    def no_constant(name: str) -> Any:
        raise CLIError(f"--filter holds {name}, which is no finite number: give a finite one")

    try:
        value = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise CLIError(f"--filter is not JSON ({exc}): e.g. --filter '{{\"year\": 2021}}'") from exc
    if not isinstance(value, dict):
        raise CLIError(f'--filter is a JSON object like {{"year": 2021}}, got {text!r}')
    return value


def cmd_ask(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    floor = args.min_score
    if floor is None:
        floor = engine.retrieval_config.min_score
    if floor is None:
        floor = RECOMMENDED_MIN_SCORE
    if not 0.0 <= floor <= 1.0:
        raise CLIError(f"--min-score must be in [0, 1] (a passage's relevance), got {floor}")
    overrides: dict[str, Any] = {"min_score": floor}
    if args.filter is not None:
        overrides["filter"] = _filter_arg(args.filter)
    answer = engine.answer(args.question, **overrides)
    retrieval, trace = answer.retrieval, answer.retrieval.trace
    write = None if args.no_memorize else engine.memorize(answer.trace_id, answer.text)
    save_engine(engine, args)
    best = max((e.get("relevance", 0.0) for e in trace.rank_evidence.values()), default=0.0)
    result = {
        "answer": answer.text,
        "abstained": trace.abstained,
        "min_score": floor,
        "best_score": round(best, 4),
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
        "memory": write.to_dict() if write is not None else None,
        "seeds": trace.seeds,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    if trace.abstained:
        print(
            f"answer: nothing relevant found: no passage reaches min_score {floor:.2f} "
            f"(the best scores {best:.2f}); nothing was memorized. --min-score 0 answers "
            "from the closest passages anyway."
        )
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


def _format_of(args: argparse.Namespace) -> str:
    """Which format the store is kept in (the older one was converted when it was opened)."""
    from ..stores import is_postgres_dsn, sqlite_store

    if is_postgres_dsn(args.store):
        return "PostgreSQL"
    root = Path(args.store)
    backup = (root / sqlite_store.BACKUP).is_dir()
    return f"SQLite database, WAL ({sqlite_store.DB_FILE}, format {sqlite_store.FORMAT})" + (
        f"; converted from the generations format (kept in {sqlite_store.BACKUP}/)"
        if backup
        else ""
    )


def cmd_inspect(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    if getattr(args, "documents", False):  # one id a line: `| wc -l`, `| grep`
        for doc_id in engine.document_ids():
            print(doc_id)
        return 0
    counts = engine.store.counts()
    print(f"format: {_format_of(args)}")
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


def cmd_teach(engine: Any, path: str | None) -> None:
    """``memory teach FILE.jsonl``: one pair a line, ``question`` plus ``chunk_ids``,
    ``doc_ids`` and / or ``texts``; every line is checked before anything is written."""
    from ..core.memory.teach import read_pairs

    if not path:
        raise CLIError("teach needs a FILE.jsonl of question / passages pairs")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {path}: {exc}") from None
    report = engine.teach(read_pairs(lines, f"{path}: "), progress=progress_bar("teaching", "pair"))
    print(report.summary())


def cmd_memory(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    if args.action == "view":
        return _memory_view(engine, args)
    if args.action == "teach":
        cmd_teach(engine, args.path or args.file)
    elif args.action == "reset":
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


def _memory_view(engine: Any, args: argparse.Namespace) -> int:
    from ..core.types import Trace
    from .memory_view import render_memory_view

    if not args.html:
        raise CLIError("view needs --html PATH (the page to write)")
    traces = [Trace.from_dict(t) for t in engine.store.recent_traces(args.traces)]
    out = Path(args.html)
    out.write_text(render_memory_view(engine.store, traces), encoding="utf-8")
    shaped = sum(t.memorized for t in traces)
    print(f"wrote {out} ({engine.store.touched_edges():,} remembered edges, {shaped} queries)")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    engine = open_engine(args)
    trace = engine.trace(args.trace_id)
    if args.html:
        from .html_trace import render_trace

        out = Path(args.html)
        out.write_text(render_trace(engine.store, trace), encoding="utf-8")
        print(f"wrote {out} ({len(trace.parents)} nodes, {len(trace.moves)} moves)")
        return 0
    print(f"query: {trace.query}")
    print(f"trace: {trace.trace_id} ({len(trace.parents)} nodes, {len(trace.moves)} moves)")
    for line in describe_path(engine, trace):
        print(f"  {line}")
    print("chunks:")
    for cid in trace.chunk_ids:
        chunk = engine.store.get_chunk(cid)
        print(f"  [{cid}] {chunk.doc_id}: {' '.join(chunk.text.split())[:120]}")
    result = trace.memory_result or {}
    print(
        f"memory: {len(result.get('enhanced', []))} edges enhanced, "
        f"{len(result.get('penalised', []))} penalised"
        if trace.memorized
        else "memory: not memorized"
    )
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_server import serve

    return serve(args)


def cmd_serve(args: argparse.Namespace) -> int:
    from .console.server import serve

    return serve(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(args)


# ---------------------------------------------------------------------------------------------
# parser


def build_parser() -> argparse.ArgumentParser:
    """The ``remindrag`` argument parser, each command bound to its function."""
    return parser.build(
        {
            "index": cmd_index,
            "ask": cmd_ask,
            "inspect": cmd_inspect,
            "memory": cmd_memory,
            "trace": cmd_trace,
            "mcp": cmd_mcp,
            "serve": cmd_serve,
            "demo": cmd_demo,
        }
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except (CLIError, ReMindError) as exc:
        print(f"remindrag {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `remindrag inspect | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
