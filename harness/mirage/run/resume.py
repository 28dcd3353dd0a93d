"""The check before any work that the output folder can be resumed with this configuration:
shard, scoring profile, summary format of each recorded state, and the finished family read back
against the records that name its checkpoints.

Above: ``MirageRun``. Below: the results logs, the shard file, the family's files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.kit.results import RESULTS_FILE, read_records
from harness.mirage.records import ProbeRecord
from harness.mirage.run.errors import ResumeError

if TYPE_CHECKING:
    from harness.mirage.run.family import TrunkFamily
    from harness.mirage.run.layout import RunLayout


def check_resumable(run: RunLayout, family: TrunkFamily) -> None:
    """Refuse to resume result folders scored under another profile (their prompts differ
    too, so the records would not be comparable) or whose S2 came from another format."""
    from harness.mirage.shards import shard_conflict

    conflict = shard_conflict(run.out, run.config.shard)
    if conflict is not None:
        raise ResumeError(conflict)
    if run.config.retry_errors and not any(
        (folder / RESULTS_FILE).is_file() for folder in run.result_dirs()
    ):
        raise ResumeError(f"{run.out} has no results to retry: run without --retry-errors")
    recorded: dict[Path, list[ProbeRecord]] = {}
    for folder in run.result_dirs():
        if (folder / RESULTS_FILE).is_file():
            recorded[folder] = read_records(folder, ProbeRecord)
            _check_records(run, folder, recorded[folder])
    _check_family_read_back(family, recorded)


def _check_records(run: RunLayout, folder: Path, records: list[ProbeRecord]) -> None:
    other = sorted({r.scoring for r in records} - {run.config.scoring})
    if other:
        raise ResumeError(
            f"{folder / RESULTS_FILE} holds records of scoring profile "
            f"{', '.join(other)}; resume with --scoring {other[0]} or use a new --out"
        )
    formats = run.state_formats()
    for record in records:
        expected = formats.get(record.state)
        if record.summary_format not in (None, expected):
            raise ResumeError(
                f"{folder / RESULTS_FILE} holds {record.state} records under summary "
                f"format {record.summary_format}, this run's {record.state} is {expected}: "
                f"give --summary-format {record.summary_format} first or use a new --out"
            )


def _check_family_read_back(family: TrunkFamily, recorded: dict[Path, list[ProbeRecord]]) -> None:
    """A finished family is read back (strictly, each checkpoint against what names it)
    before anything is written, and the records already probed on it must name its
    checkpoints: a checkpoint replaced since (hashes and all) is refused, not probed."""
    from harness.mirage.checkpoints import FAMILY_FILE

    if not (family.directory / FAMILY_FILE).is_file():
        return
    checkpoints = family.existing()
    if checkpoints is None:
        return
    for folder, records in recorded.items():
        for record in records:
            checkpoint = checkpoints.get(record.state)
            named = record.checkpoint_sha256
            if checkpoint is None or named in (None, checkpoint.snapshot_sha256):
                continue
            raise ResumeError(
                f"{folder / RESULTS_FILE}: its {record.state} records were probed on "
                f"checkpoint {str(named)[:12]}, {checkpoint.directory} holds "
                f"{checkpoint.snapshot_sha256[:12]}: the checkpoint changed since they were "
                "recorded; restore it, or use a new --out"
            )
