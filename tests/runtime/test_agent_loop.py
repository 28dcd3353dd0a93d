"""The agent loop over a scripted backbone and a real MCP server in a stdio subprocess."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from runtime.agent import Agent, ContextWindowTooSmall
from runtime.backbones import LiteLLMBackbone
from runtime.backbones.base import Backbone, ProviderError
from runtime.backbones.scripted import ScriptedBackbone
from runtime.mcp_client import MCPServerConfig, MCPToolset
from runtime.messages import AssistantMessage, ToolResultMessage
from runtime.session import AgentConfig, Session
from tests.fakes.openai_server import FakeOpenAIServer, reply, tool_call_reply

SERVER = Path(__file__).parent.parent / "fakes" / "mcp_tools_server.py"


@asynccontextmanager
async def tools_server(tmp_path: Path) -> AsyncIterator[MCPToolset]:
    config = MCPServerConfig(
        name="test", command=sys.executable, args=[str(SERVER), str(tmp_path / "calls.jsonl")]
    )
    async with MCPToolset([config]) as tools:
        yield tools


def _agent(backbone: Backbone, toolset: MCPToolset | None, **config: object) -> Agent:
    session = Session.new(AgentConfig(**config), context_window=8192)  # type: ignore[arg-type]
    return Agent(session, backbone, toolset)


async def test_multi_round_tool_loop_over_stdio_mcp(tmp_path: Path) -> None:
    backbone = ScriptedBackbone(
        [
            "Let me check. "
            '<tool_call>{"name": "lookup", "arguments": {"key": "rent_2019"}}</tool_call>',
            '<tool_call>{"name": "add", "arguments": {"a": 2.0, "b": 3}}</tool_call>'
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
    assert record.tool_calls[1].arguments == {"a": 2, "b": 3}  # 2.0 is the integer 2 in JSON
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


SCHEMA_ERROR = (
    "An error occurred while running the tool. Please try again. Error: Invalid arguments for "
    "tool lookup: missing required argument(s): key"
)


async def test_a_call_failing_the_schema_is_answered_with_a_tool_error(tmp_path: Path) -> None:
    """As the OpenAI Agents SDK does: the call is not run, the model gets a tool error saying
    what was wrong and one more round, and the record says the error was returned."""
    backbone = ScriptedBackbone(
        [
            '<tool_call>{"name": "lookup", "arguments": {"colour": "red"}}</tool_call> done',
            '<tool_call>{"name": "lookup", "arguments": {"key": "rent_2019"}}</tool_call>',
            "It was 1,240 EUR.",
        ]
    )
    async with tools_server(tmp_path) as toolset:
        record = await _agent(backbone, toolset).turn("hi")
    assert record.parse_outcomes == ["missing_required", "ok", "no_call"]
    assert (record.reply, record.stop_reason, record.rounds) == ("It was 1,240 EUR.", "final", 3)
    refused, ran = record.tool_calls
    assert (refused.label, refused.executed, refused.error_returned) == (
        "missing_required",
        False,
        True,
    )
    assert (refused.result, refused.is_error) == (SCHEMA_ERROR, True)
    assert (ran.executed, ran.error_returned, ran.result) == (True, False, "1,240 EUR")
    second = backbone.calls[1].messages
    assistant, answer = second[-2], second[-1]
    assert isinstance(assistant, AssistantMessage) and isinstance(answer, ToolResultMessage)
    assert answer.tool_call_id == assistant.tool_calls[0].id
    assert (answer.content, answer.is_error, answer.name) == (SCHEMA_ERROR, True, "lookup")
    logged = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert logged == [{"tool": "lookup", "arguments": {"key": "rent_2019"}}]  # only the good one


async def test_a_body_that_does_not_decode_is_answered_with_a_tool_error(tmp_path: Path) -> None:
    backbone = ScriptedBackbone(
        ['<tool_call>{"name": "lookup", "arguments": {"key": }}</tool_call>', "no idea"]
    )
    async with tools_server(tmp_path) as toolset:
        record = await _agent(backbone, toolset).turn("hi")
    assert record.parse_outcomes == ["marker_bad_body", "no_call"]
    (call,) = record.tool_calls
    assert (call.label, call.executed, call.error_returned) == ("marker_bad_body", False, True)
    assert (call.result or "").startswith(
        "An error occurred while parsing tool arguments. Please try again with valid JSON. Error: "
    )
    sent = backbone.calls[1].messages[-1]
    assert isinstance(sent, ToolResultMessage) and sent.content == call.result and sent.is_error
    assert record.reply == "no idea"
    assert not (tmp_path / "calls.jsonl").exists()


async def test_no_error_is_returned_after_the_last_round(tmp_path: Path) -> None:
    backbone = ScriptedBackbone(
        ['<tool_call>{"name": "lookup", "arguments": {"colour": "red"}}</tool_call> done']
    )
    async with tools_server(tmp_path) as toolset:
        record = await _agent(backbone, toolset, max_tool_rounds=0).turn("hi")
    assert (record.reply, record.stop_reason, record.rounds) == ("done", "max_rounds", 1)
    (call,) = record.tool_calls
    assert (call.label, call.executed, call.error_returned, call.result) == (
        "missing_required",
        False,
        False,
        None,
    )
    backbone.assert_exhausted()


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('<tool_call>{"name": "lookup", "arguments": {"key": "rent_', "truncated"),
        ('<tool_call>{"name": "search_web", "arguments": {}}</tool_call> done', "unknown_tool"),
    ],
)
async def test_cut_off_calls_and_unknown_tools_end_the_turn(
    tmp_path: Path, reply: str, label: str
) -> None:
    backbone = ScriptedBackbone([reply])
    async with tools_server(tmp_path) as toolset:
        record = await _agent(backbone, toolset).turn("hi")
    assert record.parse_outcomes == [label] and record.stop_reason == "final"
    (call,) = record.tool_calls
    assert (call.executed, call.error_returned) == (False, False)
    backbone.assert_exhausted()


async def test_tool_round_bound(tmp_path: Path) -> None:
    call = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}</tool_call>'
    backbone = ScriptedBackbone([call, call, call])
    async with tools_server(tmp_path) as toolset:
        record = await _agent(backbone, toolset, max_tool_rounds=2).turn("loop forever")
    assert record.stop_reason == "max_rounds"
    assert sum(c.executed for c in record.tool_calls) == 2
    assert [c.round for c in record.tool_calls] == [0, 1, 2]  # the last round's call recorded


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


async def test_a_native_call_with_invalid_json_gets_a_tool_error_over_http(tmp_path: Path) -> None:
    """A provider-native call whose arguments are not JSON, through litellm at a real
    OpenAI-compatible server: the next request carries the call (arguments ``{}``, as vLLM
    reads a malformed history entry) and a ``tool`` message with the error under its id."""
    with FakeOpenAIServer() as server:
        server.push(
            tool_call_reply("lookup", '{"key": "rent_2019"', call_id="call_x"),
            tool_call_reply("lookup", {"key": "rent_2019"}, call_id="call_y"),
            reply("It was 1,240 EUR."),
        )
        backbone = LiteLLMBackbone("openai/gpt-4o-mini", api_base=server.api_base, api_key="k")
        async with tools_server(tmp_path) as toolset:
            record = await _agent(backbone, toolset).turn("What was the rent in 2019?")
        bodies = [request.body for request in server.requests]
    assert backbone.tool_mode == "native" and len(bodies) == 3
    assert record.parse_outcomes == ["marker_bad_body", "ok", "no_call"]
    assert (record.reply, record.finish_reason) == ("It was 1,240 EUR.", "stop")
    bad, good = record.tool_calls
    assert (bad.label, bad.executed, bad.error_returned) == ("marker_bad_body", False, True)
    assert bad.result == (
        "An error occurred while parsing tool arguments. Please try again with valid JSON. "
        "Error: tool-call arguments are not a JSON object"
    )
    assert (good.executed, good.result) == (True, "1,240 EUR")
    assistant, answer = bodies[1]["messages"][-2:]
    [call] = assistant["tool_calls"]
    assert call["function"] == {"name": "lookup", "arguments": "{}"}
    assert answer == {"role": "tool", "tool_call_id": call["id"], "content": bad.result}
    logged = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert logged == [{"tool": "lookup", "arguments": {"key": "rent_2019"}}]
