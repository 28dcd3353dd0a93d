"""Checkpoints: immutable runtime snapshots of the trunk at named states.

A checkpoint is a folder ``<family>/<state>/`` holding the session snapshot (content-hashed,
see ``runtime.snapshot``) and ``manifest.json``: state name, EIT at capture, compaction count,
trunk position, models, pack, seed and workspace version. A *family* is every checkpoint of one
trunk configuration; its folder name is a hash of that configuration, so a second run (or
another answerer) with the same trunk reuses the checkpoints instead of rebuilding them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from runtime.session import Session
from runtime.snapshot import SnapshotError, read_snapshot_bytes, save_snapshot

MANIFEST = "manifest.json"
FAMILY_FILE = "family.json"


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
    summary_format: str
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


class Checkpoint(BaseModel):
    model_config = ConfigDict(frozen=True)

    directory: Path
    manifest: CheckpointManifest

    @property
    def state(self) -> str:
        return self.manifest.state

    @property
    def snapshot_path(self) -> Path:
        return self.directory / self.manifest.snapshot


class CheckpointError(Exception):
    """A checkpoint folder is missing, incomplete, or does not match its snapshot."""


def write_checkpoint(
    family_dir: Path,
    session: Session,
    *,
    state: str,
    trunk: TrunkConfig,
    trunk_position: int,
    trunk_turns_total: int,
    workspace_version: str | None,
) -> Checkpoint:
    directory = family_dir / state
    snapshot = save_snapshot(session, directory)
    manifest = CheckpointManifest(
        state=state,
        eit=session.ledger.current_eit,
        compaction_count=session.compaction_count,
        trunk_position=trunk_position,
        trunk_turns_total=trunk_turns_total,
        snapshot=snapshot.name,
        snapshot_sha256=snapshot.name.removesuffix(snapshot.suffix),
        workspace_version=workspace_version,
        trunk=trunk,
    )
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(manifest.model_dump_json(indent=2))
    tmp.replace(directory / MANIFEST)
    return Checkpoint(directory=directory, manifest=manifest)


def read_checkpoint(directory: Path) -> Checkpoint:
    """Load and verify one checkpoint folder."""
    try:
        manifest = CheckpointManifest.model_validate_json((directory / MANIFEST).read_text())
    except FileNotFoundError as exc:
        raise CheckpointError(f"{directory} has no {MANIFEST}") from exc
    except ValidationError as exc:
        raise CheckpointError(f"{directory / MANIFEST} is not a valid manifest: {exc}") from exc
    checkpoint = Checkpoint(directory=directory, manifest=manifest)
    try:
        header, _ = read_snapshot_bytes(checkpoint.snapshot_path)
    except SnapshotError as exc:
        raise CheckpointError(str(exc)) from exc
    if header.sha256 != manifest.snapshot_sha256:
        raise CheckpointError(f"{directory}: manifest and snapshot hashes differ")
    return checkpoint


def load_family(family_dir: Path, states: list[str]) -> dict[str, Checkpoint] | None:
    """All checkpoints of a finished family, or None if any state is missing."""
    if not (family_dir / FAMILY_FILE).exists():
        return None
    return {state: read_checkpoint(family_dir / state) for state in states}


def mark_family_complete(family_dir: Path, trunk: TrunkConfig, summary: dict[str, object]) -> None:
    payload = {"trunk": json.loads(trunk.model_dump_json()), **summary}
    (family_dir / FAMILY_FILE).write_text(json.dumps(payload, indent=2))
