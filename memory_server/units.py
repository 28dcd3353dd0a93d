"""What the index holds: index units and their chunks.

An *index unit* is one file, or one artifact card (id, title, modality, aliases, files) for
artifacts whose files have no text of their own (an image) or that carry a title or aliases.
A unit's key changes whenever its content or artifact context changes, so a sync only adds
new keys; keys of a version are what restrict a query to that version. A chunk's id is a hash
of its unit's key and its place in the unit, so a rebuild produces the same chunks.

Above: ``memory_server.index`` (which units a sync adds or drops, which a search may return)
and ``memory_server.ingest`` (which chunks the units it stores). Below: the built manifest,
the chunkers and the workspace's file bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict

from memory_server.chunking import CHUNKER_VERSION, chunk_text, extract_text
from memory_server.errors import CorruptStateError
from memory_server.keyword import StoredChunk
from memory_server.manifest import ArtifactRecord, BuiltManifest, FileEntry
from memory_server.workspace import Workspace

log = structlog.get_logger(__name__)

_CARD_KINDS = frozenset({"image", "binary"})


class IndexUnit(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    path: str
    artifact_id: str
    header_label: str
    entry: FileEntry | None = None
    card: ArtifactRecord | None = None


def _digest(*parts: Any) -> str:
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def units_for(manifest: BuiltManifest) -> dict[str, IndexUnit]:
    """Every index unit of a built manifest, by key."""
    units: dict[str, IndexUnit] = {}
    for entry in manifest.files.values():
        record = manifest.artifacts.get(entry.artifact_id)
        title = record.title if record else None
        label = f"{entry.artifact_id} — {title}" if title else entry.artifact_id
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
    file without text. Raises what reading or extracting the file raises."""
    if unit.card is not None:
        pieces = [(0, _card_text(unit.card), 0, 0, "artifact card")]
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


class UnitCatalog:
    """The units of the manifests the index is asked about, computed once each: the current
    manifest's (the workspace keeps the same manifest object while nothing changes) and every
    stored version's keys (a version never changes)."""

    def __init__(self) -> None:
        self._current: tuple[BuiltManifest, dict[str, IndexUnit]] | None = None
        self._versions: dict[str, frozenset[str]] = {}

    def of(self, manifest: BuiltManifest) -> dict[str, IndexUnit]:
        """``units_for`` with a one-entry cache keyed by manifest identity."""
        cached = self._current
        if cached is not None and cached[0] is manifest:
            return cached[1]
        units = units_for(manifest)
        self._current = (manifest, units)
        return units

    def snapshot_keys(self, workspace: Workspace) -> set[str] | None:
        """Unit keys of every stored version, or None when one cannot be read (then nothing is
        dropped: the index cannot tell what that version needs)."""
        keys: set[str] = set()
        for version in workspace.store.list_versions():
            cached = self._versions.get(version)
            if cached is None:
                try:
                    cached = frozenset(units_for(workspace.version(version)))
                except CorruptStateError as exc:
                    log.warning("index.version_unreadable", version=version, error=str(exc))
                    return None
                self._versions[version] = cached
            keys |= cached
        return keys
