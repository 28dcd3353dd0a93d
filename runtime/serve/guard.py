"""Who may talk to the model endpoint, checked before any route runs.

Above: ``runtime.serve.app.create_app``, which wraps its app in ``RequestGuard``. Below: the
rule every mirage server shares (``runtime.asgi``: loopback names, the MCP SDK's Host/Origin
check) and the OpenAI error shape (``runtime.serve.wire``).

A server without a key answers loopback only, but a web page the operator opens can still send
requests to a loopback port — and, with DNS rebinding, read the replies — spending the
operator's provider key. So, in this order:

1. bound to loopback: a ``Host`` that is not a loopback name is refused with 421, an ``Origin``
   that is not a page served from a loopback name with 403 (the memory server's check);
2. with a key: a request without ``Authorization: Bearer <key>`` is refused with 401 (``/health``
   excepted, so a supervisor can probe the port);
3. a ``POST`` whose body is not declared JSON (``Content-Type: application/json``) is refused
   with 415: the only bodies a page may send to another origin without asking first (CORS
   "simple requests") are form data and ``text/plain``.

Each refusal is logged as a warning (``serve.refused``: status, method, path and code; the MCP
SDK adds its own line naming the refused Host or Origin), never with the body.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

import structlog
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from runtime.asgi import is_loopback, loopback_security
from runtime.serve.wire import error_body

log = structlog.get_logger(__name__)

JSON_MEDIA_TYPE = "application/json"
_UNGUARDED_BY_KEY = frozenset({"/health"})


@dataclass(frozen=True)
class Refusal:
    """One refused request: its status, the OpenAI error body's message and code."""

    status: int
    message: str
    code: str

    def response(self) -> JSONResponse:
        body = error_body(self.message, "invalid_request_error", code=self.code)
        return JSONResponse(body, status_code=self.status)


class RequestGuard:
    """The checks above in front of ``app``; ``host`` is where the server listens (the Host and
    Origin checks apply on loopback), ``api_key`` the key clients must send (None: none)."""

    def __init__(self, app: ASGIApp, *, host: str, api_key: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode() if api_key else None
        self.origin_check = TransportSecurityMiddleware(loopback_security())
        self.loopback = is_loopback(host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = await self.refusal(Request(scope))
            if refusal is not None:
                log.warning(
                    "serve.refused",
                    status=refusal.status,
                    method=scope.get("method"),
                    path=scope.get("path"),
                    code=refusal.code,
                )
                await refusal.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def refusal(self, request: Request) -> Refusal | None:
        if self.loopback and (refused := await self._foreign(request)) is not None:
            return refused
        if self.expected is not None and request.url.path not in _UNGUARDED_BY_KEY:
            given = request.headers.get("authorization", "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, self.expected):
                message = "missing or wrong API key (send Authorization: Bearer <key>)"
                return Refusal(401, message, "invalid_api_key")
        if request.method == "POST":
            return _not_json(request.headers.get("content-type"))
        return None

    async def _foreign(self, request: Request) -> Refusal | None:
        """421 for a Host, 403 for an Origin that is not loopback (the SDK's decision)."""
        checked = await self.origin_check.validate_request(request, is_post=False)
        if checked is None:
            return None
        if checked.status_code == 421:
            host = request.headers.get("host", "")
            message = (
                f"Host {host!r} is not a loopback name: this server, listening on loopback "
                "without a key, answers clients on this machine only (DNS rebinding protection)"
            )
            return Refusal(421, message, "host_not_allowed")
        origin = request.headers.get("origin", "")
        message = (
            f"requests from the web page origin {origin!r} are refused: this server, listening "
            "on loopback without a key, answers clients on this machine only"
        )
        return Refusal(403, message, "origin_not_allowed")


def _not_json(content_type: str | None) -> Refusal | None:
    """415 unless ``content_type`` is ``application/json`` (parameters such as a charset
    allowed)."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type == JSON_MEDIA_TYPE:
        return None
    given = repr(content_type) if content_type else "none"
    message = f"the request body must be JSON sent as Content-Type: {JSON_MEDIA_TYPE} (got {given})"
    return Refusal(415, message, "unsupported_media_type")
