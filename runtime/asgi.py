"""A uvicorn server that says when it listens, a connection that times out a silent client, and
the one rule for who may reach a server: the base of every HTTP server mirage runs (the model
endpoint in ``runtime.serve``, the memory server's HTTP transport in ``memory_server.http``).

The rule (``check_binding``, ``loopback_security``): without a key a server listens on loopback
only, and a key is never blank; on loopback, a request whose ``Host`` is not a loopback name
(DNS rebinding) is refused with 421 and one whose ``Origin`` is a foreign web page with 403 — the
MCP SDK's ``TransportSecurityMiddleware`` checks both, with the loopback names below.
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from typing import Any

import h11
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_READ_TIMEOUT_S = 30.0
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None, token_option: str = "--token") -> None:
    """Refuse a key that is blank or has spaces around it (HTTP trims a header's value, so no
    client could send it), and a non-loopback binding without a key; ``token_option`` is the
    caller's own option that sets the key (named in the error)."""
    if token is not None and (not token.strip() or token != token.strip()):
        raise ValueError(
            f"{token_option} is blank or starts or ends with whitespace: give the key clients "
            "send as 'Authorization: Bearer <key>'"
        )
    if not is_loopback(host) and not token:
        raise ValueError(
            f"refusing to serve on {host} without a bearer token: pass {token_option} (clients "
            "then send 'Authorization: Bearer <token>'), or bind to 127.0.0.1"
        )


def loopback_security() -> TransportSecuritySettings:
    """The Host and Origin a server bound to loopback accepts: loopback names, with any port
    (or none), and pages served from them; everything else is refused (421, 403)."""
    hosts = [*_LOOPBACK_NAMES, *(f"{name}:*" for name in _LOOPBACK_NAMES)]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{host}" for host in hosts],
    )


class ReadyServer(uvicorn.Server):
    """Sets ``ready`` once its sockets are bound, so a starter thread can wait for it."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self._ready.set()


class ReadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 connection, closed when the client sends nothing for ``read_timeout_s``
    while the server waits for its request: a client that connects and stays silent, or stops
    half way through its headers or body. (uvicorn times out only idle keep-alive connections
    between requests; a half-open connection would otherwise be held for ever.) Once a request
    has arrived the server may take as long as its answer needs."""

    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._read_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._rearm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._rearm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _rearm(self) -> None:
        self._disarm()
        waiting = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
        if waiting and not self.transport.is_closing():
            self._read_timer = self.loop.call_later(self.read_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _timed_out(self) -> None:
        self.logger.warning("closing a connection silent for %.0f s", self.read_timeout_s)
        self.transport.close()


def read_timeout_protocol(seconds: float) -> type[ReadTimeoutProtocol]:
    """The connection class for uvicorn's ``Config(http=...)``, timing out after ``seconds``."""
    return type("ReadTimeoutProtocol", (ReadTimeoutProtocol,), {"read_timeout_s": seconds})
