"""Versioned, content-hashed session snapshots.

On disk a snapshot is one file ``<sha256>.session``: a JSON header line (format, version,
sha256, payload_sha256, length) followed by the session's JSON payload. Two hashes:

- ``sha256`` names the snapshot (its file name, a checkpoint's ``snapshot_sha256``, a probe
  record's ``checkpoint_sha256`` and ``restored_sha256``): it covers the session *without* what
  differs between two honest builds of one conversation (``runtime.session.SERVING_FIELDS``:
  how its calls were served, their latencies and cached tokens), which stays in the payload as
  data; format 2 snapshots (latencies only left out) are read and checked by their own rule;
- ``payload_sha256`` covers the payload bytes, latencies included.

A read verifies the payload bytes (length and ``payload_sha256``), parses the session strictly
(no unknown field, no coerced value: a ``"8192"`` where a number belongs is refused) and checks
that the parsed session's own name is the header's: a payload edited with its byte hash
recomputed still no longer matches the name a manifest and the records give it. A restore builds
a new, fully independent ``Session`` and never touches the file. Writes are atomic and
idempotent.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from runtime.session import Session

FORMAT = "mirage-session"
VERSION = 3
"""3: ``sha256`` names the session without its serving fields (latencies, cached tokens); 2
left out the latencies only (read still, each checked by its own rule); 1 hashed the payload
bytes."""
READABLE_VERSIONS = (2, 3)
_V2_UNNAMED: dict[str, Any] = {
    "ledger": {"calls": {"__all__": {"latency_s"}}},
    "tool_state": {"__all__": {"__all__": {"tool_calls": {"__all__": {"latency_s"}}}}},
}
"""What format 2 left out of a session's name: its latencies only."""
SUFFIX = ".session"


class SnapshotError(Exception):
    """A snapshot file is missing, corrupted, or of a foreign format/version."""


class SnapshotHeader(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str
    version: int
    sha256: str
    """The session's name: its hash without the wall-clock fields (``session_hash``)."""
    payload_sha256: str
    length: int


def validation_problem(error: ValidationError) -> str:
    """A validation error in one line: where, and what (pydantic lists one per line)."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "top level"
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def session_bytes(session: Session) -> bytes:
    return session.model_dump_json().encode("utf-8")


def session_hash(session: Session, version: int = VERSION) -> str:
    """The session's name: what a checkpoint's hash and a probe's ``restored_sha256`` are
    (as snapshot format ``version`` names sessions)."""
    if version == 2:
        return hashlib.sha256(session.model_dump_json(exclude=_V2_UNNAMED).encode()).hexdigest()
    return hashlib.sha256(session.identity_json()).hexdigest()


def save_snapshot(session: Session, directory: Path) -> Path:
    """Write ``session`` under ``directory``; returns the path (named by ``session_hash``)."""
    payload = session_bytes(session)
    digest = session_hash(session)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{digest}{SUFFIX}"
    if path.exists():
        return path
    header = SnapshotHeader(
        format=FORMAT,
        version=VERSION,
        sha256=digest,
        payload_sha256=hashlib.sha256(payload).hexdigest(),
        length=len(payload),
    )
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
    """Read a snapshot file and verify its payload bytes; returns its header and payload
    (``session_from_payload`` parses it and checks its name)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc}") from exc
    head, sep, payload = raw.partition(b"\n")
    if not sep:
        raise SnapshotError(f"{path} is not a mirage session snapshot (no header line)")
    version = _header_version(head)
    if version is not None and version not in READABLE_VERSIONS:
        readable = " and ".join(map(str, READABLE_VERSIONS))
        raise SnapshotError(
            f"{path} is snapshot format version {version}; this mirage reads versions {readable}"
        )
    try:
        header = SnapshotHeader.model_validate_json(head, strict=True)
    except ValidationError as exc:
        raise SnapshotError(
            f"{path} has an unreadable snapshot header ({validation_problem(exc)})"
        ) from exc
    if header.format != FORMAT:
        raise SnapshotError(f"{path} has format {header.format!r}, expected {FORMAT!r}")
    if header.version not in READABLE_VERSIONS:  # pragma: no cover - _header_version saw it
        raise SnapshotError(f"{path} is snapshot format version {header.version}")
    digest = hashlib.sha256(payload).hexdigest()
    if len(payload) != header.length or digest != header.payload_sha256:
        raise SnapshotError(f"{path} is corrupted: its content does not match its sha256")
    return header, payload


def _header_version(head: bytes) -> object:
    """The header's ``version`` when it is a JSON object with one (so another version's
    header is named as such rather than as a malformed one)."""
    try:
        parsed = json.loads(head)
    except ValueError:
        return None
    return parsed.get("version") if isinstance(parsed, dict) else None


def session_from_payload(
    payload: bytes,
    origin: str = "snapshot",
    expected_sha256: str | None = None,
    version: int = VERSION,
) -> Session:
    """The session of a verified payload, parsed strictly; with ``expected_sha256`` (the
    header's name) the session must also be the one that name names (as format ``version``
    names sessions)."""
    try:
        session = Session.model_validate_json(payload, strict=True)
    except ValidationError as exc:
        raise SnapshotError(
            f"{origin} does not hold a valid session ({validation_problem(exc)})"
        ) from exc
    named = session_hash(session, version) if expected_sha256 is not None else None
    if named is not None and named != expected_sha256:
        raise SnapshotError(
            f"{origin} holds a session other than the one its header names "
            f"({named[:12]} vs {str(expected_sha256)[:12]}): it was edited"
        )
    return session


def verified_session(path: Path) -> tuple[SnapshotHeader, Session]:
    """A snapshot file's header and its session, every check passed."""
    header, payload = read_snapshot_bytes(path)
    return header, session_from_payload(payload, str(path), header.sha256, header.version)


def load_snapshot(path: Path) -> Session:
    """Restore a new, independent session from a snapshot file."""
    return verified_session(path)[1]


class SnapshotCache:
    """Verifies and parses each snapshot file once, then restores each session as a fork of
    that parsed copy (``Session.fork``: nothing parsed, validated or hashed again), for many
    probes restoring the same checkpoint; a fork's name is the file's, which the one
    verification checked."""

    def __init__(self) -> None:
        self._sessions: dict[Path, tuple[Session, str]] = {}

    def _parsed(self, path: Path) -> tuple[Session, str]:
        key = path.resolve()
        found = self._sessions.get(key)
        if found is None:
            header, session = verified_session(key)
            found = self._sessions[key] = (session, header.sha256)
        return found

    def restore(self, path: Path) -> Session:
        """A new, independent session from ``path``."""
        return self._parsed(path)[0].fork()

    def name(self, path: Path) -> str:
        """The name (``session_hash``) of every session ``restore(path)`` gives."""
        return self._parsed(path)[1]
