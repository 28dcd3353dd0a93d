"""MCP client side of the runtime: a ``Toolset`` over one or more MCP servers, and a pool of
reusable connections to one server.

Above: the agent loop (``specs()`` / ``call()``) and the harness, which runs many short probe
turns against one memory server. Below: the mcp SDK's ``Client`` over a stdio subprocess
(``command`` + ``args``; the environment is passed explicitly because the stdio client
forwards only a whitelist) or a streamable-HTTP URL (optional headers, e.g. a bearer token or
an attribution tag). Tool errors and transport failures become error outcomes.

``MCPConnectionPool`` keeps streamable-HTTP connections open across turns: opening one
(HTTP client, protocol negotiation, ``tools/list``) costs tens of milliseconds, a call about one.
Each connection is lent to one user at a time, with headers of that lease on every request
it sends (the memory server attributes a call by its ``X-Mirage-Tag`` header), so concurrent
leases never share a header. A connection lives in a task of its own: the SDK's transport is
an anyio task group, which must be left by the task that entered it, while leases come from
any task.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.messages import ToolSpec
from runtime.offline import offline_env
from runtime.toolset import ToolOutcome, Toolset

log = structlog.get_logger(__name__)


class MCPServerConfig(BaseModel):
    """One MCP server: either ``command`` (stdio) or ``url`` (streamable HTTP)."""

    model_config = ConfigDict(extra="forbid")

    name: str = "memory"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = 60.0

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of 'command' or 'url'")
        return self


def _transport(config: MCPServerConfig) -> Any:
    if config.command is not None:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        parameters = StdioServerParameters(
            command=config.command,
            args=config.args,
            env={**offline_env(), **config.env},
            cwd=config.cwd,
        )
        # the server's stderr goes to ours as it is now: stdio_client's default is the stream
        # sys.stderr was when mcp was first imported (a test runner's capture, say)
        return stdio_client(parameters, errlog=sys.stderr)
    assert config.url is not None
    if not config.headers:
        return config.url
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(headers=config.headers, timeout=config.timeout_s)
    return streamable_http_client(config.url, http_client=client)


def result_text(result: Any) -> str:
    """Flatten an MCP ``CallToolResult`` into the text a model reads."""
    texts = [block.text for block in result.content if block.type == "text"]
    if texts:
        return "\n".join(texts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return ""


class MCPToolset(Toolset):
    """Connects to MCP servers on ``__aenter__`` and routes calls by tool name."""

    def __init__(self, servers: list[MCPServerConfig]) -> None:
        self.servers = servers
        self._stack: AsyncExitStack | None = None
        self._clients: dict[str, Any] = {}
        self._specs: list[ToolSpec] = []
        self._route: dict[str, str] = {}

    async def __aenter__(self) -> MCPToolset:
        from mcp.client import Client

        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            for server in self.servers:
                client = Client(_transport(server), read_timeout_seconds=server.timeout_s)
                self._clients[server.name] = await stack.enter_async_context(client)
                for spec in await listed_specs(self._clients[server.name]):
                    self._specs.append(spec)
                    self._route[spec.name] = server.name
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._stack is not None:
            await self._stack.aclose()
        self._stack = None
        self._clients.clear()

    def specs(self) -> list[ToolSpec]:
        return list(self._specs)

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        server = self._route.get(name)
        if server is None:
            return ToolOutcome(text=f"no tool named {name!r} is available", is_error=True)
        outcome, _ = await call_tool(self._clients[server], server, name, arguments)
        return outcome


async def listed_specs(client: Any) -> list[ToolSpec]:
    """The server's tools as ``ToolSpec``s."""
    listed = await client.list_tools()
    return [
        ToolSpec(
            name=tool.name, description=tool.description or "", parameters=dict(tool.input_schema)
        )
        for tool in listed.tools
    ]


