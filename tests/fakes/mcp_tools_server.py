"""A small real MCP server for agent-loop tests, run as a stdio subprocess:
``python tests/fakes/mcp_tools_server.py LOGFILE``. Every call is appended to LOGFILE."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

LOG = Path(sys.argv[1]) if len(sys.argv) > 1 else None
FACTS = {"rent_2019": "1,240 EUR", "steps_record": "23,118"}

server = MCPServer("test-tools")


def _log(tool: str, arguments: dict[str, object]) -> None:
    if LOG is not None:
        with LOG.open("a") as handle:
            handle.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool()
def lookup(key: str) -> str:
    """Look up a stored fact by key."""
    _log("lookup", {"key": key})
    if key not in FACTS:
        raise ToolError(f"unknown key {key!r}")
    return FACTS[key]


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    _log("add", {"a": a, "b": b})
    return a + b


if __name__ == "__main__":
    server.run("stdio")
