"""Checkpoints: immutable runtime snapshots of the trunk at named states.

A checkpoint is a folder ``<family>/<state>/`` holding the session snapshot (content-hashed,
see ``runtime.snapshot``) and ``manifest.json``: state name, EIT at capture, compaction count,
trunk position, models, pack, seed and workspace version. A *family* is every checkpoint of one
trunk configuration; its folder name is a hash of that configuration, so a second run (or
another answerer) with the same trunk reuses the checkpoints instead of rebuilding them.

Summary formats branch (issue 17, the paper's appendix A.2): the built-in runtime's trunk
configuration leaves the format out (``summary_format=None``), so every format shares one family.
The trunk captures ``pre-compaction`` — the session after the memory flush, right before its first
compaction — and the compaction states of a format live in ``<state>@<format>/``
(``S2@free-form/``), each manifest naming its format. The trunk writes the first format's inline;
any other format is branched later from ``pre-compaction``
(``harness.mirage.trunk.branches.branch_formats``).

Durability: the snapshot, then its manifest, are each written to a temporary file, fsynced and
renamed into place, and ``family.json`` is written the same way only after every checkpoint of
the family; so a kill (or a native crash in the model) at any moment leaves either a finished
family or an unfinished one, whose trunk the next run rebuilds from scratch (``family_lock``
keeps a concurrent run from rebuilding a family another run is building). A *finished*
family with a missing or corrupt checkpoint is refused with the file and the fix (delete the
family folder): rebuilding it silently could mix results from two different trunks.

What is read back is read strictly (no unknown field, no coerced value) and checked against
what names it: a manifest against its folder (state, format), its family (the trunk its folder
name hashes) and its snapshot (hash, EIT, compaction count); a snapshot against the name in its
header (``runtime.snapshot``: a session edited with its byte hash recomputed is refused). The
name of a snapshot leaves out what differs between two honest builds of one conversation (how
its calls were served: latencies, cached tokens; ``runtime.session.SERVING_FIELDS``), so shards
that rebuild one
trunk against a real summarizer name its checkpoints alike (``harness.mirage.run.shards``).

A damaged ``family.json`` (truncated, wrong types, unknown fields, values the checkpoints
contradict) is rebuilt *exactly* from the checkpoints — every field, each checked against the
manifests and snapshots — and the run says what it rebuilt (``checkpoints.family_record_rebuilt``
on stderr); when the checkpoints cannot vouch for every field it is refused in one line saying
how to rebuild (delete the family folder). Never a partial record.
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from compaction.config import split_format
from compaction.strategies import TEMPLATE_PREFIX
from harness.kit.agents.restore import save_session_point
from memory_server.store import atomic_write_bytes
from runtime.session import Session
from runtime.snapshot import SnapshotError, validation_problem, verified_session

log = structlog.get_logger(__name__)

MANIFEST = "manifest.json"
FAMILY_FILE = "family.json"


SCRIPTED_TRUNK_MODEL = "scripted"
"""The trunk model that replays fixed assistant replies instead of running a model."""
FORMAT_SEPARATOR = "@"  # never in a profile's state names (harness.mirage.trunk.states)
BRANCH_POINT = "pre-compaction"
"""The checkpoint every summary format's compaction states branch from."""


class TrunkConfig(BaseModel):
    """Everything that determines the trunk and so its checkpoints."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pack: str
    pack_digest: str
    seed: int
    trunk_model: str
    profile: str
    window: int
    states: tuple[tuple[str, str, int | None, int], ...]
    summary_format: str | None
    """None: the formats branch at the first compaction and are not part of the family."""
    summarizer_model: str
    memory_flush: bool
    max_output_tokens: int

    def family_id(self) -> str:
        digest = hashlib.sha256(self.model_dump_json().encode()).hexdigest()
        return digest[:16]


class CheckpointManifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    state: str
    eit: int
    compaction_count: int
    trunk_position: int
    trunk_turns_total: int
    snapshot: str
    snapshot_sha256: str
    workspace_version: str | None
    trunk: TrunkConfig
    summary_format: str | None = None
    """The format of the compaction(s) this session went through (None before the first)."""
    branched_from: str | None = None
    """``pre-compaction`` for a format's compaction states branched after the trunk (None: the
    trunk's own checkpoint, the format it compacted with inline)."""
    pre_flush_workspace_version: str | None = None
    """``pre-compaction`` only: the workspace version right before the trunk's memory flush,
    where a format whose flush differs from the trunk's starts its own."""


