"""Agents on ``remindrag mcp``: a LangChain tool loop through ``langchain-mcp-adapters`` and a
LlamaIndex ``FunctionAgent`` through ``llama-index-tools-mcp``, each driven by a scripted chat
model that searches, answers citing a chunk, then calls ``remember``. Both adapters start a
server process per tool call, so ``remember`` runs in another process than ``search``. The
second session asks the same question and is served by memory."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import mcp_fixture
import pytest
from mcp_fixture import QUESTION, server_args, server_env

from remindrag_integrations.stores import SQLiteGraphStore

pytestmark = pytest.mark.packaged_embedder  # run again under drift by make test

fresh_store = mcp_fixture.fresh_store
indexed_store = mcp_fixture.indexed_store
ROOT = Path(__file__).resolve().parent.parent

TRACE = re.compile(r"trace_id\W+([0-9a-f]{32})")
CHUNK = re.compile(r"chunk_id\W+(c-[0-9a-f]+)")


def next_move(tool_outputs: list[str], question: str) -> tuple[str, dict[str, Any]] | str:
    """The scripted model: search, then remember citing the first passage, then answer."""
    if not tool_outputs:
        return "search", {"query": question}
    last = tool_outputs[-1]
    if len(tool_outputs) == 1:
        trace_id, chunk = TRACE.search(last).group(1), CHUNK.search(last).group(1)
        answer = f"Lilu is a spirit of the same kind as Gallu [{chunk}]."
        return "remember", {"trace_id": trace_id, "answer": answer, "cited": [chunk]}
    return "Lilu is a spirit [remembered]."


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)


# --- LangChain ------------------------------------------------------------------------------


def _langchain_session(store: Path) -> list[Any]:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_mcp_adapters.client import MultiServerMCPClient

    class ScriptedChat(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatResult:
            outputs = [_text(m.content) for m in messages if isinstance(m, ToolMessage)]
            move = next_move(outputs, str(messages[0].content))
            if isinstance(move, str):
                msg = AIMessage(content=move)
            else:
                call = {"name": move[0], "args": move[1], "id": f"call-{len(outputs)}"}
                msg = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=msg)])

    async def run() -> list[Any]:
        connection = {
            "transport": "stdio",
            "command": sys.executable,
            "args": server_args(store),
            "env": server_env(),
        }
        tools = {t.name: t for t in await MultiServerMCPClient({"m": connection}).get_tools()}
        model, messages = ScriptedChat(), [HumanMessage(QUESTION)]
        for _ in range(5):  # the agent loop
            ai = await model.ainvoke(messages)
            messages.append(ai)
            if not ai.tool_calls:
                break
            messages += [await tools[c["name"]].ainvoke(c) for c in ai.tool_calls]
        return messages

    return asyncio.run(run())


def test_a_langchain_agent_gets_cheaper_in_its_second_session(fresh_store: Path) -> None:
    from langchain_core.messages import ToolMessage

    first = _langchain_session(fresh_store)
    found, wrote = (json.loads(_text(m.content)) for m in first if isinstance(m, ToolMessage))
    assert wrote["applied"] and wrote["supporting_chunks"] == [found["passages"][0]["chunk_id"]]
    assert first[-1].content == "Lilu is a spirit [remembered]."

    second = _langchain_session(fresh_store)
    again = json.loads(_text(next(m for m in second if isinstance(m, ToolMessage)).content))
    assert again["stop_reason"] == "replay" or again["replayed_edges"] > 0
    assert again["walk_steps"] < found["walk_steps"]
    store = SQLiteGraphStore.load(fresh_store)
    try:
        assert store.load_trace(found["trace_id"])["memorized"]
    finally:
        store.close()


# --- LlamaIndex -----------------------------------------------------------------------------


def _llamaindex_session(store: Path) -> tuple[str, list[Any]]:
    from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        outputs = [str(m.content) for m in messages if m.role == MessageRole.TOOL]
        move = next_move(outputs, QUESTION)
        if isinstance(move, str):
            return ChatMessage(role=MessageRole.ASSISTANT, content=move)
        block = ToolCallBlock(
            tool_call_id=f"call-{len(outputs)}", tool_name=move[0], tool_kwargs=move[1]
        )
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])

    async def run() -> tuple[str, list[Any]]:
        client = BasicMCPClient(sys.executable, args=server_args(store), env=server_env())
        tools = await McpToolSpec(client).to_tool_list_async()
        agent = FunctionAgent(tools=tools, llm=MockFunctionCallingLLM(response_generator=respond))
        handler = agent.run(user_msg=QUESTION)
        results = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
        out = await handler
        return str(out.response.content), results

    with warnings.catch_warnings():  # llama_index's workflows use deprecated pydantic APIs
        warnings.simplefilter("ignore", DeprecationWarning)
        return asyncio.run(run())


def test_a_llamaindex_function_agent_gets_cheaper_in_its_second_session(
    fresh_store: Path,
) -> None:
    def payload(result: Any) -> dict[str, Any]:
        raw = result.tool_output.raw_output  # the MCP CallToolResult
        assert not raw.isError, raw.content
        return json.loads(raw.content[0].text)

    answer, results = _llamaindex_session(fresh_store)
    assert [r.tool_name for r in results] == ["search", "remember"]
    found, wrote = (payload(r) for r in results)
    assert wrote["applied"] and answer == "Lilu is a spirit [remembered]."

    _, again = _llamaindex_session(fresh_store)
    replayed = payload(again[0])
    assert replayed["stop_reason"] == "replay" or replayed["replayed_edges"] > 0
    assert replayed["walk_steps"] < found["walk_steps"]


# --- the README's example script ------------------------------------------------------------


def test_the_example_script_shows_the_second_session_cheaper(indexed_store: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_agent_sessions.py"), str(indexed_store)],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=True,
    ).stdout
    steps = [int(n) for n in re.findall(r"walk steps: (\d+)", out)]
    assert len(steps) == 2 and steps[1] < steps[0], out
    assert "found_by: replay" in out or "stop: replay" in out
