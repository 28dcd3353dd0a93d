"""Pooled connections to the memory server for answerers that call it on every probe.

Above: ``BuiltinAgent`` (its agent turn's toolset) and ``reference/retriever`` (one
``artifact_recall`` per probe). Below: ``runtime.mcp_client.MCPConnectionPool``, one per plain
endpoint. A probe's tagged URL ``…/t/<tag>/mcp`` becomes that endpoint plus the header
``X-Mirage-Tag: <tag>`` on a connection lent to that probe alone, so the server attributes
every call to its probe at any concurrency, and a probe does not pay for opening a connection
(HTTP client, protocol negotiation, ``tools/list``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from runtime.mcp_client import MCPConnectionPool, MCPServerConfig
from runtime.toolset import Toolset


class MemoryConnections:
    """``async with connections.lease(url) as tools:`` the memory server's tools at ``url``
    (a probe's tagged URL or a plain one) on a pooled connection; ``aclose()`` closes them all
    (before the server stops)."""

    def __init__(self) -> None:
        self._pools: dict[str, MCPConnectionPool] = {}

    @asynccontextmanager
    async def lease(self, url: str) -> AsyncIterator[Toolset]:
        from memory_server.http import untagged
        from memory_server.server import TAG_HEADER

        endpoint, tag = untagged(url)
        pool = self._pools.get(endpoint)
        if pool is None:
            config = MCPServerConfig(name="memory", url=endpoint)
            pool = self._pools[endpoint] = MCPConnectionPool(config)
        async with pool.lease({TAG_HEADER: tag} if tag else {}) as tools:
            yield tools

    async def aclose(self) -> None:
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await pool.aclose()
