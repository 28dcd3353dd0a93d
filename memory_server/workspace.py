"""The persistent workspace W: a directory of files that is the source of truth.

Above: the index (which chunks and embeds its files), the MCP tools, the harness (which
canonicalises SOURCE answers with ``resolve``) and compaction (which appends dated notes).
Below: the file system, through ``paths.confine`` for every access, and the content-addressed
store under ``.mirage/`` for built manifests, snapshots and blobs.

Every file is read-only except dated notes ``memory/YYYY-MM-DD.md``, which only grow. A note
append is planned and written under the notes lock (a thread lock and an ``flock`` shared with
other processes); ``memory_server.appends`` logs it between the two steps. Writing a note
updates the manifest from the one changed file, without rescanning the tree.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog
from pydantic import BaseModel, ConfigDict

from memory_server.errors import CorruptStateError, InvalidInputError, UnknownReferenceError
from memory_server.manifest import (
    NOTE_PATH_PATTERN,
    USER_MANIFEST_NAME,
    BuiltManifest,
    FileEntry,
    UserManifest,
    build_manifest,
    load_user_manifest,
)
from memory_server.paths import STATE_DIR_NAME, confine, is_servable
from memory_server.resolve import Resolver
from memory_server.store import HashCache, SnapshotStore, atomic_write_bytes, write_cache_bytes

log = structlog.get_logger(__name__)

MAX_NOTE_CHARS = 20_000
BUILT_MANIFEST_NAME = "manifest.json"


class NoteAppend(BaseModel):
    """Where an appended note landed: cite it as ``path#L<start>-L<end>``."""

    model_config = ConfigDict(frozen=True)

    path: str
    start_line: int
    end_line: int


class PlannedNote(BaseModel):
    """An append worked out under the notes lock before anything is written: the note's bytes
    then are its ``offset`` bytes now, unchanged, followed by ``appended``."""

    model_config = ConfigDict(frozen=True)

    path: str
    offset: int
    appended: str
    start_line: int
    end_line: int

    @property
    def landing(self) -> NoteAppend:
        return NoteAppend(path=self.path, start_line=self.start_line, end_line=self.end_line)

    @property
    def data(self) -> bytes:
        return self.appended.encode("utf-8")


