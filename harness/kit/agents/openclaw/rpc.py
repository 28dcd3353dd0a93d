"""A client of the OpenClaw gateway's WebSocket RPC (``sessions.create``, ``sessions.get``, …).

Above: the trunk driver and the OpenClaw agent (session forks per checkpoint and per probe).
Below: the ``websockets`` library and the gateway's protocol 4 (its bundled docs,
``gateway/protocol/handshake.md``): the gateway sends a ``connect.challenge`` event, the client
answers with a ``connect`` request carrying the token (an operator without device identity),
then requests ``{"type": "req", "id", "method", "params"}`` are answered by ``{"type": "res",
"id", "ok", "payload" | "error"}``; events in between are ignored. One connection is kept and
reopened when it drops. The CLI equivalent (``openclaw gateway call``) costs seconds of Node
start-up per call; a call here costs milliseconds to a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

import structlog
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

from harness.kit.agents.openclaw.errors import OpenClawError

log = structlog.get_logger(__name__)

PROTOCOL = 4
SCOPES = ("operator.admin", "operator.read", "operator.write")
CALL_TIMEOUT_S = 120.0


class RpcError(OpenClawError):
    """The gateway answered a request with an error, or could not be reached."""

    def __init__(self, method: str, detail: str, *, unreachable: bool = False) -> None:
        super().__init__(f"gateway RPC {method}: {detail}")
        self.method = method
        self.unreachable = unreachable


class GatewayRpc:
    def __init__(self, url: str, token: str, *, timeout_s: float = CALL_TIMEOUT_S) -> None:
        self.url = url
        self.token = token
        self.timeout_s = timeout_s
        self._socket: ClientConnection | None = None
        self._lock = asyncio.Lock()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The request's ``payload``; raises ``RpcError``. A dropped connection is reopened
        once before the request is sent again."""
        async with self._lock:
            for attempt in (1, 2):
                try:
                    socket = await self._connected()
                    return await asyncio.wait_for(
                        self._request(socket, method, params or {}), self.timeout_s
                    )
                except (OSError, WebSocketException) as exc:
                    await self._drop()
                    if attempt == 2:
                        raise RpcError(method, f"unreachable ({exc})", unreachable=True) from exc
                except TimeoutError as exc:
                    await self._drop()
                    raise RpcError(method, f"no answer within {self.timeout_s:.0f} s") from exc
        raise AssertionError("unreachable")

    async def _connected(self) -> ClientConnection:
        if self._socket is None:
            socket = await connect(self.url, max_size=None, open_timeout=30)
            try:
                await asyncio.wait_for(self._handshake(socket), 30)
            except BaseException:
                await socket.close()
                raise
            self._socket = socket
        return self._socket

    async def _handshake(self, socket: ClientConnection) -> None:
        params = {
            "minProtocol": PROTOCOL,
            "maxProtocol": PROTOCOL,
            "client": {"id": "cli", "version": "0.1.0", "platform": "linux", "mode": "cli"},
            "role": "operator",
            "scopes": list(SCOPES),
            "caps": [],
            "commands": [],
            "permissions": {},
            "auth": {"token": self.token},
            "locale": "en-US",
            "userAgent": "mirage-harness",
        }
        await socket.recv()  # the connect.challenge event (token auth does not sign it)
        await self._request(socket, "connect", params)

    async def _request(self, socket: ClientConnection, method: str, params: dict[str, Any]) -> Any:
        request_id = str(uuid.uuid4())
        frame = {"type": "req", "id": request_id, "method": method, "params": params}
        await socket.send(json.dumps(frame))
        while True:
            message = json.loads(await socket.recv())
            if message.get("type") != "res" or message.get("id") != request_id:
                continue  # events (challenge, ticks, session changes)
            if not message.get("ok"):
                raise RpcError(method, _error_text(message.get("error")))
            return message.get("payload")

    async def _drop(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            with contextlib.suppress(OSError, WebSocketException):
                await socket.close()

    async def aclose(self) -> None:
        async with self._lock:
            await self._drop()


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        return f"{code}: {message}" if code else str(message or error)
    return str(error)