class Checkpoint(BaseModel):
    """One checkpoint folder; the ``RestorePoint`` every adapter probes from
    (``harness.kit.agents.base``)."""

    model_config = ConfigDict(frozen=True)

    directory: Path
    manifest: CheckpointManifest

    @property
    def state(self) -> str:
        return self.manifest.state

    @property
    def snapshot_path(self) -> Path:
        return self.directory / self.manifest.snapshot

    @property
    def snapshot_sha256(self) -> str:
        return self.manifest.snapshot_sha256

    @property
    def workspace_version(self) -> str | None:
        return self.manifest.workspace_version

    @property
    def eit(self) -> int:
        return self.manifest.eit

    @property
    def compaction_count(self) -> int:
        return self.manifest.compaction_count


class CheckpointError(Exception):
    """A checkpoint folder is missing, incomplete, or does not match its snapshot."""


def format_slug(summary_format: str) -> str:
    """A format as a name part: ``template:path/to/mine.txt`` → ``template-mine``; a format with
    its own summarizer ``free-form~reference/keep-charts`` → ``free-form.reference-keep-charts``."""
    plain, summarizer = split_format(summary_format)
    if summarizer is not None:
        return f"{format_slug(plain)}.{re.sub(r'[^A-Za-z0-9_-]+', '-', summarizer).strip('-')}"
    if summary_format.startswith(TEMPLATE_PREFIX):
        stem = Path(summary_format[len(TEMPLATE_PREFIX) :]).stem
        return "template-" + (re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("_") or "file")
    return summary_format


def checkpoint_dir_name(state: str, summary_format: str | None) -> str:
    return (
        state
        if summary_format is None
        else f"{state}{FORMAT_SEPARATOR}{format_slug(summary_format)}"
    )


def base_state(state: str) -> str:
    """The profile state behind a record state (``S2@free-form`` → ``S2``)."""
    return state.partition(FORMAT_SEPARATOR)[0]


def write_checkpoint(
    family_dir: Path,
    session: Session,
    *,
    state: str,
    trunk: TrunkConfig,
    trunk_position: int,
    trunk_turns_total: int,
    workspace_version: str | None,
    summary_format: str | None = None,
    branched_from: str | None = None,
    pre_flush_workspace_version: str | None = None,
) -> Checkpoint:
    """Write ``<family_dir>/<state>[@<format>]/`` (replacing what an earlier attempt left)."""
    directory = family_dir / checkpoint_dir_name(state, summary_format)
    point = save_session_point(directory, session, workspace_version=workspace_version)
    manifest = CheckpointManifest(
        state=state,
        eit=point.eit,
        compaction_count=point.compaction_count,
        trunk_position=trunk_position,
        trunk_turns_total=trunk_turns_total,
        snapshot=point.snapshot,
        snapshot_sha256=point.snapshot_sha256,
        workspace_version=workspace_version,
        trunk=trunk,
        summary_format=summary_format,
        branched_from=branched_from,
        pre_flush_workspace_version=pre_flush_workspace_version,
    )
    atomic_write_bytes(directory / MANIFEST, manifest.model_dump_json(indent=2).encode())
    return Checkpoint(directory=directory, manifest=manifest)


def _first_line(reason: object) -> str:
    """The headline of an error (pydantic lists its details on the following lines)."""
    return (str(reason).strip().splitlines() or [""])[0]


