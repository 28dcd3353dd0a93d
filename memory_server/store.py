"""Content-addressed storage under ``<workspace>/.mirage/``: file blobs, version manifests and
the hash cache that keeps re-hashing cheap.

Above: ``Workspace.snapshot`` and version reads. Below: the file system. A blob is stored once
per distinct content (``blobs/ab/abcdef…``), so a snapshot copies only files whose content is
new; a version is the JSON of a built manifest named by its own hash and never rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from pydantic import ValidationError

from memory_server.errors import CorruptStateError, UnknownVersionError
from memory_server.manifest import BuiltManifest

_CHUNK = 1 << 20
_TAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def atomic_write_bytes(
    target: Path,
    data: bytes,
    *,
    durable: bool = True,
    mode: int | None = None,
    sync_directory: bool = False,
) -> None:
    """Write via a temporary file in the same directory and ``os.replace``: readers see either
    the old or the new content, never a partial file. ``durable`` fsyncs the content before the
    rename (off for caches that can be rebuilt); ``sync_directory`` also fsyncs the directory
    after it, so the rename itself survives a power loss; ``mode``: the file's permissions
    (default: those of ``tempfile.mkstemp``, owner only)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            if durable:
                os.fsync(handle.fileno())
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    if sync_directory:
        directory = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def write_cache_bytes(target: Path, data: bytes) -> None:
    """``atomic_write_bytes`` without the fsync, for files that are rebuilt when lost (hash
    cache, built manifest): readers still never see a partial file."""
    atomic_write_bytes(target, data, durable=False)


class HashCache:
    """path -> (size, mtime_ns, sha256), persisted as JSON, so unchanged files are not re-read."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._entries: dict[str, list[object]] = {}
        if path.is_file():
            try:
                self._entries = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                self._entries = {}
        self._dirty = False

    def digest(self, relative: str, absolute: Path) -> tuple[str, int]:
        stat = absolute.stat()
        cached = self._entries.get(relative)
        if cached and cached[0] == stat.st_size and cached[1] == stat.st_mtime_ns:
            return str(cached[2]), stat.st_size
        sha = sha256_file(absolute)
        self._entries[relative] = [stat.st_size, stat.st_mtime_ns, sha]
        self._dirty = True
        return sha, stat.st_size

    def record(self, relative: str, absolute: Path, sha: str) -> None:
        """``relative`` was just written with content ``sha``: remember it without reading it."""
        stat = absolute.stat()
        self._entries[relative] = [stat.st_size, stat.st_mtime_ns, sha]
        self._dirty = True

    def keys(self) -> set[str]:
        return set(self._entries)

    def forget(self, paths: list[str]) -> None:
        """Drop the entries of ``paths`` and save: files rewritten in place of others, whose size
        and modification time could repeat an earlier content's."""
        for path in paths:
            if self._entries.pop(path, None) is not None:
                self._dirty = True
        self.save(self.keys())

    def save(self, keep: set[str]) -> None:
        stale = set(self._entries) - keep
        for key in stale:
            del self._entries[key]
        if self._dirty or stale:
            payload = json.dumps(self._entries).encode("utf-8")
            write_cache_bytes(self._path, payload)
            self._dirty = False


class SnapshotStore:
    def __init__(self, state_dir: Path) -> None:
        self._blobs = state_dir / "blobs"
        self._versions = state_dir / "versions"
        self._tags = state_dir / "tags"

    def blob_path(self, sha: str) -> Path:
        return self._blobs / sha[:2] / sha

    def put_blob(self, sha: str, source: Path) -> bool:
        """Store ``source`` under its hash unless already stored; True when it was copied."""
        target = self.blob_path(sha)
        if target.exists():
            return False
        data = source.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            raise OSError(f"{source} changed while it was being snapshotted; retry")
        atomic_write_bytes(target, data)
        return True

    def put_version(self, manifest: BuiltManifest) -> str:
        version = manifest.version_id()
        target = self._versions / f"{version}.json"
        if not target.exists():
            atomic_write_bytes(target, manifest.canonical_json().encode("utf-8"))
        return version

    def get_version(self, version: str) -> BuiltManifest:
        """A stored version, checked against its own id (the hash of its content)."""
        if not isinstance(version, str) or not version.startswith("v_") or "/" in version:
            raise UnknownVersionError(f"{version!r} is not a workspace version id (v_…)")
        target = self._versions / f"{version}.json"
        if not target.is_file():
            raise UnknownVersionError(f"workspace version {version!r} does not exist")
        data = target.read_bytes()
        if hashlib.sha256(data).hexdigest()[: len(version) - 2] != version[2:]:
            raise _corrupt_version(version, target, "does not match its hash")
        try:
            return BuiltManifest.model_validate_json(data)
        except ValidationError as exc:
            reason = f"is not a version manifest ({exc.error_count()} problems)"
            raise _corrupt_version(version, target, reason) from exc

    def read_blob(self, sha: str, label: str) -> bytes:
        """The stored copy of content ``sha``, verified; ``label`` names it in errors."""
        target = self.blob_path(sha)
        try:
            data = target.read_bytes()
        except FileNotFoundError as exc:
            raise CorruptStateError(
                f"the stored copy of {label} is missing ({target}); restore .mirage/ from a "
                "backup or take a new snapshot"
            ) from exc
        if hashlib.sha256(data).hexdigest() != sha:
            raise CorruptStateError(
                f"the stored copy of {label} is corrupted ({target} does not match its hash); "
                "refusing to serve it: delete that file and take a new snapshot while the working "
                "file still has this content, or restore .mirage/ from a backup"
            )
        return data

    def tag(self, name: str, version: str) -> None:
        """Name ``version`` (a stored one) ``name``, replacing what that name named."""
        if not _TAG_NAME.fullmatch(name):
            raise ValueError(f"version tag {name!r} is not a name of letters, digits, . _ -")
        self.get_version(version)
        atomic_write_bytes(self._tags / name, version.encode("ascii"))

    def tagged(self, name: str) -> str | None:
        """The version named ``name`` (checked), or None when no version has that name."""
        target = self._tags / name
        if not _TAG_NAME.fullmatch(name) or not target.is_file():
            return None
        version = target.read_text(encoding="ascii", errors="replace").strip()
        self.get_version(version)
        return version

    def list_versions(self) -> list[str]:
        if not self._versions.is_dir():
            return []
        return sorted(path.stem for path in self._versions.glob("v_*.json"))


def _corrupt_version(version: str, target: Path, reason: str) -> CorruptStateError:
    return CorruptStateError(
        f"workspace version {version} is corrupted: {target} {reason}; take a new snapshot "
        "(mirage memory snapshot) or restore .mirage/ from a backup"
    )
