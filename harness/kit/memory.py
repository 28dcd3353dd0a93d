"""The memory server over HTTP for the agents under test: one listener per answerer.

Above: the protocols' runs (MIRAGE's trunk and probes, OpenClaw's run, CUE's memory systems),
which hand ``MemoryEndpoint.tagged_url`` to the agents as their per-probe memory URL. Below:
``memory_server`` (``MemoryService``, its MCP server, ``HttpServerThread``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)


def memory_binding(url: str, token: str | None) -> tuple[str, int]:
    """Host and port to serve the memory server on for ``--memory-url``."""
    from urllib.parse import urlsplit

    from memory_server.http import MCP_PATH
    from runtime.asgi import check_binding

    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"--memory-url must be http://HOST:PORT/mcp, got {url!r}")
    if parts.path not in ("", "/", MCP_PATH):
        raise ValueError(f"--memory-url path must be {MCP_PATH} (the server's endpoint): {url!r}")
    check_binding(parts.hostname, token, token_option="--memory-token")
    return parts.hostname, parts.port


class MemoryEndpoint:
    """The memory server for one answerer's probes: one listener for every state, re-pinned to
    each checkpoint's workspace version between states (so an agent holding a session on a fixed
    URL keeps it)."""

    def __init__(self, http: Any, service: Any) -> None:
        self.http = http
        self.service = service

    def pin(self, version: str | None) -> None:
        self.service.pin(version)

    def tagged_url(self, tag: str) -> str:
        return str(self.http.tagged_url(tag))


@contextmanager
def memory_endpoint(
    workspace: Path,
    index: Any,
    call_log: Path,
    *,
    url: str | None = None,
    token: str | None = None,
    note_date: str | None = None,
) -> Iterator[MemoryEndpoint]:
    """The memory server over HTTP at ``url`` (default a free loopback port); ``note_date``
    (ISO) fixes the dated notes file ``memory_append`` writes (default today)."""
    from memory_server.http import HttpServerThread
    from memory_server.server import build_server
    from memory_server.service import MemoryService
    from memory_server.workspace import Workspace

    host, port = memory_binding(url, token) if url else ("127.0.0.1", 0)
    service = MemoryService(
        Workspace.open(workspace), index, call_log=call_log, note_date=note_date
    )
    server = build_server(workspace, service=service, transport="streamable-http")
    with HttpServerThread(server, host=host, port=port, token=token) as http:
        log.info("memory_server_listening", url=http.url)
        yield MemoryEndpoint(http, service)
