"""Serving an ASGI app with uvicorn: in the foreground (the CLI) or in a background thread
(tests, and a harness that runs the endpoint next to an agent under test)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from runtime.asgi import DEFAULT_READ_TIMEOUT_S, ReadyServer, read_timeout_protocol


def server_config(
    app: Any, *, host: str, port: int, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
) -> uvicorn.Config:
    """uvicorn's settings for the endpoint: warnings only, and a connection on which the
    client stays silent for ``read_timeout_s`` before its request is complete is closed."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=2,
        http=read_timeout_protocol(read_timeout_s),
    )


class BackgroundServer:
    """``app`` on ``host:port`` in a daemon thread; ``port=0`` picks a free port.

    with BackgroundServer(create_app(backbone)) as server:
        client = OpenAI(base_url=server.base_url, api_key="x")
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    ) -> None:
        self.host = host
        self._port = port
        self._ready = threading.Event()
        config = server_config(app, host=host, port=port, read_timeout_s=read_timeout_s)
        self._server = ReadyServer(config, self._ready)
        self._thread = threading.Thread(target=self._serve, name="mirage-serve", daemon=True)

    def _serve(self) -> None:
        try:
            self._server.run()
        except SystemExit:  # uvicorn exits when it cannot bind; start() reports it
            return

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        """Start serving; raises ``RuntimeError`` when the port cannot be bound (uvicorn's
        thread ends at once then) or the server is not listening within ``timeout``."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.05):
            if not self._thread.is_alive() or time.monotonic() > deadline:
                break
        if not self._server.started:
            where = f"{self.host}:{self._port}"
            raise RuntimeError(f"the server could not listen on {where} (is the port in use?)")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)

    @property
    def port(self) -> int:
        return int(self._server.servers[0].sockets[0].getsockname()[1])

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``http://host:port/v1``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(
    app: Any, *, host: str, port: int, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
) -> None:
    """Serve in the foreground until interrupted."""
    uvicorn.Server(server_config(app, host=host, port=port, read_timeout_s=read_timeout_s)).run()
