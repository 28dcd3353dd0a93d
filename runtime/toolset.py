"""The ``Toolset`` seam: what the agent loop executes tool calls through.

Above: the agent loop (offers ``specs()`` to the backbone, sends executable calls to
``call``). Below: MCP servers over stdio or streamable HTTP (``runtime.mcp_client``), or
nothing. A tool failure is a result with ``is_error=True``, never an exception.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel

from runtime.messages import ToolSpec


class ToolOutcome(BaseModel):
    text: str
    is_error: bool = False
    structured: Any = None


class Toolset(Protocol):
    def specs(self) -> list[ToolSpec]: ...

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome: ...


class NoTools:
    """An agent without tools."""

    def specs(self) -> list[ToolSpec]:
        return []

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(text=f"no tool named {name!r} is available", is_error=True)