def read_manifest(directory: Path) -> CheckpointManifest:
    """A checkpoint folder's manifest, read strictly; one line naming the file otherwise."""
    path = directory / MANIFEST
    try:
        return CheckpointManifest.model_validate_json(path.read_bytes(), strict=True)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except ValidationError as exc:
        raise CheckpointError(f"{path}: not a valid manifest ({validation_problem(exc)})") from exc


def read_checkpoint(directory: Path) -> Checkpoint:
    """Load and verify one checkpoint folder: its manifest (strictly), the snapshot it names
    (bytes, strict session, the session's own name) and that they agree with each other and
    with the folder's name; every problem is one line naming the file."""
    path = directory / MANIFEST
    manifest = read_manifest(directory)
    named = checkpoint_dir_name(manifest.state, manifest.summary_format)
    if named != directory.name:
        raise CheckpointError(
            f"{path}: names checkpoint {named}, not its folder's {directory.name}"
        )
    checkpoint = Checkpoint(directory=directory, manifest=manifest)
    if manifest.snapshot != f"{manifest.snapshot_sha256}.session":
        raise CheckpointError(f"{path}: names snapshot file {manifest.snapshot}, not its hash's")
    try:
        header, session = verified_session(checkpoint.snapshot_path)
    except SnapshotError as exc:
        raise CheckpointError(_first_line(exc)) from exc
    if header.sha256 != manifest.snapshot_sha256:
        raise CheckpointError(f"{path}: names a snapshot whose hash differs from its own")
    for field, mine, theirs in (
        ("eit", manifest.eit, session.ledger.current_eit),
        ("compaction_count", manifest.compaction_count, session.compaction_count),
    ):
        if mine != theirs:
            raise CheckpointError(
                f"{path}: says {field} {mine}, its snapshot's session has {theirs}"
            )
    return checkpoint


