"""Defaults that take more than one package, wired here and nowhere else.

- the memory server as a stdio child of this interpreter (``mirage chat``; tests), started the
  one way it starts: ``python -m mirage memory serve …``;
- the tools ``mirage parse`` and ``mirage compliance`` offer by default: the memory server's
  retrieval tools exactly as its MCP server advertises them (``memory_server.tools_specs``).
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

from memory_server import tools_specs
from runtime.mcp_client import MCPServerConfig
from runtime.messages import ToolSpec

RETRIEVAL_TOOL_NAMES = ("artifact_recall", "artifact_get")


def memory_server_stdio(
    workspace: Path, tag: str | None = None, log_file: Path | None = None
) -> MCPServerConfig:
    """The bundled memory server as a stdio subprocess of this Python; with ``log_file`` its
    logs go there instead of this process's stderr (a chat screen shows no server logs)."""
    args = ["-m", "mirage", "memory", "serve", "--workspace", str(workspace)]
    if tag:
        args += ["--tag", tag]
    if log_file is not None:
        args += ["--log-file", str(log_file)]
    return MCPServerConfig(name="memory", command=sys.executable, args=args)


def memory_server_log(workspace: Path) -> Path:
    """Where a chat's memory-server child writes its logs."""
    return workspace / ".mirage" / "server.log"


@cache
def default_tools() -> tuple[ToolSpec, ...]:
    """``artifact_recall`` and ``artifact_get`` as the memory server offers them (the first
    call imports the MCP SDK)."""
    specs = {spec.name: spec for spec in tools_specs()}
    return tuple(specs[name] for name in RETRIEVAL_TOOL_NAMES)


def artifact_recall_tool() -> ToolSpec:
    return default_tools()[0]
