"""The ``Toolset`` seam: what the agent loop executes tool calls through.

Above: the agent loop (offers ``specs()`` to the backbone, sends executable calls to
``call``). Below: MCP servers over stdio or streamable HTTP (``runtime.mcp_client``), or
nothing. A tool failure is a result with ``is_error=True``, never an exception. The whole
contract is the ``Toolset`` base class; every toolset subclasses it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pydantic import BaseModel

from runtime.messages import ToolSpec


class ToolOutcome(BaseModel):
    text: str
    is_error: bool = False
    structured: Any = None


class Toolset(ABC):
    @abstractmethod
    def specs(self) -> list[ToolSpec]:
        """The tools offered to the backbone."""

    @abstractmethod
    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run one tool; an unknown tool or a failure is an error outcome, never a raise."""


class NoTools(Toolset):
    """An agent without tools."""

    def specs(self) -> list[ToolSpec]:
        return []

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(text=f"no tool named {name!r} is available", is_error=True)