class FamilyRecord(BaseModel):
    """What ``family.json`` holds, all of it read back strictly: the trunk configuration the
    family's folder name hashes, and what the trunk did — its turns, each state's EIT (the
    trunk's own checkpoints: the shared states and the compaction states of the format it
    compacted with inline), that format, and whether it captured the branch point."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trunk: TrunkConfig
    turns: int
    states: dict[str, int]
    summary_format: str | None = None
    branch_point: bool = False


def read_family_record(family_dir: Path) -> tuple[FamilyRecord | None, str | None]:
    """``family.json`` and why it is unusable (unreadable, wrong shape, another trunk), or no
    problem."""
    path = family_dir / FAMILY_FILE
    try:
        record = FamilyRecord.model_validate_json(path.read_bytes(), strict=True)
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"
    except ValidationError as exc:
        return None, f"not a valid family record ({validation_problem(exc)})"
    if record.trunk.family_id() != family_dir.name:
        return None, f"names trunk {record.trunk.family_id()}, not this folder's {family_dir.name}"
    return record, None


def workspace_versions(roots: list[Path]) -> dict[str, str | None]:
    """The workspace version of every checkpoint under ``roots`` (``<family>/<state>/``) by its
    snapshot hash, from the manifests alone; unreadable manifests are left out."""
    versions: dict[str, str | None] = {}
    for root in roots:
        for folder in sorted(p.parent for p in root.glob(f"*/*/{MANIFEST}")):
            try:
                manifest = read_manifest(folder)
            except CheckpointError:
                continue
            versions.setdefault(manifest.snapshot_sha256, manifest.workspace_version)
    return versions


def _checkpoint_folders(family_dir: Path) -> list[Path]:
    return sorted(p.parent for p in family_dir.glob(f"*/{MANIFEST}"))


def family_record_from_checkpoints(family_dir: Path) -> FamilyRecord:
    """``family.json`` as the trunk wrote it, from its checkpoints alone: every checkpoint is
    verified (manifest, snapshot, this folder's trunk), the trunk's own ones (not a branched
    format's) give the states, their EIT, the format and the turns. Raises ``CheckpointError``
    naming what cannot be vouched for."""
    checkpoints = [read_checkpoint(folder) for folder in _checkpoint_folders(family_dir)]
    trunks = {cp.manifest.trunk for cp in checkpoints}
    if len(trunks) != 1:
        raise CheckpointError("its checkpoints are of several trunks" if trunks else "none left")
    (trunk,) = trunks
    if trunk.family_id() != family_dir.name:
        raise CheckpointError("its checkpoints are of another trunk")
    own = [cp for cp in checkpoints if cp.manifest.branched_from is None]
    formats = {f for f in (cp.manifest.summary_format for cp in own) if f is not None}
    if len(formats) > 1:
        raise CheckpointError(f"the trunk's checkpoints name formats {sorted(formats)}")
    by_state = {cp.state: cp for cp in own if cp.state != BRANCH_POINT}
    wanted = [name for name, *_ in trunk.states]
    missing = [name for name in wanted if name not in by_state]
    if missing:
        raise CheckpointError(f"no checkpoint of state(s) {', '.join(missing)}")
    if not formats:
        raise CheckpointError("no checkpoint names the summary format the trunk compacted with")
    return FamilyRecord(
        trunk=trunk,
        turns=max(by_state[name].manifest.trunk_position for name in wanted),
        states={name: by_state[name].eit for name in wanted},
        summary_format=next(iter(formats)),
        branch_point=any(cp.state == BRANCH_POINT for cp in own),
    )


def _rebuild_family_record(
    family_dir: Path, record: FamilyRecord | None, problem: str | None
) -> None:
    """Rewrite a damaged ``family.json`` exactly from the checkpoints, saying what was rebuilt,
    or refuse with the fix when they cannot vouch for every field."""
    path = family_dir / FAMILY_FILE
    try:
        rebuilt = family_record_from_checkpoints(family_dir)
    except CheckpointError as exc:
        raise CheckpointError(
            f"{path}: {problem or 'differs from its checkpoints'}; delete {family_dir} to rebuild "
            f"this trunk on the next run (its checkpoints cannot restore it: {exc})"
        ) from exc
    if record is not None and record == rebuilt:
        return
    if record is not None:
        fields = FamilyRecord.model_fields
        changed = [f for f in fields if getattr(record, f) != getattr(rebuilt, f)]
        problem = "its " + ", ".join(changed) + " contradict the checkpoints"
    log.warning(
        "checkpoints.family_record_rebuilt",
        path=str(path),
        problem=problem,
        rebuilt=", ".join(FamilyRecord.model_fields),
        turns=rebuilt.turns,
        states=len(rebuilt.states),
    )
    write_family_record(family_dir, rebuilt)


def load_family(family_dir: Path, states: list[str]) -> dict[str, Checkpoint] | None:
    """All checkpoints of a finished family, or None when the family was never finished (the
    trunk was interrupted; ``discard_unfinished_family`` clears it for the rebuild). A damaged
    ``family.json`` is rebuilt exactly from the checkpoints (announced) or refused. A finished
    family with a missing or corrupt checkpoint raises ``CheckpointError`` saying what to do."""
    if not (family_dir / FAMILY_FILE).exists():
        return None
    record, problem = read_family_record(family_dir)
    if record is None:
        _rebuild_family_record(family_dir, record, problem)
    try:
        checkpoints = {
            state: _family_checkpoint(family_dir, family_dir / state) for state in states
        }
    except CheckpointError as exc:
        raise CheckpointError(
            f"corrupt checkpoint: {exc}; delete {family_dir} to rebuild this trunk on the next "
            "run (records already in results.jsonl are kept)"
        ) from exc
    if record is not None and not _agrees_with_manifests(family_dir, record):
        _rebuild_family_record(family_dir, record, problem)
    return checkpoints


def _agrees_with_manifests(family_dir: Path, record: FamilyRecord) -> bool:
    """The record names the trunk's states, and their EIT and the trunk's turns are what the
    trunk's manifests say (read without their snapshots: those are checked when loaded). The
    compaction states of the format it compacted with inline may be gone (deleted so they are
    built again as a branch, ``load_branch``); then only what is left is compared."""
    names = [name for name, *_ in record.trunk.states]
    if sorted(record.states) != sorted(names):
        return False
    manifests = []
    for folder in _checkpoint_folders(family_dir):
        try:
            manifests.append(read_manifest(folder))
        except CheckpointError:
            continue  # not a shared state's (those loaded): its branch's load names it
    own = {
        m.state: m
        for m in manifests
        if m.branched_from is None
        and m.state != BRANCH_POINT
        and m.summary_format in (None, record.summary_format)
    }
    compacted = {name for name, kind, *_ in record.trunk.states if kind == "compaction"}
    if set(own) - set(names) or (set(names) - set(own)) - compacted:
        return False
    if any(own[name].eit != record.states[name] for name in own):
        return False
    if record.branch_point != (family_dir / BRANCH_POINT / MANIFEST).is_file():
        return False
    return set(own) != set(names) or max(m.trunk_position for m in own.values()) == record.turns


def _family_checkpoint(family_dir: Path, directory: Path) -> Checkpoint:
    checkpoint = read_checkpoint(directory)
    if checkpoint.manifest.trunk.family_id() != family_dir.name:
        raise CheckpointError(
            f"{directory / MANIFEST}: is of trunk {checkpoint.manifest.trunk.family_id()}, not "
            f"this family's {family_dir.name}"
        )
    return checkpoint


def load_branch(
    family_dir: Path, states: list[str], summary_format: str
) -> dict[str, Checkpoint] | None:
    """The compaction states of one summary format, or None when that branch was never finished
    (building it again replaces what an interrupted attempt left). A finished checkpoint that is
    corrupt raises ``CheckpointError`` saying what to do."""
    folders = [family_dir / checkpoint_dir_name(state, summary_format) for state in states]
    if not all((folder / MANIFEST).is_file() for folder in folders):
        return None
    try:
        return {
            state: _family_checkpoint(family_dir, folder)
            for state, folder in zip(states, folders, strict=True)
        }
    except CheckpointError as exc:
        names = ", ".join(folder.name for folder in folders)
        raise CheckpointError(
            f"corrupt checkpoint: {exc}; delete {names} in {family_dir} to rebuild this summary "
            "format's branch on the next run"
        ) from exc


@contextmanager
def family_lock(family_dir: Path) -> Iterator[None]:
    """Held while a run looks for or builds the family, so a second run on the same output
    waits and then reuses the finished family instead of rebuilding it under the first. The
    kernel releases the lock when its process dies, so a killed run never leaves it stale."""
    family_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(family_dir.with_name(f".{family_dir.name}.lock"), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("checkpoints.waiting_for_other_run", family=str(family_dir))
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def discard_unfinished_family(family_dir: Path) -> None:
    """Remove what an interrupted trunk left in ``family_dir`` (never a finished family)."""
    if family_dir.is_dir() and not (family_dir / FAMILY_FILE).exists():
        log.warning("checkpoints.unfinished_family_discarded", family=str(family_dir))
        shutil.rmtree(family_dir)


def write_family_record(family_dir: Path, record: FamilyRecord) -> None:
    atomic_write_bytes(family_dir / FAMILY_FILE, record.model_dump_json(indent=2).encode())


def mark_family_complete(
    family_dir: Path,
    trunk: TrunkConfig,
    *,
    turns: int,
    states: dict[str, int],
    summary_format: str | None = None,
    branch_point: bool = False,
) -> None:
    """Written last, after every checkpoint of the family is durable: the family is finished."""
    record = FamilyRecord(
        trunk=trunk,
        turns=turns,
        states=states,
        summary_format=summary_format,
        branch_point=branch_point,
    )
    write_family_record(family_dir, record)
