"""An agent that gets cheaper on its second session, through ``remindrag mcp``.

Two sessions, each a new ``remindrag mcp`` server process (as when a desktop assistant or an
IDE agent is restarted), talk to the same store through the MCP SDK's client. Session 1
searches, answers from the passages citing a chunk id, and calls ``remember``. Session 2 asks
the same question: the store remembered the path, so the walk is replayed from memory
(``stop: replay`` / ``found_by: replay``) and takes fewer steps (with ``--llm``, fewer LLM
calls). The "agent" here is a script, so it runs with no API key and no network.

    pip install 'remindrag-integrations[mcp]'
    python examples/mcp_agent_sessions.py                 # builds the packaged demo store
    python examples/mcp_agent_sessions.py STORE [--llm SPEC] [--question TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

QUESTION = "Lilu and Gallu spirits?"


def build_demo_store(root: Path) -> Path:
    """The 50 packaged HotpotQA passages of ``remindrag demo``, indexed (zero-token)."""
    from remindrag_integrations import ReMindRAG
    from remindrag_integrations.app.demo import load_demo_data

    docs, _ = load_demo_data()
    engine = ReMindRAG()
    engine.insert(docs)
    engine.save(root)
    return root


async def session(store: Path, question: str, extra: list[str]) -> dict[str, Any]:
    """One agent session: search, answer citing the first passage, remember."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "remindrag_integrations.app.cli", "mcp", "--store", str(store), *extra],
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        found = json.loads((await s.call_tool("search", {"query": question})).content[0].text)
        top = found["passages"][0]
        answer = f"{top['text'].split('.')[0]}. [{top['chunk_id']}]"
        wrote = await s.call_tool(
            "remember",
            {"trace_id": found["trace_id"], "answer": answer, "cited": [top["chunk_id"]]},
        )
        found["remembered"] = json.loads(wrote.content[0].text)
        return found


def report(n: int, found: dict[str, Any]) -> None:
    by = sorted({p["found_by"] for p in found["passages"]})
    print(
        f"session {n}: walk steps: {found['walk_steps']}, LLM calls: {found['llm_calls']}, "
        f"stop: {found['stop_reason']}, replayed edges: {found['replayed_edges']}, "
        f"found_by: {', '.join(by)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", nargs="?", help="a store directory (default: build the demo's)")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--llm", help="the server's --llm SPEC (default: zero-token)")
    args = parser.parse_args()
    extra = ["--llm", args.llm] if args.llm else []
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(args.store) if args.store else build_demo_store(Path(tmp) / "store")
        if args.store:  # leave the given store as it was: work on a copy
            import shutil

            store = Path(shutil.copytree(store, Path(tmp) / "store"))
        print(f"Q: {args.question}")
        for n in (1, 2):
            report(n, asyncio.run(session(store, args.question, extra)))


if __name__ == "__main__":
    main()
