"""What the index holds: index units and their chunks.

An *index unit* is one file, one piece of a dated note, or one artifact card (id, title,
modality, aliases, files) for artifacts whose files have no text of their own (an image) or
that carry a title or aliases. A unit's key changes whenever its content or artifact context
changes, so a sync only adds new keys; keys of a version are what restrict a query to that
version. A chunk's id is a hash of its unit's key and its place in the unit, so a rebuild
produces the same chunks.

Dated notes (``memory/YYYY-MM-DD.md``) only grow, by appends. Each of their chunks is a unit of
its own, keyed by its text, lines and place: an append leaves every earlier chunk's key as it
was except the last one's (when the new text joins it), so the sync after an append stores and
embeds the note's tail only, not the whole note again. A note's chunks are computed once per
content hash (``_NotePieces``).

Above: ``memory_server.index`` (which units a sync adds or drops, which a search may return)
and ``memory_server.ingest`` (which chunks the units it stores). Below: the built manifest,
the chunkers and the workspace's file bytes (and its stored blobs, for a version's notes).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict

from memory_server.chunking import CHUNKER_VERSION, Chunk, chunk_text, extract_text
from memory_server.errors import CorruptStateError, MemoryServerError
from memory_server.keyword import StoredChunk
from memory_server.manifest import NOTE_PATH_PATTERN, ArtifactRecord, BuiltManifest, FileEntry
from memory_server.workspace import Workspace

log = structlog.get_logger(__name__)

_CARD_KINDS = frozenset({"image", "binary"})
_NOTES_KEPT = 256
_VERSIONS_KEPT = 16


class IndexUnit(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    path: str
    artifact_id: str
    header_label: str
    entry: FileEntry | None = None
    card: ArtifactRecord | None = None
    piece: Chunk | None = None


def _digest(*parts: Any) -> str:
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def units_for(
    manifest: BuiltManifest, notes: _NotePieces, *, stored: bool = False
) -> dict[str, IndexUnit]:
    """Every index unit of a built manifest, by key (``notes``: the chunks of dated notes;
    ``stored``: ``manifest`` is a stored version, whose notes must be readable as it has them,
    else ``CorruptStateError``)."""
    units: dict[str, IndexUnit] = {}
    for entry in manifest.files.values():
        record = manifest.artifacts.get(entry.artifact_id)
        title = record.title if record else None
        label = f"{entry.artifact_id} — {title}" if title else entry.artifact_id
        if NOTE_PATH_PATTERN.match(entry.path):
            for piece in notes.of(entry, exact=stored):
                content = piece.model_dump()
                key = _digest("note", CHUNKER_VERSION, entry.path, entry.kind, label, content)
                units[key] = IndexUnit(
                    key=key,
                    path=entry.path,
                    artifact_id=entry.artifact_id,
                    header_label=label,
                    piece=piece,
                )
            continue
        key = _digest("file", CHUNKER_VERSION, entry.path, entry.sha256, entry.kind, label)
        units[key] = IndexUnit(
            key=key, path=entry.path, artifact_id=entry.artifact_id, header_label=label, entry=entry
        )
    for record in manifest.artifacts.values():
        if record.is_note or not record.files or not _needs_card(record, manifest):
            continue
        key = _digest("card", CHUNKER_VERSION, record.model_dump(mode="json"))
        units[key] = IndexUnit(
            key=key,
            path=record.files[0],
            artifact_id=record.id,
            header_label=record.id,
            card=record,
        )
    return units


def _needs_card(record: ArtifactRecord, manifest: BuiltManifest) -> bool:
    if record.title or record.aliases or record.modality:
        return True
    return any(manifest.files[path].kind in _CARD_KINDS for path in record.files)


def _card_text(record: ArtifactRecord) -> str:
    lines = [f"Artifact {record.id}"]
    if record.title:
        lines.append(f"Title: {record.title}")
    if record.modality:
        lines.append(f"Modality: {record.modality}")
    if record.aliases:
        lines.append("Aliases: " + ", ".join(record.aliases))
    lines.append("Files: " + ", ".join(record.files))
    return "\n".join(lines)


def chunk_unit(workspace: Workspace, unit: IndexUnit, version: str | None) -> list[StoredChunk]:
    """The chunks of ``unit`` as the working tree (or stored ``version``) holds it; none for a
    file without text (a note piece is its own one chunk, read already). Raises what reading or
    extracting the file raises."""
    if unit.card is not None:
        pieces = [(0, _card_text(unit.card), 0, 0, "artifact card")]
    elif unit.piece is not None:
        piece = unit.piece
        pieces = [(piece.ordinal, piece.text, piece.start_line, piece.end_line, piece.locator)]
    else:
        assert unit.entry is not None
        text = extract_text(workspace.read_bytes(unit.path, version), unit.entry.kind)
        if text is None:
            return []
        pieces = [
            (c.ordinal, c.text, c.start_line, c.end_line, c.locator)
            for c in chunk_text(text, unit.entry.kind)
        ]
    return [
        StoredChunk(
            chunk_id=_digest(unit.key, ordinal),
            unit_key=unit.key,
            path=unit.path,
            ordinal=ordinal,
            start_line=start,
            end_line=end,
            locator=locator,
            header=f"[{unit.header_label}] {unit.path}" + (f" › {locator}" if locator else ""),
            text=text,
        )
        for ordinal, text, start, end, locator in pieces
    ]


class _NotePieces:
    """The chunks of dated notes, by (path, content hash), the most recent ``_NOTES_KEPT``."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._kept: OrderedDict[tuple[str, str, str], tuple[Chunk, ...]] = OrderedDict()
        self._guard = threading.Lock()

    def of(self, entry: FileEntry, *, exact: bool = False) -> tuple[Chunk, ...]:
        """The chunks of the note ``entry`` names, read from the working tree when it still
        holds that content, else from the stored blob. When neither does (the note changed
        since the manifest was built and was never snapshotted), ``exact`` raises
        ``CorruptStateError``; otherwise these are the chunks of the note as it is now, not
        kept: the next sync's manifest has that content."""
        key = (entry.path, entry.sha256, entry.kind)
        with self._guard:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
        data, matches = self._read(entry)
        if exact and not matches:
            raise CorruptStateError(
                f"neither the working tree nor the snapshot store holds {entry.path!r} with "
                f"content {entry.sha256[:12]}…; take a new snapshot or restore .mirage/"
            )
        text = extract_text(data, entry.kind) if data is not None else None
        pieces = tuple(chunk_text(text, entry.kind)) if text else ()
        if matches:
            with self._guard:
                self._kept[key] = pieces
                if len(self._kept) > _NOTES_KEPT:
                    self._kept.popitem(last=False)
        return pieces

    def _read(self, entry: FileEntry) -> tuple[bytes | None, bool]:
        """The note's bytes, and whether they are exactly ``entry``'s content."""
        current: bytes | None = None
        with contextlib.suppress(OSError, MemoryServerError):
            current = self._workspace.read_bytes(entry.path)
        if current is not None and hashlib.sha256(current).hexdigest() == entry.sha256:
            return current, True
        try:
            label = f"{entry.path!r} ({entry.sha256[:12]})"
            return self._workspace.store.read_blob(entry.sha256, label), True
        except (OSError, MemoryServerError):
            pass
        if current is None:
            log.warning("index.note_unreadable", path=entry.path)
        return current, False


