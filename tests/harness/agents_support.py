"""Helpers for the agent-adapter tests: a real OpenAI-compatible agent served over HTTP in a
background thread (starlette + uvicorn), and hand-made checkpoints."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from harness.mirage.trunk.checkpoints import Checkpoint, TrunkConfig, write_checkpoint
from runtime.asgi import ReadyServer
from runtime.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from runtime.session import AgentConfig, Session

PROTOCOL_REPLY = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"

TRUNK = TrunkConfig(
    pack="test",
    pack_digest="0" * 16,
    seed=0,
    trunk_model="scripted",
    profile="scaled",
    window=8192,
    states=(("S2", "compaction", None, 1),),
    summary_format="verbatim",
    summarizer_model="summarizer",
    memory_flush=False,
    max_output_tokens=64,
)


def compacted_session() -> Session:
    """A session as after one compaction: summary message, then a kept tail with a tool round."""
    session = Session.new(AgentConfig(workspace_hint="Workspace: ./ws"), context_window=8192)
    session.append(UserMessage.text("[Summary of earlier conversation]\nThe invoice is in a1."))
    call = ToolCall(id="call_1", name="artifact_recall", arguments={"query": "invoice"})
    session.append(AssistantMessage(content="", tool_calls=(call,)))
    session.append(ToolResultMessage(tool_call_id="call_1", name="artifact_recall", content="hit"))
    session.append(AssistantMessage(content="The invoice total is 120 EUR."))
    session.compaction.count = 1
    return session


def make_checkpoint(root: Path, state: str = "S2") -> Checkpoint:
    return write_checkpoint(
        root,
        compacted_session(),
        state=state,
        trunk=TRUNK,
        trunk_position=3,
        trunk_turns_total=3,
        workspace_version=None,
    )


class AgentServer:
    """An ASGI app on a free loopback port in a background thread."""

    def __init__(self, app: Any) -> None:
        self._ready = threading.Event()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1
        )
        self._server = ReadyServer(config, self._ready)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> AgentServer:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("agent server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    @property
    def base_url(self) -> str:
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"


Handler = Callable[[Request], Awaitable[Response]]


def chat_app(handler: Handler) -> Starlette:
    return Starlette(routes=[Route("/v1/chat/completions", handler, methods=["POST"])])


def completion(content: str | None, tool_calls: list[dict[str, Any]] | None = None) -> JSONResponse:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return JSONResponse(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 321, "completion_tokens": 12},
        }
    )


def openai_tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def wants_recall(tag: str) -> bool:
    """The test agent's own policy: a deterministic half of the probes use memory."""
    return zlib.crc32(tag.encode()) % 2 == 0


@dataclass
class ToolUsingAgent:
    """An agent we did not write: it calls artifact_recall over MCP (through the per-probe URL it
    is handed) for the probes its policy picks, and answers with a protocol reply. It waits
    until ``rendezvous`` requests are in flight (or a short grace time passes) so concurrent
    probes really overlap, and can misreport its calls for chosen tags."""

    rendezvous: int = 1
    misreport: Callable[[str], bool] = lambda tag: False
    fixed_url: str | None = None  # set: ignore the per-probe URL, like a once-configured client
    called: dict[str, int] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)
    max_in_flight: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    _in_flight: int = 0
    _condition: asyncio.Condition | None = None

    async def handle(self, request: Request) -> Response:
        body = await request.json()
        tag = request.headers["x-mirage-tag"]
        url = self.fixed_url or request.headers.get("x-mirage-memory-url")
        self.requests.append({"body": body, "tag": tag, "url": url})
        await self._meet()
        try:
            made = await self._maybe_recall(tag, url, body)
        finally:
            self._in_flight -= 1
        self.answered.add(tag)
        reported = made if not self.misreport(tag) else ([] if made else ["artifact_recall"])
        calls = [openai_tool_call(name, {"query": "q"}) for name in reported]
        return completion(PROTOCOL_REPLY, calls or None)

    async def _meet(self) -> None:
        if self._condition is None:
            self._condition = asyncio.Condition()
        async with self._condition:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self._condition.notify_all()
            # The tail of the queue may hold fewer probes than the rendezvous size.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._condition.wait_for(lambda: self._in_flight >= self.rendezvous), 2.0
                )

    async def _maybe_recall(self, tag: str, url: str | None, body: dict[str, Any]) -> list[str]:
        if url is None or not wants_recall(tag):
            return []
        from mcp.client import Client

        question = body["messages"][-1]["content"]
        async with Client(url) as client:
            result = await client.call_tool("artifact_recall", {"query": question[:200], "k": 2})
        assert not result.is_error, result
        self.called[tag] = self.called.get(tag, 0) + 1
        return ["artifact_recall"]


def failing_handler(kind: str) -> Handler:
    """An agent endpoint that fails in one way on every request."""
    hang = asyncio.Event()

    async def handle(request: Request) -> Response:
        await request.body()
        if kind == "timeout":
            await hang.wait()
        if kind == "http500":
            return PlainTextResponse("internal error", status_code=500)
        if kind == "garbage":
            return PlainTextResponse("<html>definitely not json</html>")
        if kind == "no_choices":
            return JSONResponse({"object": "chat.completion", "choices": []})
        return completion(PROTOCOL_REPLY)

    return handle
