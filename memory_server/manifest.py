"""Manifests: the user's ``MANIFEST.yaml`` and the built manifest of every workspace file.

The user manifest (optional, at the workspace root) names artifacts, their files and aliases::

    artifacts:
      - id: chart_3f9a1c20
        title: "Median rent by city, 2015–2023"     # optional
        modality: chart                               # optional free text
        files: [artifacts/chart_3f9a1c20.png, derived/chart_3f9a1c20.table.csv]
        aliases: ["rent chart", "chart A"]            # optional

The built manifest maps every file to its artifact id, kind, role and content hash. A file not
listed in the user manifest gets the id of its file name up to the first dot
(``derived/chart_3f9a1c20.table.csv`` -> ``chart_3f9a1c20``); ``MEMORY.md`` is the note
``MEMORY`` and ``memory/2026-01-03.md`` the note ``memory/2026-01-03``. A built manifest is
content-addressed: its version id is the hash of its canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory_server.errors import ManifestError
from memory_server.paths import normalise_relative

USER_MANIFEST_NAME = "MANIFEST.yaml"
NOTE_PATH_PATTERN = re.compile(r"^memory/(\d{4}-\d{2}-\d{2})\.md$")
ARTIFACT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,199}$")

FileKind = Literal["markdown", "csv", "json", "jsonl", "code", "pdf", "text", "image", "binary"]
FileRole = Literal["artifact", "derived", "note"]

_EXTENSION_KINDS: dict[str, FileKind] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".pdf": "pdf",
    ".txt": "text",
    ".log": "text",
    ".rst": "text",
    ".html": "text",
    ".xml": "text",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".gif": "image",
    ".webp": "image",
    ".bmp": "image",
    ".svg": "image",
}
_CODE_EXTENSIONS = frozenset(
    [
        ".py",
        ".js",
        ".ts",
        ".tsx",
        ".jsx",
        ".java",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".sh",
        ".bash",
        ".sql",
        ".r",
        ".jl",
        ".kt",
        ".swift",
        ".scala",
        ".lua",
        ".pl",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
    ]
)


def kind_of(path: str) -> FileKind:
    suffix = Path(path).suffix.lower()
    if suffix in _CODE_EXTENSIONS:
        return "code"
    return _EXTENSION_KINDS.get(suffix, "text" if suffix == "" else "binary")


class UserArtifact(BaseModel):
    """One artifact of ``MANIFEST.yaml``."""

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str | None = None
    modality: str | None = None
    files: list[str] = Field(default_factory=list)
    aliases: list[str] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        if not ARTIFACT_ID_PATTERN.match(value):
            raise ValueError(
                f"artifact id {value!r} must start with a letter or digit and use only "
                "letters, digits, '_', '-', '.', '/' (at most 200 characters)"
            )
        return value

    @field_validator("files")
    @classmethod
    def _clean_files(cls, value: list[str]) -> list[str]:
        return [normalise_relative(item) for item in value]


class UserManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    artifacts: list[UserArtifact] = Field(default_factory=list)


def load_user_manifest(root: Path) -> UserManifest:
    """The workspace's ``MANIFEST.yaml``, or an empty manifest when there is none."""
    path = root / USER_MANIFEST_NAME
    if not path.is_file():
        return UserManifest()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        manifest = UserManifest.model_validate(data)
    except (yaml.YAMLError, ValidationError, ValueError) as exc:
        raise ManifestError(f"{USER_MANIFEST_NAME} is invalid: {exc}") from exc
    _check_unique(manifest)
    return manifest


def _check_unique(manifest: UserManifest) -> None:
    seen_ids: set[str] = set()
    owner: dict[str, str] = {}
    for artifact in manifest.artifacts:
        if artifact.id.lower() in seen_ids:
            raise ManifestError(f"{USER_MANIFEST_NAME}: artifact id {artifact.id!r} appears twice")
        seen_ids.add(artifact.id.lower())
        for file in artifact.files:
            if file in owner and owner[file] != artifact.id:
                raise ManifestError(
                    f"{USER_MANIFEST_NAME}: file {file!r} is listed under both "
                    f"{owner[file]!r} and {artifact.id!r}"
                )
            owner[file] = artifact.id


class FileEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    artifact_id: str
    kind: FileKind
    role: FileRole
    sha256: str
    size: int


class ArtifactRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    title: str | None = None
    modality: str | None = None
    files: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    is_note: bool = False


class BuiltManifest(BaseModel):
    """Every workspace file with its artifact id and content hash, and every artifact."""

    model_config = ConfigDict(frozen=True)

    files: dict[str, FileEntry] = Field(default_factory=dict)
    artifacts: dict[str, ArtifactRecord] = Field(default_factory=dict)

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def version_id(self) -> str:
        digest = hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()
        return f"v_{digest[:24]}"


def default_artifact_id(path: str) -> str:
    """The id of a file the user manifest does not list."""
    note = NOTE_PATH_PATTERN.match(path)
    if note:
        return f"memory/{note.group(1)}"
    name = path.rsplit("/", 1)[-1]
    if name == "MEMORY.md":
        return "MEMORY"
    stem = name.split(".", 1)[0]
    return stem or name


def role_of(path: str, listed_first: bool, listed: bool) -> FileRole:
    if path == "MEMORY.md" or NOTE_PATH_PATTERN.match(path):
        return "note"
    if listed:
        return "artifact" if listed_first else "derived"
    return "derived" if path.startswith("derived/") else "artifact"


def build_manifest(user: UserManifest, hashes: dict[str, tuple[str, int]]) -> BuiltManifest:
    """Combine the user manifest with the workspace's files (path -> (sha256, size))."""
    listed: dict[str, tuple[str, bool]] = {}
    for artifact in user.artifacts:
        for index, file in enumerate(artifact.files):
            listed[file] = (artifact.id, index == 0)
    files: dict[str, FileEntry] = {}
    for path in sorted(hashes):
        sha, size = hashes[path]
        artifact_id, first = listed.get(path, (default_artifact_id(path), False))
        files[path] = FileEntry(
            path=path,
            artifact_id=artifact_id,
            kind=kind_of(path),
            role=role_of(path, first, path in listed),
            sha256=sha,
            size=size,
        )
    return BuiltManifest(files=files, artifacts=_artifact_records(user, files))


def _artifact_records(user: UserManifest, files: dict[str, FileEntry]) -> dict[str, ArtifactRecord]:
    records: dict[str, ArtifactRecord] = {}
    for artifact in user.artifacts:
        present = tuple(file for file in artifact.files if file in files)
        records[artifact.id] = ArtifactRecord(
            id=artifact.id,
            title=artifact.title,
            modality=artifact.modality,
            files=present,
            aliases=tuple(artifact.aliases),
        )
    by_id: dict[str, list[str]] = {}
    for entry in files.values():
        if entry.artifact_id not in records:
            by_id.setdefault(entry.artifact_id, []).append(entry.path)
    for artifact_id, paths in by_id.items():
        is_note = all(files[path].role == "note" for path in paths)
        records[artifact_id] = ArtifactRecord(id=artifact_id, files=tuple(paths), is_note=is_note)
    return dict(sorted(records.items()))
