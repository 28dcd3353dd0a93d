"""Shards: one study's probes spread over machines (``mirage run --shard K/N``), and
``mirage merge DIR… --out D`` joining the shards into one run folder.

A shard runs every K-th probe of the study's probe plan (positions ``K-1, K-1+N, …`` of the
state-major order of ``harness.mirage.probing.loop.plan_probes``), so the N shards partition the
plan and each holds about 1/N of it whatever the states, conditions and repeats.

The trunk and its checkpoints are *rebuilt on each machine* from the same configuration and
seed: a scripted trunk (``--trunk-model scripted``) is deterministic, so every shard's
checkpoints are byte-identical (same ``snapshot_sha256``; ``tests/harness/test_shards.py`` checks
it). A trunk played by a model that is not reproducible across machines can instead be built
once and shared: copy one shard's ``checkpoints/`` folder into the other shards' ``--out``
before they run (a run reuses a finished family). Either way ``mirage merge`` refuses shards
whose checkpoints differ, so a merged report never mixes two trunks.

Every run writes ``study.json`` (``StudyFile``, and beside it the resolved ``study.toml`` of
``harness.mirage.study``): its shard, the options that define the study
(pack, depth profile, scoring, conditions, questions, repeats, seed, models, summary formats,
…), the pack digest and the checkpoint family. ``mirage merge`` refuses, with a one-line reason,
shards of different studies (any of those fields, or the checkpoint hashes the records carry),
an incomplete or repeated set of shards, and shards whose probes overlap.

Above: ``MirageRun`` (``shard_keys``, ``write_study``) and ``mirage merge``. Below: the kit's
results log and report writer of ``harness.mirage.report``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping, Sequence
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.kit.options import DeclaredOption
from harness.kit.results import RESULTS_FILE, read_records, rewrite_records
from harness.kit.rundir import RUN_CONFIG, write_workspace_link
from harness.mirage.config import RUN_OPTIONS, RunConfig, Shard
from harness.mirage.probing.records import ProbeRecord, RecordKey
from harness.mirage.probing.visibility import VISIBILITY_FILE
from runtime.snapshot import validation_problem

if TYPE_CHECKING:
    from harness.mirage.probing.loop import ProbeTask
    from harness.mirage.report import ReportFiles

log = structlog.get_logger(__name__)

STUDY_FILE = "study.json"
CALL_LOG = "calls.jsonl"
SHARED_FILES = ("summaries.json", VISIBILITY_FILE)  # the same in every shard: copied once
SHARED_FOLDERS = ("workspace", "checkpoints")  # identical in every shard: copied once


class MergeError(ValueError):
    """Shards that cannot be merged; the message is one line naming the shards and why."""


def shard_keys(tasks: Iterable[ProbeTask], shard: Shard | None) -> list[RecordKey]:
    """The keys of ``tasks`` (the study's whole plan, in plan order) that ``shard`` runs."""
    return shard_slice([task.key for task in tasks], shard)


def shard_slice(keys: list[RecordKey], shard: Shard | None) -> list[RecordKey]:
    """The keys of the plan ``keys`` (in plan order) that ``shard`` runs."""
    if shard is None:
        return keys
    return keys[shard.index - 1 :: shard.count]


class StudyFile(BaseModel):
    """``study.json``: what makes two run folders shards of one study."""

    model_config = ConfigDict(extra="forbid")

    shard: str | None
    study: dict[str, Any]
    pack_digest: str
    family: str | None


def study_fields(options: Mapping[str, DeclaredOption] = RUN_OPTIONS) -> frozenset[str]:
    """The fields declared part of the study and held as themselves in ``study.json``."""
    return frozenset(name for name, option in options.items() if option.study_key == name)


STUDY_FIELDS = study_fields()
"""The ``RunConfig`` fields every shard of a study shares (machine-local ones such as
``--out``, ``--api-base``, an agent's URL or ``--concurrency`` may differ); the options held
resolved (``summarizer``, ``agent_kind``, ``calibration_formats``) are added by ``study_file``."""


def study_file(config: RunConfig, pack_root: Path, family: str | None) -> StudyFile:
    from harness.kit.agents.factory import agent_spec
    from harness.kit.rundir import pack_digest
    from harness.mirage.config import NAMED_AGENTS

    study = config.model_dump(mode="json", include=set(STUDY_FIELDS))  # then the resolved keys
    study["summarizer"] = config.summarizer
    study["agent_kind"] = agent_spec(config.agent, named=NAMED_AGENTS)[0] if config.agent else None
    study["calibration_formats"] = config.calibration_formats
    shard = None if config.shard is None else str(config.shard)
    return StudyFile(shard=shard, study=study, pack_digest=pack_digest(pack_root), family=family)


def write_study(config: RunConfig, pack_root: Path, family: str | None) -> Path:
    """``study.json`` of the run ``config`` (``family``: its checkpoint family, None for
    OpenClaw), and beside it ``study.toml``, the resolved study file that reruns the run
    (``harness.mirage.study``)."""
    from harness.mirage.study import write_study_toml

    path = config.out / STUDY_FILE
    study = study_file(config, pack_root, family)
    path.write_text(study.model_dump_json(indent=2) + "\n", encoding="utf-8")
    write_study_toml(config)
    return path


def _study_problem(path: Path) -> tuple[StudyFile | None, str]:
    try:
        return StudyFile.model_validate_json(path.read_bytes(), strict=True), ""
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"
    except ValidationError as exc:
        return None, f"not a valid study file ({validation_problem(exc)})"


def earlier_study(out: Path) -> StudyFile | None:
    """The ``study.json`` an earlier run wrote in ``out``, or None when there is none; one that
    cannot be read raises ``ValueError`` (one line)."""
    path = out / STUDY_FILE
    if not path.is_file():
        return None
    study, problem = _study_problem(path)
    if study is None:
        raise ValueError(f"{path}: {problem}; restore it, or use a new --out")
    return study


def read_study(folder: Path) -> StudyFile:
    path = folder / STUDY_FILE
    if not path.is_file():
        raise MergeError(f"{folder} has no {STUDY_FILE}: not the --out of a mirage run")
    study, problem = _study_problem(path)
    if study is None:
        raise MergeError(f"{path}: {problem}; re-run that shard")
    if study.shard is not None:
        try:
            Shard.parse(study.shard)
        except ValueError as exc:
            raise MergeError(f"{path}: names shard {study.shard!r} ({exc})") from exc
    return study


def shard_conflict(out: Path, shard: Shard | None) -> str | None:
    """Why ``shard`` cannot run on ``out`` (it holds another shard, the whole study, or a
    ``study.json`` that no longer says which), or None."""
    path = out / STUDY_FILE
    if not path.is_file():
        return None
    study, problem = _study_problem(path)
    if study is None:
        return (
            f"{path}: {problem}; it says which study and shard {out} holds: restore it, or use "
            "a new --out"
        )
    before = study.shard
    now = None if shard is None else str(shard)
    if before == now:
        return None
    held = f"shard {before}" if before else "an unsharded run"
    wanted = f"shard {now}" if now else "an unsharded run"
    return f"{out} holds {held}; {wanted} needs its own --out"


class _Shard:
    """One shard folder being merged."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.study = read_study(folder)
        self.results = sorted(
            p.parent.name for p in folder.glob(f"*/{RESULTS_FILE}") if p.parent.is_dir()
        )

    def records(self, name: str) -> list[ProbeRecord]:
        return read_records(self.folder / name / RESULTS_FILE, ProbeRecord)


def _check_same_study(shards: Sequence[_Shard]) -> None:
    first = shards[0]
    for other in shards[1:]:
        a, b = first.study, other.study
        fields = sorted(set(a.study) | set(b.study))
        for field in fields:
            if a.study.get(field) != b.study.get(field):
                raise MergeError(
                    f"{first.folder} and {other.folder} are shards of different studies: "
                    f"{field} is {a.study.get(field)!r} vs {b.study.get(field)!r}"
                )
        for label, mine, theirs in (
            ("pack digest", a.pack_digest, b.pack_digest),
            ("checkpoint family", a.family, b.family),
            ("result folders", first.results, other.results),
        ):
            if mine != theirs:
                raise MergeError(
                    f"{first.folder} and {other.folder} are shards of different studies: "
                    f"{label} is {mine} vs {theirs}"
                )


def _check_complete(shards: Sequence[_Shard]) -> None:
    parsed = [(s, Shard.parse(s.study.shard)) for s in shards if s.study.shard is not None]
    if len(parsed) != len(shards):
        whole = next(s.folder for s in shards if s.study.shard is None)
        raise MergeError(f"{whole} is not a shard (it ran without --shard): nothing to merge")
    counts = {shard.count for _, shard in parsed}
    if len(counts) > 1:
        raise MergeError(f"the shards split the study differently: N is {sorted(counts)}")
    (count,) = counts
    seen: dict[int, Path] = {}
    for shard_dir, shard in parsed:
        if shard.index in seen:
            raise MergeError(f"{seen[shard.index]} and {shard_dir.folder} are both shard {shard}")
        seen[shard.index] = shard_dir.folder
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing:
        raise MergeError(f"shard(s) {', '.join(missing)} missing: give every shard of the study")


def _checkpoint_hashes(records: Iterable[ProbeRecord]) -> dict[str, set[str]]:
    hashes: dict[str, set[str]] = {}
    for record in records:
        digest = record.checkpoint_sha256
        if isinstance(digest, str):
            hashes.setdefault(record.state, set()).add(digest)
    return hashes


def _check_checkpoints(name: str, by_shard: Sequence[tuple[_Shard, list[ProbeRecord]]]) -> None:
    """Every state's records come from one checkpoint across the shards."""
    seen: dict[str, tuple[str, Path]] = {}
    for shard, records in by_shard:
        for state, digests in _checkpoint_hashes(records).items():
            for digest in sorted(digests):
                first = seen.setdefault(state, (digest, shard.folder))
                if first[0] != digest:
                    raise MergeError(
                        f"{first[1]} and {shard.folder} probed different {state} checkpoints "
                        f"({first[0][:12]} vs {digest[:12]}) in {name}: their trunks differ; "
                        "copy one shard's checkpoints/ into the others' --out and re-run them"
                    )


def _interleave(
    name: str, by_shard: Sequence[tuple[_Shard, list[ProbeRecord]]]
) -> list[ProbeRecord]:
    """The shards' records in the study's plan order (shard K holds positions K-1, K-1+N, …),
    refusing a probe recorded by two shards."""
    ordered = sorted(by_shard, key=lambda item: Shard.parse(item[0].study.shard).index)
    owner: dict[RecordKey, Path] = {}
    merged: list[ProbeRecord] = []
    for row in zip_longest(*(records for _, records in ordered)):
        for (shard, _), record in zip(ordered, row, strict=True):
            if record is None:
                continue
            if record.key in owner:
                raise MergeError(
                    f"{owner[record.key]} and {shard.folder} both hold probe "
                    f"{'.'.join(map(str, record.key))} in {name}: not shards of one split"
                )
            owner[record.key] = shard.folder
            merged.append(record)
    return merged


def _check_shared_files(name: str, shards: Sequence[_Shard]) -> None:
    """The files every shard wrote alike from the same checkpoints (``SHARED_FILES``, of which
    the merge keeps the first shard's) read back strictly, and equal in every shard."""
    from harness.mirage.probing.visibility import read_visibility
    from harness.mirage.report.formats import read_summaries

    first = shards[0]
    for reader, file in ((read_summaries, SHARED_FILES[0]), (read_visibility, SHARED_FILES[1])):
        mine = reader(first.folder / name)
        for other in shards[1:]:
            if reader(other.folder / name) != mine:
                raise MergeError(
                    f"{first.folder / name / file} and {other.folder / name / file} differ: "
                    "the shards' checkpoints hold different conversations"
                )


def _concat(sources: Iterable[Path], target: Path) -> None:
    present = [p for p in sources if p.is_file()]
    if present:
        target.write_bytes(b"".join(p.read_bytes() for p in present))


def _joined(name: str, shards: Sequence[_Shard]) -> list[ProbeRecord]:
    """Result folder ``name``'s records of every shard in plan order, checked."""
    by_shard = [(shard, shard.records(name)) for shard in shards]
    _check_checkpoints(name, by_shard)
    return _interleave(name, by_shard)


def _write_folder(
    name: str, records: list[ProbeRecord], shards: Sequence[_Shard], out: Path
) -> Path:
    folder = out / name
    folder.mkdir(parents=True)
    rewrite_records(folder / RESULTS_FILE, records)
    _concat((s.folder / name / CALL_LOG for s in shards), folder / CALL_LOG)
    for file in SHARED_FILES:
        source = shards[0].folder / name / file
        if source.is_file():
            shutil.copy2(source, folder / file)
    write_workspace_link(folder, out / "workspace")
    if (shards[0].folder / name / "attribution.json").is_file():
        from harness.mirage.report.attribution import write_attribution_summary

        write_attribution_summary(folder)
    return folder


def _merged_config(first: Path, out: Path) -> str:
    config = json.loads((first / RUN_CONFIG).read_text(encoding="utf-8"))
    config.update(out=str(out), shard=None, retry_errors=False)
    return json.dumps(config, indent=2)


def _write_merged_study(first: Path, out: Path) -> None:
    """The first shard's resolved ``study.toml`` as the merged, unsharded study in ``out``."""
    from harness.kit.studyfile import read_toml, toml_text
    from harness.mirage.study import STUDY_TOML

    if not (first / STUDY_TOML).is_file():
        return  # a shard written before study files
    study = read_toml(first / STUDY_TOML)
    study.pop("shard", None)
    study["out"] = str(out.resolve())
    head = f"The study merged from shards into this folder (mirage merge; first shard {first})."
    (out / STUDY_TOML).write_text(toml_text(study, head), encoding="utf-8")


def merge_shards(folders: Sequence[Path], out: Path) -> list[ReportFiles]:
    """Join the shard folders into the run folder ``out`` (refused when it has files) and
    write each result folder's report; returns the reports."""
    from harness.mirage.report import write_report

    if len(folders) < 2:
        raise MergeError("give at least two shard folders to merge")
    if out.exists() and any(out.iterdir()):
        raise MergeError(f"--out {out} is not empty: merge into a new folder")
    shards = [_Shard(folder) for folder in folders]
    _check_complete(shards)
    _check_same_study(shards)
    if not shards[0].results:
        raise MergeError(f"{shards[0].folder} has no results: run the shards first")
    joined = {name: _joined(name, shards) for name in shards[0].results}  # checked first
    for name in shards[0].results:
        _check_shared_files(name, shards)
    if (shards[0].folder / RUN_CONFIG).is_file():
        from harness.kit.provenance import read_provenance

        read_provenance(shards[0].folder / RUN_CONFIG)  # read back strictly, before any write
    out.mkdir(parents=True, exist_ok=True)
    for name in SHARED_FOLDERS:
        source = shards[0].folder / name
        if source.is_dir():
            shutil.copytree(source, out / name, symlinks=True)
    first = shards[0].folder
    study = shards[0].study.model_copy(update={"shard": None})
    (out / STUDY_FILE).write_text(study.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if (first / RUN_CONFIG).is_file():
        (out / RUN_CONFIG).write_text(_merged_config(first, out), encoding="utf-8")
    _write_merged_study(first, out)
    folders_out = [_write_folder(name, records, shards, out) for name, records in joined.items()]
    log.info("shards.merged", shards=len(shards), out=str(out), folders=len(folders_out))
    return [write_report(folder) for folder in folders_out]
