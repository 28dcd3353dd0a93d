"""The gateway RPC client against a WebSocket server speaking the gateway's frames."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from harness.kit.agents.openclaw.rpc import GatewayRpc, RpcError

TOKEN = "secret-token"


async def gateway(socket: ServerConnection) -> None:
    """Challenge, token check, then ``sessions.create`` answers, ``boom`` fails and ``drop``
    closes the connection without answering."""
    await socket.send(json.dumps({"type": "event", "event": "connect.challenge"}))
    async for raw in socket:
        frame = json.loads(raw)
        method, params = frame["method"], frame["params"]
        reply: dict[str, Any] = {"type": "res", "id": frame["id"], "ok": True}
        if method == "connect" and params["auth"]["token"] != TOKEN:
            reply.update(ok=False, error={"code": "UNAUTHORIZED", "message": "bad token"})
        elif method == "sessions.create":
            await socket.send(json.dumps({"type": "event", "event": "sessions.changed"}))
            reply["payload"] = {"key": params["key"]}
        elif method == "boom":
            reply.update(ok=False, error={"code": "INVALID_REQUEST", "message": "no such parent"})
        elif method == "drop":
            await socket.close()
            return
        await socket.send(json.dumps(reply))


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with serve(gateway, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}"


async def test_a_call_returns_its_payload_and_skips_events(url: str) -> None:
    rpc = GatewayRpc(url, TOKEN)
    try:
        assert await rpc.call("sessions.create", {"key": "agent:main:p1"}) == {
            "key": "agent:main:p1"
        }
        assert await rpc.call("sessions.create", {"key": "agent:main:p2"}) == {
            "key": "agent:main:p2"
        }
    finally:
        await rpc.aclose()


async def test_an_error_answer_names_the_method_and_the_code(url: str) -> None:
    rpc = GatewayRpc(url, TOKEN)
    with pytest.raises(RpcError, match="gateway RPC boom: INVALID_REQUEST: no such parent"):
        await rpc.call("boom")
    await rpc.aclose()


async def test_a_wrong_token_is_refused(url: str) -> None:
    rpc = GatewayRpc(url, "wrong")
    with pytest.raises(RpcError, match="UNAUTHORIZED"):
        await rpc.call("sessions.create", {"key": "k"})
    await rpc.aclose()


async def test_a_dropped_connection_is_reopened(url: str) -> None:
    rpc = GatewayRpc(url, TOKEN)
    with pytest.raises(RpcError, match="unreachable"):
        await rpc.call("drop")  # dropped on both attempts
    assert await rpc.call("sessions.create", {"key": "k"}) == {"key": "k"}
    await rpc.aclose()


async def test_no_gateway_is_unreachable() -> None:
    rpc = GatewayRpc("ws://127.0.0.1:9", TOKEN, timeout_s=5)
    with pytest.raises(RpcError) as caught:
        await rpc.call("sessions.create", {})
    assert caught.value.unreachable
