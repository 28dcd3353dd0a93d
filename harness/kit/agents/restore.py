"""A restore point written for a session built in code: its snapshot in a folder of its own.

Above: MIRAGE's checkpoints (which add a manifest naming the trunk) and CUE's ``agent`` memory
system (an empty session per profile whose system prompt says where the memory is). Below:
``runtime.snapshot`` (content-addressed session files).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from runtime.session import Session
from runtime.snapshot import save_snapshot


class SessionPoint(BaseModel):
    """A ``RestorePoint`` (``harness.kit.agents.base``) of one saved session."""

    model_config = ConfigDict(frozen=True)

    directory: Path
    state: str
    snapshot: str
    """The snapshot's file name inside ``directory``."""
    snapshot_sha256: str
    workspace_version: str | None = None
    eit: int
    compaction_count: int

    @property
    def snapshot_path(self) -> Path:
        return self.directory / self.snapshot


def save_session_point(
    directory: Path, session: Session, *, workspace_version: str | None = None
) -> SessionPoint:
    """``session`` saved as the only snapshot of ``directory`` (what an earlier attempt left
    there is replaced); the point's state is the folder's name."""
    if directory.exists():
        shutil.rmtree(directory)
    snapshot = save_snapshot(session, directory)
    return SessionPoint(
        directory=directory,
        state=directory.name,
        snapshot=snapshot.name,
        snapshot_sha256=snapshot.name.removesuffix(snapshot.suffix),
        workspace_version=workspace_version,
        eit=session.ledger.current_eit,
        compaction_count=session.compaction_count,
    )