async def call_tool(
    client: Any, server: str, name: str, arguments: dict[str, Any]
) -> tuple[ToolOutcome, bool]:
    """One call; the outcome and whether the transport failed (an error outcome either way)."""
    try:
        result = await client.call_tool(name, arguments)
    except Exception as exc:  # transport failure: an error outcome, not a crash
        log.warning("mcp_call_failed", tool=name, server=server, error=str(exc))
        return ToolOutcome(text=f"tool {name!r} failed: {exc}", is_error=True), True
    outcome = ToolOutcome(
        text=result_text(result),
        is_error=bool(result.is_error),
        structured=result.structured_content,
    )
    return outcome, False


class _PooledConnection:
    """One open MCP session over streamable HTTP, held open by its own task."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.client: Any = None
        self.http: Any = None
        self.specs: list[ToolSpec] = []
        self.broken = False
        self._lent: dict[str, str] = {}
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self._task = asyncio.create_task(self._hold(), name=f"mcp-{self.config.name}")
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait({self._task, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if not self._ready.is_set():
            await self._task  # raises what opening raised

    async def _hold(self) -> None:
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        assert self.config.url is not None
        async with AsyncExitStack() as stack:
            self.http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=self.config.headers, timeout=self.config.timeout_s)
            )
            transport = streamable_http_client(self.config.url, http_client=self.http)
            client = Client(transport, read_timeout_seconds=self.config.timeout_s)
            self.client = await stack.enter_async_context(client)
            self.specs = await listed_specs(self.client)
            self._ready.set()
            await self._closing.wait()

    @property
    def alive(self) -> bool:
        """Open and not failed (its task ends when the server drops the session)."""
        return not self.broken and self._task is not None and not self._task.done()

    def lend(self, headers: dict[str, str]) -> None:
        """Send ``headers`` with every request until ``reclaim``."""
        self.http.headers.update(headers)
        self._lent = dict(headers)

    def reclaim(self) -> None:
        for key in self._lent:
            self.http.headers.pop(key, None)
        self.http.headers.update(self.config.headers)
        self._lent = {}

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None:
            try:
                await self._task
            except Exception as exc:  # closing a connection whose server went away
                log.info("mcp_pool_close_failed", server=self.config.name, error=str(exc))


class _LeasedTools(Toolset):
    """The ``Toolset`` of one lease: the pooled connection's tools, calls on it."""

    def __init__(self, connection: _PooledConnection) -> None:
        self._connection = connection

    def specs(self) -> list[ToolSpec]:
        return list(self._connection.specs)

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        connection = self._connection
        if name not in {spec.name for spec in connection.specs}:
            return ToolOutcome(text=f"no tool named {name!r} is available", is_error=True)
        outcome, failed = await call_tool(
            connection.client, connection.config.name, name, arguments
        )
        connection.broken = connection.broken or failed
        return outcome


class MCPConnectionPool:
    """Reusable connections to one streamable-HTTP MCP server (see the module docstring).

    ``async with pool.lease({"X-Mirage-Tag": tag}) as tools:`` lends an idle connection, or
    opens one, with those headers on its requests until the lease ends; a connection whose
    transport failed is closed instead of returned. ``aclose()`` closes every idle one."""

    def __init__(self, config: MCPServerConfig) -> None:
        if config.url is None:
            raise ValueError(f"MCP server {config.name!r}: a pool needs a streamable-HTTP url")
        self.config = config
        self._idle: list[_PooledConnection] = []
        self.opened = 0

    @asynccontextmanager
    async def lease(self, headers: dict[str, str] | None = None) -> AsyncIterator[Toolset]:
        connection = await self._take()
        connection.lend(headers or {})
        try:
            yield _LeasedTools(connection)
        except asyncio.CancelledError:
            connection.broken = True  # a call may still be in flight on it
            raise
        finally:
            connection.reclaim()
            if connection.broken:
                await connection.close()
            else:
                self._idle.append(connection)

    async def _take(self) -> _PooledConnection:
        """An idle connection still alive, or a new one."""
        while self._idle:
            connection = self._idle.pop()
            if connection.alive:
                return connection
            await connection.close()
        return await self._open()

    async def _open(self) -> _PooledConnection:
        connection = _PooledConnection(self.config)
        await connection.open()
        self.opened += 1
        return connection

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.close()
