"""The ``remindrag`` command line's arguments: one small function per command."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from .demo import add_arguments as demo_arguments

Commands = dict[str, Callable[[argparse.Namespace], int]]


def store_path(value: str) -> str:
    """``--store``: a folder with ``~`` expanded (an MCP client's config passes it unexpanded,
    no shell in between), or a ``postgresql://`` DSN as it is."""
    if value.lower().startswith(("postgresql://", "postgres://")):
        return value
    return os.path.expanduser(value)


BATCH_DOCUMENTS = 1000
"""``remindrag index --batch-size``'s default (benchmarks/RESULTS.md, "A big corpus streams
in": a saved folder store is rewritten whole at each commit)."""


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {n}")
    return n


def _store_args(p: argparse.ArgumentParser, llm: bool = True) -> None:
    p.add_argument(
        "--store",
        required=True,
        type=store_path,
        help="store directory ('~' expanded), or a postgresql:// DSN (extra 'postgres')",
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
        "--cache",
        type=os.path.expanduser,
        help="LLM response cache directory (default: .remindrag-cache next to the store)",
    )
    p.add_argument("--no-cache", action="store_true", help="do not cache LLM replies")


def _index(sub: Any, commands: Commands) -> None:
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
        "--device",
        help="run the embedding model (--embeddings, or the packaged one) with "
        "sentence-transformers on this torch device: cuda, cuda:1, mps, cpu (default: the "
        "packaged model on ONNX on the CPU); the next batch is embedded while one is written",
    )
    p.add_argument(
        "--batch-size",
        type=_positive,
        default=BATCH_DOCUMENTS,
        metavar="N",
        help=f"documents written and committed together (default {BATCH_DOCUMENTS:,}); an "
        "interrupted run, started again, goes on after the last committed batch",
    )
    p.add_argument(
        "--on-extraction-error",
        choices=("raise", "fallback"),
        default="raise",
        help="a chunk whose LLM extraction fails twice: stop with nothing written (raise, "
        "default) or extract it with the rule-based extractor (fallback)",
    )
    p.set_defaults(func=commands["index"])


