"""Builds a ready agent from a config: backbone, session, and the default MCP tools."""

from __future__ import annotations

import sys
from pathlib import Path

from runtime.mcp_client import MCPServerConfig
from runtime.session import AgentConfig, Session, WorkspaceRef

WORKSPACE_HINT = (
    "Your persistent workspace holds the user's artifacts (charts, screenshots, documents), "
    "derived records and dated notes. Use artifact_recall to search it and artifact_get to "
    "read one file; cite artifacts by their artifact id."
)


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


def new_session(config: AgentConfig, backbone_window: int, workspace: Path | None) -> Session:
    window = min(config.context_window or backbone_window, backbone_window)
    if workspace is not None and config.workspace_hint is None:
        config = config.model_copy(update={"workspace_hint": WORKSPACE_HINT})
    ref = WorkspaceRef(path=str(workspace)) if workspace is not None else None
    return Session.new(config, context_window=window, workspace=ref)
