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
(``harness.mirage.trunk.branch_formats``).

Durability: the snapshot, then its manifest, are each written to a temporary file, fsynced and
renamed into place, and ``family.json`` is written the same way only after every checkpoint of
the family; so a kill (or a native crash in the model) at any moment leaves either a finished
family or an unfinished one, whose trunk the next run rebuilds from scratch (``family_lock``
keeps a concurrent run from rebuilding a family another run is building). A *finished*
family with a missing or corrupt checkpoint (a snapshot whose session does not parse included,
even when its hash is consistent) is refused with the file and the fix (delete the family
folder): rebuilding it silently could mix results from two different trunks. A damaged
``family.json`` itself (truncated, wrong types, another trunk) is rewritten from the intact
checkpoints' manifests with a warning, or refused when they cannot vouch for it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from compaction.strategies import TEMPLATE_PREFIX
from harness.kit.agents.restore import save_session_point
from memory_server.store import atomic_write_bytes
from runtime.session import Session
from runtime.snapshot import SnapshotError, read_snapshot_bytes

log = structlog.get_logger(__name__)

MANIFEST = "manifest.json"
FAMILY_FILE = "family.json"


SCRIPTED_TRUNK_MODEL = "scripted"
"""The trunk model that replays fixed assistant replies instead of running a model."""
FORMAT_SEPARATOR = "@"  # never in a profile's state names (harness.mirage.states)
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
    """A format as a name part: ``template:path/to/mine.txt`` → ``template-mine``."""
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
    )
    atomic_write_bytes(directory / MANIFEST, manifest.model_dump_json(indent=2).encode())
    return Checkpoint(directory=directory, manifest=manifest)


def _first_line(reason: object) -> str:
    """The headline of an error (pydantic lists its details on the following lines)."""
    return (str(reason).strip().splitlines() or [""])[0]


def read_checkpoint(directory: Path) -> Checkpoint:
    """Load and verify one checkpoint folder; every problem is one line naming the file."""
    path = directory / MANIFEST
    try:
        manifest = CheckpointManifest.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "manifest"
        raise CheckpointError(f"{path}: not a valid manifest ({where}: {first['msg']})") from exc
    checkpoint = Checkpoint(directory=directory, manifest=manifest)
    try:
        header, payload = read_snapshot_bytes(checkpoint.snapshot_path)
    except SnapshotError as exc:
        raise CheckpointError(_first_line(exc)) from exc
    if header.sha256 != manifest.snapshot_sha256:
        raise CheckpointError(f"{path}: names a snapshot whose hash differs from its own")
    _check_session(checkpoint.snapshot_path, payload)
    return checkpoint


def _check_session(path: Path, payload: bytes) -> None:
    """A snapshot whose hash is right can still hold a session of the wrong shape (written by
    hand, or by another version): refused at family load, not at the first probe."""
    try:
        Session.model_validate_json(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "session"
        raise CheckpointError(
            f"{path}: does not hold a valid session ({where}: {first['msg']})"
        ) from exc


class FamilyRecord(BaseModel):
    """What ``family.json`` must hold: the trunk configuration the family's name hashes."""

    model_config = ConfigDict(extra="allow")

    trunk: TrunkConfig


def _family_record_problem(family_dir: Path) -> str | None:
    """Why ``family.json`` is unusable (unreadable, wrong shape, another trunk), or None."""
    path = family_dir / FAMILY_FILE
    try:
        record = FamilyRecord.model_validate_json(path.read_bytes())
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "family.json"
        return f"not a valid family record ({where}: {first['msg']})"
    if record.trunk.family_id() != family_dir.name:
        return f"names trunk {record.trunk.family_id()}, not this folder's {family_dir.name}"
    return None


def _restore_family_record(family_dir: Path, states: list[str], problem: str) -> None:
    """Rewrite a damaged ``family.json`` from the checkpoints' manifests, when every state is
    there, intact and of this folder's trunk; else refuse with the fix."""
    path = family_dir / FAMILY_FILE
    refuse = f"{path}: {problem}; delete {family_dir} to rebuild this trunk on the next run"
    try:
        checkpoints = {state: read_checkpoint(family_dir / state) for state in states}
    except CheckpointError as exc:
        raise CheckpointError(f"{refuse} (its checkpoints cannot restore it: {exc})") from exc
    trunks = {cp.manifest.trunk for cp in checkpoints.values()}
    if len(trunks) != 1 or next(iter(trunks)).family_id() != family_dir.name:
        raise CheckpointError(f"{refuse} (its checkpoints are of another trunk)")
    log.warning("checkpoints.family_record_restored", path=str(path), problem=problem)
    summary: dict[str, object] = {
        "turns": max(cp.manifest.trunk_position for cp in checkpoints.values()),
        "states": {name: cp.manifest.eit for name, cp in checkpoints.items()},
        "branch_point": (family_dir / BRANCH_POINT / MANIFEST).is_file(),
        "restored_from_manifests": problem,
    }
    mark_family_complete(family_dir, next(iter(trunks)), summary)


def load_family(family_dir: Path, states: list[str]) -> dict[str, Checkpoint] | None:
    """All checkpoints of a finished family, or None when the family was never finished (the
    trunk was interrupted; ``discard_unfinished_family`` clears it for the rebuild). A damaged
    ``family.json`` is rewritten from the checkpoints' manifests (with a warning) when they are
    intact. A finished family with a missing or corrupt checkpoint raises ``CheckpointError``
    saying what to do."""
    if not (family_dir / FAMILY_FILE).exists():
        return None
    problem = _family_record_problem(family_dir)
    if problem is not None:
        _restore_family_record(family_dir, states, problem)
    try:
        return {state: read_checkpoint(family_dir / state) for state in states}
    except CheckpointError as exc:
        raise CheckpointError(
            f"corrupt checkpoint: {exc}; delete {family_dir} to rebuild this trunk on the next "
            "run (records already in results.jsonl are kept)"
        ) from exc


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
            state: read_checkpoint(folder) for state, folder in zip(states, folders, strict=True)
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


def mark_family_complete(family_dir: Path, trunk: TrunkConfig, summary: dict[str, object]) -> None:
    """Written last, after every checkpoint of the family is durable: the family is finished."""
    payload = {"trunk": json.loads(trunk.model_dump_json()), **summary}
    atomic_write_bytes(family_dir / FAMILY_FILE, json.dumps(payload, indent=2).encode())
