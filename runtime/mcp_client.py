"""MCP client side of the runtime: a ``Toolset`` over one or more MCP servers.

Above: the agent loop (``specs()`` / ``call()``). Below: the mcp SDK's ``Client`` over a stdio
subprocess (``command`` + ``args``; the environment is passed explicitly because the stdio
client forwards only a whitelist) or a streamable-HTTP URL (optional headers, e.g. a bearer
token or an attribution tag). Tool errors and transport failures become error outcomes.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
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

        return StdioServerParameters(
            command=config.command,
            args=config.args,
            env={**offline_env(), **config.env},
            cwd=config.cwd,
        )
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
                listed = await self._clients[server.name].list_tools()
                for tool in listed.tools:
                    self._specs.append(
                        ToolSpec(
                            name=tool.name,
                            description=tool.description or "",
                            parameters=dict(tool.input_schema),
                        )
                    )
                    self._route[tool.name] = server.name
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
        try:
            result = await self._clients[server].call_tool(name, arguments)
        except Exception as exc:  # transport failure: an error outcome, not a crash
            log.warning("mcp_call_failed", tool=name, server=server, error=str(exc))
            return ToolOutcome(text=f"tool {name!r} failed: {exc}", is_error=True)
        return ToolOutcome(
            text=result_text(result),
            is_error=bool(result.is_error),
            structured=result.structured_content,
        )
