"""What the MCP tests share: a small indexed store (the first HotpotQA question's 10 passages,
the packaged embedder, zero-token mode) and the SDK's client over stdio against a real
``remindrag mcp`` subprocess."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, load_jsonl

# a question that is mostly names seeds at an entity node, so its remembered path can be
# replayed (as in test_cli.py)
QUESTION = "Lilu and Gallu spirits?"
TOOLS = {
    "search",
    "remember",
    "feedback",
    "teach",
    "add_documents",
    "delete_documents",
    "list_documents",
    "stats",
}


def server_args(store: Path | str, *extra: str) -> list[str]:
    return ["-m", "remindrag_integrations.app.cli", "mcp", "--store", str(store), *extra]


def server_env() -> dict[str, str]:
    """The servers' environment; ``REMINDRAG_TEST_SERVER_PATH`` goes first on their
    ``PYTHONPATH`` (e.g. a folder holding mcp 2, while the clients here need mcp 1)."""
    root = str(Path(__file__).resolve().parent.parent)
    first = os.environ.get("REMINDRAG_TEST_SERVER_PATH")
    path = os.pathsep.join(p for p in (first, root, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": path}


@contextmanager
def serving_console(store: Path) -> Iterator[str]:
    """``remindrag serve --store STORE`` in a subprocess on a free port, once it answers:
    its base URL (the process ends with the block)."""
    import socket
    import subprocess
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "remindrag_integrations.app.cli", "serve"]
    cmd += ["--store", str(store), "--port", str(port)]
    proc = subprocess.Popen(cmd, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(base + "/api/overview").close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    raise AssertionError(f"the console did not start: {out}") from None
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def indexed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store indexed once per test session; copy it before writing (:func:`fresh_store`)."""
    from remindrag_integrations.app.cli import main

    root = tmp_path_factory.mktemp("mcp")
    (q, *_) = load_jsonl(DATA / "hotpotqa_train100_sample.questions.jsonl")
    rows = {r["pid"]: r for r in load_jsonl(DATA / "hotpotqa_train100_sample.corpus.jsonl")}
    docs = root / "docs"
    docs.mkdir()
    with open(docs / "passages.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(rows[pid]) + "\n" for pid in q["context_pids"])
    assert main(["index", str(docs), "--store", str(root / "store")]) == 0
    return root / "store"


@pytest.fixture
def fresh_store(indexed_store: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(indexed_store, tmp_path / "store"))


@asynccontextmanager
async def client(store: Path | str, *extra: str) -> AsyncIterator[Any]:
    """An initialised ``ClientSession`` to a new ``remindrag mcp`` process on ``store``."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=server_args(store, *extra), env=server_env()
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's JSON result; a tool error fails the test with its message."""
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content[0].text
    return json.loads(result.content[0].text)


async def error(session: Any, tool: str, **arguments: Any) -> str:
    """The message of a call that must fail as a tool error."""
    result = await session.call_tool(tool, arguments)
    assert result.isError, result.content
    return str(result.content[0].text)
