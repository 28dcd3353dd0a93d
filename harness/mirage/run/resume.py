"""The check before any work that the output folder can be resumed with this configuration:
shard, the study it holds (``study.json``: a resume keeps every option that defines checkpoints
or records, and may only add probes), scoring profile, summary format of each recorded state,
and the finished family read back against the records that name its checkpoints.

Above: ``MirageRun``. Below: the results logs, the study and shard file, the family's files,
and ``RunConfig``'s declarations (which options are kept, how each is spelt as a flag).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.kit.options import DeclaredOption, Given
from harness.kit.results import RESULTS_FILE, read_records
from harness.mirage.config import KEPT, RUN_OPTIONS, STUDY_FILE_ONLY, flag_of
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.run.errors import ResumeError

if TYPE_CHECKING:
    from harness.mirage.run.family import TrunkFamily
    from harness.mirage.run.layout import RunLayout


def check_resumable(run: RunLayout, family: TrunkFamily, family_id: str | None) -> None:
    """Refuse to resume result folders scored under another profile (their prompts differ
    too, so the records would not be comparable) or whose S2 came from another format."""
    from harness.mirage.run.shards import shard_conflict

    conflict = shard_conflict(run.out, run.config.shard)
    if conflict is not None:
        raise ResumeError(conflict)
    check_same_study(run, family_id)
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


def fixed_keys(options: Mapping[str, DeclaredOption] = RUN_OPTIONS) -> tuple[str, ...]:
    """The study keys of the options declared ``KEPT``, in ``RunConfig``'s order."""
    return tuple(str(o.study_key) for o in options.values() if o.option.study is KEPT)


FIXED_KEYS = fixed_keys()
"""Study keys (``harness.mirage.run.shards.study_file``) that define a run folder's checkpoints or
records (the options ``RunConfig`` declares ``KEPT``): a resume keeps each of them."""

AGENT_KEYS = ("agent_kind", "agent_model")
"""The agent under test: an answerer on the run's trunk (``openai:``, ``cmd:``, each in its own
folder) may change on a resume; an agent that builds its own trunk (a named agent, OpenClaw)
may not, nor may a run switch to or from one."""


def check_same_study(run: RunLayout, family_id: str | None) -> None:
    """A resume keeps every option that defines checkpoints or records (``FIXED_KEYS``, the
    pack's content, the first summary format, the checkpoint family ``family_id``) and may
    only add probes (summary formats, calibration arms, conditions, repeats, questions);
    anything else is refused in one line naming the option with both values. Answerers may
    change (``--model``, an ``openai:``/``cmd:`` agent): each has its own folder; an agent that
    builds its own trunk may not (``AGENT_KEYS``)."""
    from harness.mirage.run.shards import earlier_study, study_file

    try:
        earlier = earlier_study(run.out)
    except ValueError as exc:
        raise ResumeError(str(exc)) from exc
    if earlier is None:
        return
    now = study_file(run.config, run.pack.root, family_id)
    before, after = earlier.study, now.study
    for key in FIXED_KEYS:
        if key in before and before[key] != after.get(key):
            raise ResumeError(_changed(run.out, key, before[key], after.get(key)))
    _check_trunk_agent(run, before, after)
    if earlier.pack_digest != now.pack_digest:
        raise ResumeError(
            f"{run.out} holds a study of pack {before.get('pack')} as it was (digest "
            f"{earlier.pack_digest[:12]}); its files changed since ({now.pack_digest[:12]}): "
            "restore them, or use a new --out"
        )
    _check_only_grows(run, before, after)
    if earlier.family is not None and earlier.family != now.family:
        raise ResumeError(
            f"{run.out} holds checkpoint family {earlier.family}; this run's trunk is "
            f"{now.family}: its records would mix two trunks; use a new --out"
        )


def _check_trunk_agent(run: RunLayout, before: dict[str, Any], after: dict[str, Any]) -> None:
    from harness.mirage.config import NAMED_AGENTS

    if before.get("agent_kind") not in NAMED_AGENTS and after["agent_kind"] not in NAMED_AGENTS:
        return
    for key in AGENT_KEYS:
        if key in before and before[key] != after[key]:
            raise ResumeError(_changed(run.out, key, before[key], after[key]))


def _check_only_grows(run: RunLayout, before: dict[str, Any], after: dict[str, Any]) -> None:
    formats = before.get("summary_formats")
    if formats and formats[0] != after["summary_formats"][0]:
        raise ResumeError(
            _changed(run.out, "summary_formats", formats, after["summary_formats"])
            + " (the first format is the trunk's own S2)"
        )
    for key in ("summary_formats", "calibration_formats", "conditions"):
        left_out = [item for item in before.get(key) or [] if item not in after[key]]
        if left_out:
            raise ResumeError(_left_out(run.out, key, left_out, before[key], after[key]))
    if after["repeats"] < before.get("repeats", 1):
        raise ResumeError(_left_out(run.out, "repeats", [], before["repeats"], after["repeats"]))
    if "limit" in before:
        from harness.mirage.run.layout import select_questions

        earlier = {q.id for q in select_questions(list(run.pack.questions), before["limit"])}
        missing = sorted(earlier - {question_id for question_id, _, _ in run.questions()})
        if missing:
            raise ResumeError(
                _left_out(run.out, "limit", missing[:3], before["limit"], after["limit"])
            )


def _shown(key: str, value: Any) -> str:
    """An option with its value as the user gives it (a flag, or a study file's key)."""
    option = RUN_OPTIONS.get(key)
    if value is None and option is not None and option.option.given is Given.ZERO_FOR_NONE:
        value = 0  # limit: every question, as --limit 0 says
    if key in STUDY_FILE_ONLY:
        return f"{key} = {'(default)' if value is None else value}"
    if isinstance(value, bool):
        return f"--{'' if value else 'no-'}{key.replace('_', '-')}"
    shown = ",".join(map(str, value)) if isinstance(value, list) else value
    return f"{flag_of(key)} {'(default)' if shown is None else shown}"


def _changed(out: Path, key: str, before: Any, after: Any) -> str:
    return (
        f"{out} holds a study run with {_shown(key, before)}, this run has "
        f"{_shown(key, after)}: its checkpoints and records would mix two studies; resume with "
        f"{_shown(key, before)}, or use a new --out"
    )


def _left_out(out: Path, key: str, items: list[Any], before: Any, after: Any) -> str:
    named = f" ({', '.join(map(str, items))})" if items else ""
    return (
        f"{out} holds a study run with {_shown(key, before)}, this run has "
        f"{_shown(key, after)}, which leaves out probes already recorded there{named}; a resume "
        "may only add probes: give at least what it had, or use a new --out"
    )


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
    from harness.mirage.trunk.checkpoints import FAMILY_FILE

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
