"""``mirage rescore``'s path upgrade: an older record's two-way label (``path_source`` ``binary``)
becomes the four-way path, recomputed from the checkpoint it was probed from.

Above: ``mirage rescore``. Below: the run's checkpoint folders
(``harness.mirage.trunk.checkpoints``: a record names its checkpoint by ``checkpoint_sha256``), the
pack the checkpoint's trunk was built from (the gold's artifact keywords), the built-in runtime's
view of a restored session (``harness.kit.agents.builtin.session_context``: what every adapter
restoring a runtime snapshot was given) and the record's own tool calls. A record whose checkpoint
is gone, is not a runtime snapshot (OpenClaw's) or whose pack cannot be loaded keeps its binary
label, and the count of those is reported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import structlog

from harness.kit.agents.builtin import session_context
from harness.kit.agents.context import ProbeContext
from harness.kit.packfiles import PackFormatError
from harness.mirage.packs import Pack, load_pack
from harness.mirage.probing.records import ProbeRecord, path_fields
from harness.mirage.scoring import Gold
from harness.mirage.trunk.checkpoints import MANIFEST, Checkpoint, CheckpointError, read_checkpoint
from runtime.snapshot import SnapshotCache, SnapshotError

log = structlog.get_logger(__name__)

CHECKPOINTS = "checkpoints"


def checkpoint_roots(result_dir: Path) -> list[Path]:
    """Where a result folder's checkpoints live: ``<out>/checkpoints`` next to it (a run's
    layout, ``<out>/<answerer>/results.jsonl``) or inside it."""
    return [root for root in (result_dir.parent / CHECKPOINTS, result_dir / CHECKPOINTS)]


def find_checkpoints(roots: Iterable[Path]) -> dict[str, Checkpoint]:
    """Every readable checkpoint under ``roots`` (``<family>/<state>/manifest.json``) by its
    snapshot hash; unreadable ones are skipped (their records stay binary)."""
    found: dict[str, Checkpoint] = {}
    for root in roots:
        for manifest in sorted(root.glob(f"*/*/{MANIFEST}")):
            try:
                checkpoint = read_checkpoint(manifest.parent)
            except CheckpointError as exc:
                log.warning(
                    "repath.checkpoint_unreadable", checkpoint=str(manifest), error=str(exc)
                )
                continue
            found.setdefault(checkpoint.snapshot_sha256, checkpoint)
    return found


class PathUpgrader:
    """Recomputes binary paths from the checkpoints it was given (each restored once)."""

    def __init__(self, checkpoints: dict[str, Checkpoint]) -> None:
        self.checkpoints = checkpoints
        self._snapshots = SnapshotCache()
        self._contexts: dict[str, ProbeContext | None] = {}
        self._packs: dict[str, Pack | None] = {}
        self.outcomes: Counter[str] = Counter()

    def upgrade(self, record: ProbeRecord) -> ProbeRecord:
        """``record`` with its path recomputed from its checkpoint (``path_source``
        ``checkpoint``) when it is binary and that checkpoint is still there; else as it is."""
        if record.path_source != "binary" or not record.scored:
            return record
        checkpoint = self.checkpoints.get(record.checkpoint_sha256 or "")
        if checkpoint is None:
            return self._kept(record, "checkpoint_gone")
        context = self._context(checkpoint)
        gold = self._gold(record, checkpoint)
        if context is None or gold is None or record.gold is None:
            return self._kept(record, "no_context" if context is None else "no_keywords")
        fields = path_fields(gold, record.tool_calls, context, source="checkpoint")
        self.outcomes["checkpoint"] += 1
        return record.model_copy(update={**fields, "gold": gold})

    def _kept(self, record: ProbeRecord, why: str) -> ProbeRecord:
        self.outcomes[f"binary ({why})"] += 1
        return record

    def _context(self, checkpoint: Checkpoint) -> ProbeContext | None:
        key = checkpoint.snapshot_sha256
        if key not in self._contexts:
            try:
                session = self._snapshots.restore(checkpoint.snapshot_path)
            except (SnapshotError, OSError) as exc:
                log.warning(
                    "repath.not_a_runtime_snapshot",
                    checkpoint=str(checkpoint.directory),
                    error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                )
                self._contexts[key] = None
            else:
                self._contexts[key] = session_context(session)
        return self._contexts[key]

    def _gold(self, record: ProbeRecord, checkpoint: Checkpoint) -> Gold | None:
        """The record's gold with its artifact and keywords (from the trunk's pack when the
        record predates them)."""
        gold = record.gold
        if gold is None:
            return None
        if gold.artifact is not None and gold.keywords:
            return gold
        pack = self._pack(checkpoint.manifest.trunk.pack)
        if pack is None:
            return None
        try:
            return pack.gold(pack.question(record.question_id))
        except (KeyError, PackFormatError) as exc:
            log.warning("repath.no_keywords", question=record.question_id, error=str(exc))
            return None

    def _pack(self, name: str) -> Pack | None:
        if name not in self._packs:
            try:
                self._packs[name] = load_pack(name)
            except PackFormatError as exc:
                log.warning("repath.pack_unreadable", pack=name, error=exc.summary())
                self._packs[name] = None
        return self._packs[name]


def upgrade_paths(
    result_dir: Path, records: list[ProbeRecord]
) -> tuple[list[ProbeRecord], Counter[str]]:
    """``records`` with every binary path recomputed where its checkpoint is still there, and
    how many were upgraded or kept binary (and why)."""
    upgrader = PathUpgrader(find_checkpoints(checkpoint_roots(result_dir)))
    upgraded = [upgrader.upgrade(record) for record in records]
    return upgraded, upgrader.outcomes
