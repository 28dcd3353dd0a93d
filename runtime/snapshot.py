"""Versioned, content-hashed session snapshots.

On disk a snapshot is one file ``<sha256>.session``: a JSON header line (format, version,
sha256, length) followed by the session's JSON payload. The hash covers the payload bytes, so
verifying it costs one sha256 pass and restoring one pydantic parse; a restore builds a new,
fully independent ``Session`` and never touches the file. Writes are atomic and idempotent.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ValidationError

from runtime.session import Session

FORMAT = "mirage-session"
VERSION = 1
SUFFIX = ".session"


class SnapshotError(Exception):
    """A snapshot file is missing, corrupted, or of a foreign format/version."""


class SnapshotHeader(BaseModel):
    format: str
    version: int
    sha256: str
    length: int


def session_bytes(session: Session) -> bytes:
    return session.model_dump_json().encode("utf-8")


def session_hash(session: Session) -> str:
    return hashlib.sha256(session_bytes(session)).hexdigest()


def save_snapshot(session: Session, directory: Path) -> Path:
    """Write ``session`` under ``directory``; returns the path (named by content hash)."""
    payload = session_bytes(session)
    digest = hashlib.sha256(payload).hexdigest()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{digest}{SUFFIX}"
    if path.exists():
        return path
    header = SnapshotHeader(format=FORMAT, version=VERSION, sha256=digest, length=len(payload))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(header.model_dump_json().encode() + b"\n" + payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_snapshot_bytes(path: Path) -> tuple[SnapshotHeader, bytes]:
    """Read and verify a snapshot file; returns its header and verified payload."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc}") from exc
    head, sep, payload = raw.partition(b"\n")
    if not sep:
        raise SnapshotError(f"{path} is not a mirage session snapshot (no header line)")
    try:
        header = SnapshotHeader.model_validate_json(head)
    except ValidationError as exc:
        raise SnapshotError(f"{path} has an unreadable snapshot header: {exc}") from exc
    if header.format != FORMAT:
        raise SnapshotError(f"{path} has format {header.format!r}, expected {FORMAT!r}")
    if header.version != VERSION:
        raise SnapshotError(
            f"{path} is snapshot format version {header.version}; this mirage reads "
            f"version {VERSION} only"
        )
    if len(payload) != header.length or hashlib.sha256(payload).hexdigest() != header.sha256:
        raise SnapshotError(f"{path} is corrupted: its content does not match its sha256")
    return header, payload


def session_from_payload(payload: bytes, origin: str = "snapshot") -> Session:
    try:
        return Session.model_validate_json(payload)
    except ValidationError as exc:
        raise SnapshotError(f"{origin} does not hold a valid session: {exc}") from exc


def load_snapshot(path: Path) -> Session:
    """Restore a new, independent session from a snapshot file."""
    _, payload = read_snapshot_bytes(path)
    return session_from_payload(payload, str(path))


class SnapshotCache:
    """Verifies each snapshot file once, then restores fresh sessions from memory — for many
    probes restoring the same checkpoint."""

    def __init__(self) -> None:
        self._payloads: dict[Path, bytes] = {}

    def restore(self, path: Path) -> Session:
        key = path.resolve()
        payload = self._payloads.get(key)
        if payload is None:
            _, payload = read_snapshot_bytes(key)
            self._payloads[key] = payload
        return session_from_payload(payload, str(path))
