"""A uvicorn server that says when it listens, and a connection that times out a silent client:
the base of every background server mirage runs (the model endpoint in ``runtime.serve``, the
memory server's HTTP transport)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_READ_TIMEOUT_S = 30.0


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
