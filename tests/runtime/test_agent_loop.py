"""The agent loop over a scripted backbone and a real MCP server in a stdio subprocess."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from runtime.agent import Agent, ContextWindowTooSmall
from runtime.backbones.base import ProviderError
from runtime.backbones.scripted import ScriptedBackbone
from runtime.mcp_client import MCPServerConfig, MCPToolset
from runtime.messages import AssistantMessage, ToolResultMessage
from runtime.session import AgentConfig, Session

SERVER = Path(__file__).parent.parent / "fakes" / "mcp_tools_server.py"


@asynccontextmanager
async def tools_server(tmp_path: Path) -> AsyncIterator[MCPToolset]:
    config = MCPServerConfig(
        name="test", command=sys.executable, args=[str(SERVER), str(tmp_path / "calls.jsonl")]
    )
    async with MCPToolset([config]) as tools:
        yield tools


def _agent(backbone: ScriptedBackbone, toolset: MCPToolset | None, **config: object) -> Agent:
    session = Session.new(AgentConfig(**config), context_window=8192)  # type: ignore[arg-type]
    return Agent(session, backbone, toolset)


async def test_multi_round_tool_loop_over_stdio_mcp(tmp_path: Path) -> None:
    backbone = ScriptedBackbone(
        [
            "Let me check. "
            '<tool_call>{"name": "lookup", "arguments": {"key": "rent_2019"}}</tool_call>',
            '<tool_call>{"name": "add", "arguments": {"a": "2", "b": 3}}</tool_call>'
            '<tool_call>{"name": "lookup", "arguments": {"key": "nope"}}</tool_call>',
            "The rent in 2019 was 1,240 EUR.",
        ]
    )
    async with tools_server(tmp_path) as toolset:
        agent = _agent(backbone, toolset)
        record = await agent.turn("What was the rent in 2019?")

    assert record.reply == "The rent in 2019 was 1,240 EUR."
    assert record.rounds == 3
    assert record.parse_outcomes == ["ok", "ok", "no_call"]
    assert [(c.name, c.executed, c.is_error) for c in record.tool_calls] == [
        ("lookup", True, False),
        ("add", True, False),
        ("lookup", True, True),
    ]
    assert record.tool_calls[0].result == "1,240 EUR"
    assert record.tool_calls[1].arguments == {"a": 2, "b": 3}  # coerced from the schema
    assert record.tool_calls[1].result == "5"
    assert "unknown key" in (record.tool_calls[2].result or "")
    assert len(record.usage) == 3
    logged = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [entry["tool"] for entry in logged] == ["lookup", "add", "lookup"]

    results = [m for m in agent.session.messages if isinstance(m, ToolResultMessage)]
    assert [m.content for m in results][:2] == ["1,240 EUR", "5"]
    third_call_context = backbone.calls[2].messages
    assert any(isinstance(m, ToolResultMessage) and m.content == "5" for m in third_call_context)
    assert agent.session.ledger.current_eit == record.usage[-1].input_tokens


async def test_unparseable_or_invalid_calls_are_recorded_not_executed(tmp_path: Path) -> None:
    backbone = ScriptedBackbone(
        ['<tool_call>{"name": "lookup", "arguments": {"colour": "red"}}</tool_call> done']
    )
    async with tools_server(tmp_path) as toolset:
        record = await _agent(backbone, toolset).turn("hi")
    assert record.parse_outcomes == ["missing_required"]
    assert record.tool_calls[0].executed is False
    assert record.reply == "done"
    assert not (tmp_path / "calls.jsonl").exists()


async def test_tool_round_bound(tmp_path: Path) -> None:
    call = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}</tool_call>'
    backbone = ScriptedBackbone([call, call, call])
    async with tools_server(tmp_path) as toolset:
        record = await _agent(backbone, toolset, max_tool_rounds=2).turn("loop forever")
    assert record.stop_reason == "max_rounds"
    assert sum(c.executed for c in record.tool_calls) == 2


async def test_provider_error_rolls_back_the_turn() -> None:
    backbone = ScriptedBackbone(["first answer", ProviderError("server_error", "503 upstream")])
    agent = _agent(backbone, None)
    await agent.turn("one")
    before = list(agent.session.messages)
    with pytest.raises(ProviderError) as info:
        await agent.turn("two")
    assert info.value.kind == "server_error"
    assert agent.session.messages == before
    assert isinstance(before[-1], AssistantMessage)


def test_context_window_guard() -> None:
    session = Session.new(AgentConfig(max_output_tokens=600), context_window=1024)
    with pytest.raises(ContextWindowTooSmall, match="too small"):
        Agent(session, ScriptedBackbone([]))