def _ask(sub: Any, commands: Commands) -> None:
    p = sub.add_parser(
        "ask",
        help="answer a question from a store",
        description="Retrieve, answer (the best sentence in zero-token mode) "
        "and memorize the traversal; a question no passage is relevant to gets no answer "
        "and writes no memory.",
    )
    p.add_argument("question")
    _store_args(p)
    p.add_argument("--no-memorize", action="store_true", help="do not write edge memory")
    p.add_argument(
        "--min-score",
        type=float,
        default=None,
        metavar="X",
        help="abstain (no answer, no memory) when no passage is at least this relevant "
        "(0-1; default: the store's min_score, else the recommended 0.525; 0 answers always)",
    )
    p.add_argument(
        "--filter",
        default=None,
        metavar="JSON",
        help='a metadata filter on documents, as JSON: \'{"year": {"$gte": 2020}}\' '
        "(the retriever's syntax: docs/retriever.md)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=commands["ask"])


def _inspect(sub: Any, commands: Commands) -> None:
    p = sub.add_parser(
        "inspect",
        help="graph size and memory of a store, or its document ids",
        description="Show graph size and the strongest remembered edges; --documents lists "
        "the stored document ids.",
    )
    _store_args(p, llm=False)
    p.add_argument("--top", type=int, default=10, help="edges to list (default 10)")
    p.add_argument("--query", help="rank edges by how well their memory matches this question")
    p.add_argument(
        "--documents",
        action="store_true",
        help="list the stored document ids instead, one a line, sorted (the ids delete takes)",
    )
    p.set_defaults(func=commands["inspect"], llm="none")


def _memory(sub: Any, commands: Commands) -> None:
    p = sub.add_parser(
        "memory",
        help="teach, view, reset, decay, export or import edge memory",
        description="Administer the edge memory of a store (one namespace); 'teach' "
        "writes known question / passage pairs into it (no LLM); 'view --html FILE' draws "
        "where memory lives and which past queries shaped it.",
    )
    p.add_argument("action", choices=("teach", "view", "reset", "decay", "export", "import"))
    p.add_argument(
        "path",
        nargs="?",
        help="teach: a .jsonl file, one {question, chunk_ids | doc_ids | texts} a line",
    )
    _store_args(p, llm=False)
    p.add_argument("--factor", type=float, help="decay: scale every memory vector by F in [0, 1]")
    p.add_argument("--file", help="export / import: a JSON file")
    p.add_argument(
        "--skip-unknown",
        action="store_true",
        help="import: leave out edges the store does not have",
    )
    p.add_argument("--html", help="view: the HTML page to write")
    p.add_argument(
        "--traces", type=int, default=1000, help="view: the newest N saved traces (default 1000)"
    )
    p.set_defaults(func=commands["memory"], llm="none")


def _trace(sub: Any, commands: Commands) -> None:
    p = sub.add_parser(
        "trace",
        help="show one retrieval (text, or an HTML picture)",
        description="Print a trace (seeds, replayed edges, moves, chunks, memory "
        "update), or render it as a self-contained HTML file with --html.",
    )
    p.add_argument("trace_id")
    _store_args(p, llm=False)
    p.add_argument("--html", help="write an HTML picture to this file instead of printing")
    p.set_defaults(func=commands["trace"], llm="none")


def _demo(sub: Any, commands: Commands) -> None:
    p = sub.add_parser(
        "demo",
        help="index the packaged corpus and show memory at work",
        description="Index 50 packaged HotpotQA passages, ask, memorize, ask "
        "again, and show how memory replay cut the traversal.",
    )
    demo_arguments(p)
    p.set_defaults(func=commands["demo"])


def _mcp(sub: Any, commands: Commands) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve a store to agents over the Model Context Protocol (extra 'mcp')",
        description="Serve a store to MCP clients (desktop assistants, IDE agents, LangChain, "
        "LlamaIndex): tools search, remember, feedback, teach, add_documents, "
        "delete_documents, list_documents, stats; resources trace://{id} and memory://view. "
        "Memory written through one server is seen by the next, and by other servers on the "
        "same store.",
    )
    _store_args(p)
    p.add_argument(
        "--read-only",
        action="store_true",
        help="search, list_documents and stats only: no tool that writes",
    )
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST defaults "
        "to 127.0.0.1; any other address needs a token)",
    )
    p.add_argument(
        "--token",
        help="bearer token every HTTP request must carry (default: $REMINDRAG_MCP_TOKEN)",
    )
    p.set_defaults(func=commands["mcp"])


def _serve(sub: Any, commands: Commands) -> None:
    p = sub.add_parser(
        "serve",
        help="a web console over a store: look at and correct its memory (extra 'console')",
        description="Serve a local web console over a live store (docs/look-inside.md): "
        "overview, graph, queries, corrections (forget, feedback, teach, ask; each recorded "
        "in the store and undoable) and documents. Other processes' writes to the store "
        "show on the next page load.",
    )
    _store_args(p)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; any other needs --token)",
    )
    p.add_argument("--port", type=int, default=8766, help="port (default 8766)")
    p.add_argument(
        "--token",
        help="token every request must carry: 'Authorization: Bearer T', or open the page "
        "once with ?token=T (default: $REMINDRAG_CONSOLE_TOKEN)",
    )
    p.set_defaults(func=commands["serve"])


def build(commands: Commands) -> argparse.ArgumentParser:
    """The parser; ``commands`` maps each command name to the function that runs it."""
    parser = argparse.ArgumentParser(
        prog="remindrag", description="ReMindRAG: a knowledge-graph retriever with memory."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_index, _ask, _inspect, _memory, _trace, _mcp, _serve, _demo):
        add(sub, commands)
    return parser