class Workspace:
    """One workspace directory. Cheap to open; thread-safe for reads and note appends."""

    def __init__(self, root: Path) -> None:
        self.root = root.absolute()
        self.state_dir = self.root / STATE_DIR_NAME
        self.store = SnapshotStore(self.state_dir)
        self._lock = threading.RLock()
        self._notes_guard = threading.Lock()
        self._hashes: dict[str, tuple[str, int]] = {}
        self._hash_cache_loaded: HashCache | None = None
        self._user: tuple[tuple[int, int, int] | None, UserManifest] | None = None
        self._built_from: UserManifest | None = None
        self._manifest: BuiltManifest | None = None
        self._resolver: Resolver | None = None
        self._version_resolvers: dict[str, Resolver] = {}  # a version never changes

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False) -> Workspace:
        """Open the workspace at ``path`` and build its manifest (written to
        ``.mirage/manifest.json``). ``create`` makes the directory if it is missing."""
        root = Path(path)
        if create:
            root.mkdir(parents=True, exist_ok=True)
        if not root.is_dir():
            raise InvalidInputError(f"workspace {str(root)!r} is not a directory")
        workspace = cls(root)
        workspace.state_dir.mkdir(exist_ok=True)
        workspace.refresh()
        return workspace

    # -- manifest ---------------------------------------------------------------------------

    @property
    def manifest(self) -> BuiltManifest:
        if self._manifest is None:
            return self.refresh()
        return self._manifest

    def refresh(self) -> BuiltManifest:
        """Rescan the files (unchanged files are not re-hashed) and rebuild the manifest; an
        unchanged tree keeps the manifest object (callers cache by identity)."""
        with self._lock:
            cache = self._hash_cache()
            hashes = {rel: cache.digest(rel, self.root / rel) for rel in self._walk()}
            cache.save(set(hashes))
            return self._install(hashes)

    def _install(self, hashes: dict[str, tuple[str, int]]) -> BuiltManifest:
        """Make the manifest of ``hashes`` current (the caller holds ``_lock``)."""
        user = self._user_manifest()
        if self._manifest is not None and hashes == self._hashes and user is self._built_from:
            return self._manifest
        manifest = build_manifest(user, hashes)
        self._hashes, self._built_from = hashes, user
        if self._manifest is not None and manifest == self._manifest:
            return self._manifest
        target = self.state_dir / BUILT_MANIFEST_NAME
        payload = manifest.canonical_json().encode("utf-8")
        if not target.is_file() or target.read_bytes() != payload:
            write_cache_bytes(target, payload)
        self._manifest = manifest
        self._resolver = Resolver(manifest, self.root, self._read_note_text)
        return manifest

    def _user_manifest(self) -> UserManifest:
        """``MANIFEST.yaml``, parsed again only when its size or modification time changed."""
        try:
            info = (self.root / USER_MANIFEST_NAME).stat()
            stamp: tuple[int, int, int] | None = (info.st_ino, info.st_size, info.st_mtime_ns)
        except FileNotFoundError:
            stamp = None
        if self._user is None or self._user[0] != stamp:
            self._user = (stamp, load_user_manifest(self.root))
        return self._user[1]

    def _hash_cache(self) -> HashCache:
        if self._hash_cache_loaded is None:
            self._hash_cache_loaded = HashCache(self.state_dir / "hashes.json")
        return self._hash_cache_loaded

    def _walk(self) -> Iterator[str]:
        for directory, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(name for name in dirnames if not name.startswith("."))
            base = Path(directory)
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                absolute = base / name
                relative = absolute.relative_to(self.root).as_posix()
                if relative == USER_MANIFEST_NAME:
                    continue
                if absolute.is_symlink() and not is_servable(self.root, absolute):
                    log.warning("workspace.symlink_escape_skipped", path=relative)
                    continue
                if absolute.is_file():
                    yield relative

    # -- resolution -------------------------------------------------------------------------

    def resolve(self, ref: str) -> str | None:
        """The canonical artifact id for any reference (id, alias, title, path, derived file,
        dated note, ``path#anchor``), or None when nothing in the workspace matches."""
        return self.resolver().resolve(ref)

    def resolver(self, version: str | None = None) -> Resolver:
        """The canonicaliser of the working tree, or of a stored ``version`` (its manifest and
        its notes' text as they were then: a note's line anchors name that version's lines)."""
        if version is None:
            if self._resolver is None:
                self.refresh()
            assert self._resolver is not None
            return self._resolver
        with self._lock:
            found = self._version_resolvers.get(version)
            if found is None:

                def read_note(path: str) -> str | None:
                    try:
                        return self.read_bytes(path, version).decode("utf-8", errors="replace")
                    except (UnknownReferenceError, OSError):
                        return None

                found = Resolver(self.store.get_version(version), self.root, read_note)
                self._version_resolvers[version] = found
            return found

    def mentioned_ids(self, text: str) -> list[str]:
        if self._resolver is None:
            self.refresh()
        assert self._resolver is not None
        return self._resolver.mentioned_ids(text)

    def file_entry(self, ref: str, version: str | None = None) -> FileEntry:
        """The file a reference designates: a path, or an artifact id (its first file)."""
        manifest = self.manifest if version is None else self.store.get_version(version)
        path = ref.split("#", 1)[0].strip().strip("`'\"")
        while path.startswith("./"):
            path = path[2:]
        if path in manifest.files:
            return manifest.files[path]
        artifact_id = self.resolve(ref)
        if artifact_id is None and ("/" in path or "\\" in path or path.startswith(".")):
            confine(self.root, path)  # a refused path gets its own reason (traversal, symlink)
        record = manifest.artifacts.get(artifact_id) if artifact_id else None
        if record is None or not record.files:
            raise UnknownReferenceError(
                f"no file or artifact matches {ref!r}; use an artifact_id or a path returned "
                "by artifact_recall"
            )
        return manifest.files[record.files[0]]

    # -- reading ----------------------------------------------------------------------------

    def read_bytes(self, path: str, version: str | None = None) -> bytes:
        """File content, from the working tree or from a stored version."""
        if version is None:
            absolute = confine(self.root, path)
            if not absolute.is_file():
                raise UnknownReferenceError(f"no file {path!r} in the workspace")
            return absolute.read_bytes()
        manifest = self.store.get_version(version)
        entry = manifest.files.get(path)
        if entry is None:
            raise UnknownReferenceError(f"no file {path!r} in workspace version {version}")
        return self.store.read_blob(entry.sha256, f"{path!r} in workspace version {version}")

    def _read_note_text(self, path: str) -> str | None:
        """A note's text for the resolver, whose line anchors must count lines as citations do."""
        try:
            return self.read_bytes(path).decode("utf-8", errors="replace")
        except (UnknownReferenceError, OSError):
            return None

    # -- versions ---------------------------------------------------------------------------

    def snapshot(self) -> str:
        """An immutable, content-addressed version of the workspace. Only content not stored
        before is copied; taking a snapshot of an unchanged workspace copies nothing."""
        with self._lock:
            manifest = self.refresh()
            for entry in manifest.files.values():
                self.store.put_blob(entry.sha256, confine(self.root, entry.path))
            version = self.store.put_version(manifest)
        log.info("workspace.snapshot", version=version, files=len(manifest.files))
        return version

    def version(self, version: str) -> BuiltManifest:
        return self.store.get_version(version)

    def checkout(self, version: str) -> None:
        """Make the working tree's dated notes (its only writable files) what they were in
        ``version``: notes that differ get that version's bytes back, notes it did not have are
        removed. Any other file that differs from ``version`` raises ``CorruptStateError``
        (those are read-only: the tree is not a state of this workspace any more)."""
        with self.notes_lock(), self._lock:
            wanted = {path: e.sha256 for path, e in self.store.get_version(version).files.items()}
            live = {path: e.sha256 for path, e in self.refresh().files.items()}
            changed = sorted(p for p in wanted.keys() | live.keys() if wanted.get(p) != live.get(p))
            fixed = [path for path in changed if not NOTE_PATH_PATTERN.match(path)]
            if fixed:
                raise CorruptStateError(
                    f"cannot check out workspace version {version}: {fixed[0]} differs from it "
                    "and is not a dated note (only memory/YYYY-MM-DD.md may change)"
                )
            for path in changed:
                target = confine(self.root, path)
                if path in wanted:
                    label = f"{path!r} in workspace version {version}"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write_bytes(target, self.store.read_blob(wanted[path], label))
                else:
                    target.unlink()
            self._hash_cache().forget(changed)
            self.refresh()
        if changed:
            log.info("workspace.checkout", version=version, notes=len(changed))

    # -- the one write ----------------------------------------------------------------------

    def append_note(self, text: str, date: str | None = None) -> NoteAppend:
        """Append ``text`` to ``memory/<date>.md`` (today by default). Never rewrites what is
        there: the new file is the old bytes, unchanged, plus the text, written atomically."""
        with self.notes_lock():
            return self.write_note(self.plan_note(text, date))

    @contextmanager
    def notes_lock(self) -> Iterator[None]:
        """The lock every note write holds, shared by the threads of this process and by other
        processes (an ``flock`` on ``.mirage/notes.lock``); searches never take it."""
        lock_path = self.state_dir / "notes.lock"
        with self._notes_guard, lock_path.open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def plan_note(self, text: str, date: str | None = None) -> PlannedNote:
        """Where ``text`` would land in ``memory/<date>.md`` and the bytes it adds (the caller
        holds ``notes_lock`` until it has written them with ``write_note``)."""
        body = validated_note(text)
        day = validated_date(date)
        relative = f"memory/{day}.md"
        target = confine(self.root, relative)
        confine(self.root, "memory").mkdir(exist_ok=True)
        old = target.read_bytes() if target.is_file() else b""
        header = b"" if old else f"# {day}\n".encode()
        added = header + (b"" if old.endswith(b"\n") or not old else b"\n") + b"\n"
        start = (old + added).count(b"\n") + 1
        return PlannedNote(
            path=relative,
            offset=len(old),
            appended=added.decode("utf-8") + body + "\n",
            start_line=start,
            end_line=start + body.count("\n"),
        )

    def write_note(self, plan: PlannedNote) -> NoteAppend:
        """Write a planned append: the note as it is plus ``plan.appended``, to a temporary
        file, fsynced and renamed over the note (the caller holds ``notes_lock``). The manifest
        is updated from this one file. Raises ``CorruptStateError`` when the note is no longer
        ``plan.offset`` bytes long."""
        target = confine(self.root, plan.path)
        old = target.read_bytes() if target.is_file() else b""
        if len(old) != plan.offset:
            raise CorruptStateError(
                f"{plan.path} is {len(old)} bytes long, not {plan.offset} as planned; "
                "the note changed outside the memory server"
            )
        new = old + plan.data
        mode = target.stat().st_mode & 0o777 if old else 0o644
        atomic_write_bytes(target, new, mode=mode, sync_directory=True)
        sha = hashlib.sha256(new).hexdigest()
        with self._lock:
            self._hash_cache().record(plan.path, target, sha)
            self._install({**self._hashes, plan.path: (sha, len(new))})
        return plan.landing

    def note_holds(self, plan: PlannedNote) -> bool:
        """Whether the note holds ``plan.appended`` at ``plan.offset`` (it was written)."""
        target = confine(self.root, plan.path)
        if not target.is_file():
            return False
        with target.open("rb") as handle:
            handle.seek(plan.offset)
            return handle.read(len(plan.data)) == plan.data


def validated_note(text: str) -> str:
    """The text of a note append as it is written (surrounding newlines stripped), or
    ``InvalidInputError``."""
    if not isinstance(text, str):
        raise InvalidInputError("note text must be a string")
    body = text.strip("\n")
    if not body.strip():
        raise InvalidInputError("note text is empty; write the durable facts to remember")
    if len(body) > MAX_NOTE_CHARS:
        raise InvalidInputError(
            f"note text has {len(body)} characters; the limit is {MAX_NOTE_CHARS} per append"
        )
    if "\x00" in body:
        raise InvalidInputError("note text contains a NUL character")
    try:
        body.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"note text is not valid Unicode (unpaired surrogate at character {exc.start})"
        ) from exc
    return body


def validated_date(date: str | None) -> str:
    """``date`` as ISO ``YYYY-MM-DD`` (None: today), or ``InvalidInputError``."""
    if date is None:
        return dt.date.today().isoformat()
    try:
        return dt.date.fromisoformat(date).isoformat()
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"date {date!r} is not an ISO date (YYYY-MM-DD)") from exc
