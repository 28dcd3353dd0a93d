"""Every summary format but the trunk's own: its compaction states branched from a fresh restore
of the trunk's branch point (the paper's appendix A.2), so the shared trunk and its S1 states are
built once. Each branch runs on the workspace as the branch point had it (or as it was before the
trunk's flush, when the branch writes its own flush), never on what another branch wrote.

Above: the run's family (``harness.mirage.run.family``). Below: the trunk's runner and agent
(``harness.mirage.trunk.runner``), its checkpoints, the run's workspace versions
(``memory_server.workspace.Workspace``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

from compaction.config import split_format
from compaction.references import REFERENCE_SUMMARIZER_PREFIX
from compaction.strategies.base import ChunkProgress
from harness.mirage.packs import Pack
from harness.mirage.trunk.checkpoints import BRANCH_POINT, Checkpoint
from harness.mirage.trunk.driver import TrunkError
from harness.mirage.trunk.runner import TrunkModels, TrunkRunner, trunk_agent
from harness.mirage.trunk.states import DepthProfile
from runtime.snapshot import load_snapshot
from runtime.toolset import Toolset

log = structlog.get_logger(__name__)


def flush_writer(summary_format: str, summarizer_model: str) -> str | None:
    """Who writes the memory flush of a trunk or branch compacting with ``summary_format``
    (``summarizer_model``: the trunk's summarizer): a reference summarizer's name (it writes
    its declared notes, ``compaction.references.NoteWriter``), or None for the trunk model's
    own flush turn."""
    summarizer = split_format(summary_format)[1] or summarizer_model
    return summarizer if summarizer.startswith(REFERENCE_SUMMARIZER_PREFIX) else None


class WorkspaceVersions(Protocol):
    """The run's workspace as the branches need it (``memory_server.workspace.Workspace``)."""

    def snapshot(self) -> str: ...

    def checkout(self, version: str) -> None: ...


async def branch_formats(
    branch_point: Checkpoint,
    formats: Sequence[str],
    models: TrunkModels,
    toolset: Toolset | None,
    pack: Pack,
    profile: DepthProfile,
    workspace: WorkspaceVersions,
    trunk_format: str,
    on_branch: Callable[[str], None] | None = None,
    on_chunk: ChunkProgress | None = None,
) -> dict[str, dict[str, Checkpoint]]:
    """The compaction states of each format in ``formats``, each from a fresh restore of
    ``branch_point`` (written next to it, in the same family) on the workspace as the branch
    point had it: a format whose memory flush is the trunk's (``trunk_format``'s, the format
    the trunk compacted with) keeps the branch point's workspace version; any other writes its
    own flush on the version from before the trunk's, in its place. No format sees what
    another wrote, whatever their order; the working tree is left as it was found.
    ``on_branch`` is called with each format once its states are written, ``on_chunk`` with
    each summary's progress."""
    manifest = branch_point.manifest
    summarizer = manifest.trunk.summarizer_model
    trunk_writer = flush_writer(trunk_format, summarizer)
    found = workspace.snapshot()
    branches: dict[str, dict[str, Checkpoint]] = {}
    try:
        for summary_format in formats:
            own_flush = manifest.trunk.memory_flush and (
                flush_writer(summary_format, summarizer) != trunk_writer
            )
            workspace.checkout(_branch_base(branch_point, summary_format, own_flush))
            session = load_snapshot(branch_point.snapshot_path)
            agent = trunk_agent(
                session, manifest.trunk, profile, models, toolset, summary_format, on_chunk
            )
            runner = TrunkRunner(
                pack,
                manifest.trunk,
                profile,
                agent,
                branch_point.directory.parent,
                workspace.snapshot,
                summary_format,
            )
            runner.position = manifest.trunk_position
            runner.branched_from = BRANCH_POINT
            branches[summary_format] = await runner.run_branch(own_flush)
            log.info("summary_format_branched", summary_format=summary_format, flush=own_flush)
            if on_branch is not None:
                on_branch(summary_format)
    finally:
        workspace.checkout(found)
    return branches


def _branch_base(branch_point: Checkpoint, summary_format: str, own_flush: bool) -> str:
    """The workspace version a format's branch starts from (see ``branch_formats``)."""
    manifest = branch_point.manifest
    base = manifest.pre_flush_workspace_version if own_flush else manifest.workspace_version
    if base is None:
        raise TrunkError(
            f"summary format {summary_format}: {branch_point.directory} names no workspace "
            f"version{' from before the memory flush' if own_flush else ''} (a family built by "
            f"an earlier mirage): delete {branch_point.directory.parent} to rebuild the trunk"
        )
    return base