class UnitCatalog:
    """The units of the manifests the index is asked about, computed once each: the current
    manifest's (the workspace keeps the same manifest object while nothing changes), the most
    recently searched stored versions' and every stored version's keys (a version never
    changes)."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._notes = _NotePieces(workspace)
        self._current: tuple[BuiltManifest, dict[str, IndexUnit]] | None = None
        self._recent: OrderedDict[str, dict[str, IndexUnit]] = OrderedDict()
        self._recent_guard = threading.Lock()
        self._versions: dict[str, frozenset[str]] = {}

    def of(self, manifest: BuiltManifest) -> dict[str, IndexUnit]:
        """``units_for`` with a one-entry cache keyed by manifest identity."""
        cached = self._current
        if cached is not None and cached[0] is manifest:
            return cached[1]
        units = units_for(manifest, self._notes)
        self._current = (manifest, units)
        return units

    def of_version(self, version: str) -> dict[str, IndexUnit]:
        """The units of stored ``version`` (the last ``_VERSIONS_KEPT`` asked for are kept)."""
        with self._recent_guard:
            found = self._recent.get(version)
            if found is not None:
                self._recent.move_to_end(version)
                return found
        found = units_for(self._workspace.version(version), self._notes, stored=True)
        with self._recent_guard:
            self._recent[version] = found
            if len(self._recent) > _VERSIONS_KEPT:
                self._recent.popitem(last=False)
        return found

    def snapshot_keys(self) -> set[str] | None:
        """Unit keys of every stored version, or None when one cannot be read (then nothing is
        dropped: the index cannot tell what that version needs)."""
        keys: set[str] = set()
        for version in self._workspace.store.list_versions():
            cached = self._versions.get(version)
            if cached is None:
                try:
                    manifest = self._workspace.version(version)
                    cached = frozenset(units_for(manifest, self._notes, stored=True))
                except CorruptStateError as exc:
                    log.warning("index.version_unreadable", version=version, error=str(exc))
                    return None
                self._versions[version] = cached
            keys |= cached
        return keys
