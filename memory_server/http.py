"""Streamable HTTP for the memory server: the ASGI app and a runner for a background thread.

Above: ``mirage memory serve --http``, tests, benchmarks and the harness (which starts a server
on a free loopback port and gives each probe its own URL). Below: the MCP SDK's streamable
HTTP session manager and uvicorn.

Routes: ``/mcp`` and ``/t/<tag>/mcp`` (the same endpoint; the tag attributes calls in the call
log). With a bearer token every route requires ``Authorization: Bearer <token>``; binding to
anything but loopback without a token is refused, and on loopback a foreign Host or Origin is
(``runtime.asgi``: the rule every mirage server shares).
"""

from __future__ import annotations

import hmac
import re
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_server.server import TAG_HEADER, TAG_PATTERN
from runtime.asgi import ReadyServer, check_binding, is_loopback, loopback_security

MCP_PATH = "/mcp"
TAGGED_PATH = "/t/{tag}/mcp"


class _GuardMiddleware:
    """Bearer-token check and tag validation in front of every route."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = self._problem(scope)
            if problem is not None:
                status, message = problem
                await JSONResponse({"error": message}, status_code=status)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _problem(self, scope: Scope) -> tuple[int, str] | None:
        headers = dict(scope.get("headers") or [])
        if self.expected is not None:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                return 401, "missing or wrong bearer token"
        header_tag = headers.get(TAG_HEADER.encode())
        if header_tag is not None and not TAG_PATTERN.match(header_tag.decode("latin-1")):
            return 400, f"{TAG_HEADER} must match {TAG_PATTERN.pattern}"
        path: str = scope.get("path", "")
        if path.startswith("/t/"):
            tag = path[3:].split("/", 1)[0]
            if not TAG_PATTERN.match(tag):
                return 400, f"tag in URL must match {TAG_PATTERN.pattern}"
        return None


def build_http_app(server: MCPServer, *, host: str = "127.0.0.1", token: str | None = None) -> Any:
    """The ASGI app serving ``server`` at ``/mcp`` and ``/t/<tag>/mcp``."""
    check_binding(host, token)
    security = loopback_security() if is_loopback(host) else None
    app: Starlette = server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=security
    )
    endpoint = _mcp_endpoint(app)
    app.router.routes.append(Route(TAGGED_PATH, endpoint=endpoint))
    return _GuardMiddleware(app, token)


def untagged(url: str) -> tuple[str, str | None]:
    """``http://H:P/t/<tag>/mcp`` as the plain endpoint and its tag (to send as the
    ``X-Mirage-Tag`` header of a shared connection); any other URL as it is, with no tag."""
    parts = urlsplit(url)
    match = re.fullmatch(r"(.*)/t/([^/]+)/mcp/?", parts.path)
    if match is None or not TAG_PATTERN.match(match.group(2)):
        return url, None
    plain = urlunsplit(parts._replace(path=match.group(1) + MCP_PATH))
    return plain, match.group(2)


def _mcp_endpoint(app: Starlette) -> Any:
    for route in app.router.routes:
        if isinstance(route, Route) and route.path == MCP_PATH:
            return route.endpoint
    raise RuntimeError("the MCP SDK's streamable HTTP app has no /mcp route")


class HttpServerThread:
    """Serve an MCP server over HTTP in a background thread. ``port=0`` picks a free port."""

    def __init__(
        self,
        server: MCPServer,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
    ) -> None:
        self.host = host
        app = build_http_app(server, host=host, token=token)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        self._ready = threading.Event()
        self._uvicorn = ReadyServer(config, self._ready)
        self._thread = threading.Thread(
            target=self._uvicorn.run, name="mirage-memory-http", daemon=True
        )

    def start(self, timeout: float = 30.0) -> HttpServerThread:
        self._thread.start()
        if not self._ready.wait(timeout) or not self._uvicorn.started:
            raise RuntimeError("the memory server did not start listening")
        return self

    @property
    def port(self) -> int:
        sockets = self._uvicorn.servers[0].sockets
        return int(sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{MCP_PATH}"

    def tagged_url(self, tag: str) -> str:
        if not TAG_PATTERN.match(tag):
            raise ValueError(f"tag {tag!r} must match {TAG_PATTERN.pattern}")
        return self.url[: -len(MCP_PATH)] + TAGGED_PATH.replace("{tag}", tag)

    def stop(self, timeout: float = 10.0) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> HttpServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_http(server: MCPServer, *, host: str, port: int, token: str | None = None) -> None:
    """Serve in the foreground until interrupted (the CLI)."""
    app = build_http_app(server, host=host, token=token)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
