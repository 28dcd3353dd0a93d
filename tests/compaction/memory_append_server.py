"""A real MCP server offering ``memory_append`` over a real ``memory_server`` workspace, run as
a stdio subprocess: ``python memory_append_server.py WORKSPACE``. It stands in for the memory
server's MCP endpoint in compaction tests (the write goes through ``Workspace.append_note``)."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

from memory_server.workspace import Workspace

WORKSPACE = Workspace.open(Path(sys.argv[1]))
server = MCPServer("memory-append")


@server.tool()
def memory_append(text: str) -> str:
    """Append durable notes to today's memory/YYYY-MM-DD.md in the workspace (append-only)."""
    landed = WORKSPACE.append_note(text)
    return f"appended to {landed.path}#L{landed.start_line}-L{landed.end_line}"


@server.tool()
def artifact_get(path: str) -> str:
    """Read one workspace file as text."""
    return WORKSPACE.read_bytes(path).decode("utf-8")


if __name__ == "__main__":
    server.run("stdio")
