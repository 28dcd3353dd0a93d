"""A new session for an agent config on a backbone's window, with the workspace hint when the
agent has a workspace."""

from __future__ import annotations

from pathlib import Path

from runtime.session import AgentConfig, Session, WorkspaceRef

WORKSPACE_HINT = (
    "Your persistent workspace holds the user's artifacts (charts, screenshots, documents), "
    "derived records and dated notes. Use artifact_recall to search it and artifact_get to "
    "read one file; cite artifacts by their artifact id."
)


def new_session(config: AgentConfig, backbone_window: int, workspace: Path | None) -> Session:
    window = min(config.context_window or backbone_window, backbone_window)
    if workspace is not None and config.workspace_hint is None:
        config = config.model_copy(update={"workspace_hint": WORKSPACE_HINT})
    ref = WorkspaceRef(path=str(workspace)) if workspace is not None else None
    return Session.new(config, context_window=window, workspace=ref)
