"""The OpenAI-compatible endpoint adapter against real HTTP agents on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from harness.kit.agents.openai_endpoint import OpenAIEndpointAgent, parse_chat_reply
from harness.mirage.trunk.checkpoints import Checkpoint
from tests.harness.agents_support import (
    PROTOCOL_REPLY,
    AgentServer,
    chat_app,
    completion,
    failing_handler,
    make_checkpoint,
    openai_tool_call,
)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Checkpoint:
    return make_checkpoint(tmp_path / "family")


async def test_restore_sends_the_compacted_transcript_and_the_probe_urls(
    checkpoint: Checkpoint,
) -> None:
    seen: list[dict[str, Any]] = []

    async def handle(request: Request) -> Response:
        seen.append({"body": await request.json(), "headers": dict(request.headers)})
        return completion(PROTOCOL_REPLY)

    with AgentServer(chat_app(handle)) as server:
        agent = OpenAIEndpointAgent(
            server.base_url,
            model="my-agent",
            api_key="secret",
            memory_url=lambda tag: f"http://127.0.0.1:9/t/{tag}/mcp",
        )
        reply = await agent.probe(checkpoint, "Question: where?", tag="S2.C0.q1.r0")
        await agent.aclose()

    assert reply.error is None and reply.text == PROTOCOL_REPLY
    assert reply.restored_sha256 == checkpoint.manifest.snapshot_sha256
    assert reply.usage.eit == 321 and reply.usage.output_tokens == 12
    [request] = seen
    body, headers = request["body"], request["headers"]
    assert body["model"] == "my-agent"
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert "Workspace: ./ws" in body["messages"][0]["content"]
    assert body["messages"][1]["content"].startswith("[Summary of earlier conversation]")
    assert body["messages"][2]["tool_calls"][0]["function"]["name"] == "artifact_recall"
    assert body["messages"][3]["tool_call_id"] == "call_1"
    assert body["messages"][-1] == {"role": "user", "content": "Question: where?"}
    url = "http://127.0.0.1:9/t/S2.C0.q1.r0/mcp"
    assert headers["x-mirage-memory-url"] == url
    assert headers["x-mirage-tag"] == "S2.C0.q1.r0"
    assert headers["authorization"] == "Bearer secret"
    assert body["metadata"] == {"mirage_tag": "S2.C0.q1.r0", "mirage_memory_url": url}
    # what the probe had: the transcript it was sent, without the system prompt and the probe
    context = reply.context
    assert context is not None and context.source == "transcript" and context.messages
    assert [m.role for m in context.messages] == roles[1:-1]
    assert context.messages[1].text == 'artifact_recall({"query": "invoice"})'
    assert [b.source for b in context.boot] == ["system_prompt"]
    assert "Workspace: ./ws" in context.boot[0].text


async def test_reported_tool_calls_are_kept(checkpoint: Checkpoint) -> None:
    async def handle(request: Request) -> Response:
        call = openai_tool_call("artifact_recall", {"query": "invoice total"})
        return completion(PROTOCOL_REPLY, [call])

    with AgentServer(chat_app(handle)) as server:
        agent = OpenAIEndpointAgent(server.base_url)
        reply = await agent.probe(checkpoint, "Q", tag="t1")
        await agent.aclose()
    assert reply.trace["tool_calls_reported"] is True
    [call] = reply.tool_calls
    assert call.name == "artifact_recall" and call.arguments == {"query": "invoice total"}
    assert call.executed is False  # only the memory server's log says what ran


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("timeout", "agent_error: timeout"),
        ("http500", "agent_error: http: HTTP 500"),
        ("garbage", "agent_error: garbage: body is not JSON"),
        ("no_choices", "agent_error: malformed: response has no choices"),
    ],
)
async def test_failures_come_back_as_errors(
    checkpoint: Checkpoint, kind: str, expected: str
) -> None:
    with AgentServer(chat_app(failing_handler(kind))) as server:
        agent = OpenAIEndpointAgent(server.base_url, timeout_s=0.5, max_retries=1, backoff_s=0.01)
        reply = await agent.probe(checkpoint, "Q", tag="t1")
        await agent.aclose()
    assert reply.error is not None and reply.error.startswith(expected), reply.error
    assert reply.text is None
    assert reply.restored_sha256 == checkpoint.manifest.snapshot_sha256


@pytest.mark.parametrize(
    ("message", "finish", "expected"),
    [
        ({"content": None}, "content_filter", "finish_reason content_filter (no content"),
        ({"content": "The fir"}, "content_filter", "finish_reason content_filter (content kept"),
        ({"content": None, "refusal": "I can't."}, "stop", 'refusal with no content: "I can\'t."'),
    ],
)
async def test_a_provider_refusal_is_an_agent_error_not_an_answer(
    checkpoint: Checkpoint, message: dict[str, Any], finish: str, expected: str
) -> None:
    """HTTP 200 whose reply the agent's provider withheld: a failed probe (``agent_error``),
    never an empty answer, sent once (a refusal is not retried)."""
    sent: list[int] = []

    async def handle(request: Request) -> Response:
        sent.append(1)
        body = {"choices": [{"message": message, "finish_reason": finish}]}
        return JSONResponse(body)

    with AgentServer(chat_app(handle)) as server:
        agent = OpenAIEndpointAgent(server.base_url, max_retries=2, backoff_s=0.01)
        reply = await agent.probe(checkpoint, "Q", tag="t1")
        await agent.aclose()
    assert reply.error is not None and reply.text is None
    assert reply.error.startswith("agent_error: provider_refusal: ") and expected in reply.error
    assert reply.finish_reason == finish and sent == [1]


async def test_the_finish_reason_of_an_answer_is_kept(checkpoint: Checkpoint) -> None:
    async def handle(request: Request) -> Response:
        return completion(PROTOCOL_REPLY)

    with AgentServer(chat_app(handle)) as server:
        agent = OpenAIEndpointAgent(server.base_url)
        reply = await agent.probe(checkpoint, "Q", tag="t1")
        await agent.aclose()
    assert (reply.error, reply.finish_reason) == (None, "stop")


async def test_connection_refused_is_a_recorded_error(checkpoint: Checkpoint) -> None:
    with AgentServer(chat_app(failing_handler("ok"))) as server:
        url = server.base_url  # the port is free again once the server has stopped
    agent = OpenAIEndpointAgent(url, max_retries=1, backoff_s=0.01)
    reply = await agent.probe(checkpoint, "Q", tag="t1")
    assert reply.error is not None and reply.error.startswith("agent_error: connection")


async def test_rate_limits_and_server_errors_are_retried(checkpoint: Checkpoint) -> None:
    statuses = [429, 503]

    async def handle(request: Request) -> Response:
        if statuses:
            return PlainTextResponse("busy", status_code=statuses.pop(0))
        return completion(PROTOCOL_REPLY)

    with AgentServer(chat_app(handle)) as server:
        agent = OpenAIEndpointAgent(server.base_url, max_retries=2, backoff_s=0.01)
        reply = await agent.probe(checkpoint, "Q", tag="t1")
        await agent.aclose()
    assert reply.error is None and reply.text == PROTOCOL_REPLY
    assert statuses == []


def test_reply_parsing_edge_cases() -> None:
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": "A"}]}}]}
    assert parse_chat_reply(parts).text == "A"
    empty_list = {"choices": [{"message": {"content": "x", "tool_calls": []}}]}
    assert parse_chat_reply(empty_list).trace["tool_calls_reported"] is False
    unreadable = [{"function": {"name": "f", "arguments": "{"}}]
    raw_args = {"choices": [{"message": {"content": None, "tool_calls": unreadable}}]}
    [call] = parse_chat_reply(raw_args).tool_calls
    assert call.arguments == {"_raw": "{"}
    with pytest.raises(Exception, match="neither content nor tool_calls"):
        parse_chat_reply({"choices": [{"message": {"content": None}}]})


def test_bad_endpoint_is_refused() -> None:
    with pytest.raises(ValueError, match="http"):
        OpenAIEndpointAgent("localhost:8000/v1")


async def test_a_server_refusing_metadata_still_gets_the_probe_url(checkpoint: Checkpoint) -> None:
    seen: list[dict[str, Any]] = []

    async def handle(request: Request) -> Response:
        body = await request.json()
        seen.append({"body": body, "url": request.headers.get("x-mirage-memory-url")})
        if "metadata" in body:
            message = "The 'metadata' parameter is only allowed when 'store' is enabled."
            return PlainTextResponse(message, status_code=400)
        return completion(PROTOCOL_REPLY)

    with AgentServer(chat_app(handle)) as server:
        agent = OpenAIEndpointAgent(server.base_url, memory_url=lambda tag: f"http://m/t/{tag}/mcp")
        first = await agent.probe(checkpoint, "Q", tag="t1")
        second = await agent.probe(checkpoint, "Q", tag="t2")
        await agent.aclose()
    assert first.error is None and second.error is None
    assert ["metadata" in s["body"] for s in seen] == [True, False, False]
    assert seen[-1]["url"] == "http://m/t/t2/mcp"
