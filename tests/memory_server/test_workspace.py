"""Workspace behaviour: manifest resolution, snapshots, append-only notes, path confinement."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from memory_server.errors import (
    InvalidInputError,
    ManifestError,
    PathEscapeError,
    UnknownReferenceError,
    UnknownVersionError,
)
from memory_server.workspace import Workspace

RESOLUTION_TABLE = [
    ("chart_3f9a1c20", "chart_3f9a1c20"),
    ("CHART_3F9A1C20", "chart_3f9a1c20"),
    ("  `chart_3f9a1c20`  ", "chart_3f9a1c20"),
    ('"chart_3f9a1c20".', "chart_3f9a1c20"),
    ("[chart_3f9a1c20]", "chart_3f9a1c20"),
    ("artifacts/chart_3f9a1c20.png", "chart_3f9a1c20"),
    ("./derived/chart_3f9a1c20.table.csv", "chart_3f9a1c20"),
    ("derived/chart_3f9a1c20.table.csv#L3", "chart_3f9a1c20"),
    ("derived/chart_3f9a1c20.table.csv#rows-2-3", "chart_3f9a1c20"),
    ("chart_3f9a1c20.table.csv", "chart_3f9a1c20"),
    ("rent chart", "chart_3f9a1c20"),
    ("Chart A", "chart_3f9a1c20"),
    ("Median rent by city, 2015–2023", "chart_3f9a1c20"),
    ("artifacts/invoice_2023_0042.json", "invoice_2023_0042"),
    ("invoice_2023_0042", "invoice_2023_0042"),
    ("code/loan_calc.py", "loan_calc"),
    ("loan_calc", "loan_calc"),
    ("notes/meeting_minutes.txt#L3", "meeting_minutes"),
    ("MEMORY.md", "MEMORY"),
    ("memory", "MEMORY"),
    ("memory/2026-01-03.md", "memory/2026-01-03"),
    ("memory/2026-01-03", "memory/2026-01-03"),
    ("memory/2026-01-03.md#L4", "chart_3f9a1c20"),
    ("memory/2026-01-03.md#L3-L4", "chart_3f9a1c20"),
    ("memory/2026-01-03.md#rent", "chart_3f9a1c20"),
    ("memory/2026-01-03.md#chart_3f9a1c20", "chart_3f9a1c20"),
    ("memory/2026-01-03.md#travel", "memory/2026-01-03"),
    ("memory/2026-01-03.md#L7", "memory/2026-01-03"),
    ("memory/2026-01-03.md#no-such-section", "memory/2026-01-03"),
    ("unknown_artifact", None),
    ("", None),
    ("../etc/passwd", None),
]


@pytest.mark.parametrize(("ref", "expected"), RESOLUTION_TABLE)
def test_resolution_table(workspace_dir: Path, ref: str, expected: str | None) -> None:
    assert Workspace.open(workspace_dir).resolve(ref) == expected


def test_resolution_strips_workspace_prefixes(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    absolute = str(workspace_dir.resolve() / "derived" / "chart_3f9a1c20.table.csv")
    assert workspace.resolve(absolute) == "chart_3f9a1c20"
    assert workspace.resolve(f"file://{absolute}") == "chart_3f9a1c20"
    assert workspace.resolve(f"{workspace_dir.name}/artifacts/chart_3f9a1c20.png") == (
        "chart_3f9a1c20"
    )


def test_manifest_lists_every_file_with_role(workspace_dir: Path) -> None:
    manifest = Workspace.open(workspace_dir).manifest
    roles = {path: entry.role for path, entry in manifest.files.items()}
    assert roles["artifacts/chart_3f9a1c20.png"] == "artifact"
    assert roles["derived/chart_3f9a1c20.table.csv"] == "derived"
    assert roles["memory/2026-01-03.md"] == "note"
    assert roles["MEMORY.md"] == "note"
    assert "MANIFEST.yaml" not in manifest.files
    assert manifest.artifacts["memory/2026-01-03"].is_note
    assert not manifest.artifacts["chart_3f9a1c20"].is_note
    assert (workspace_dir / ".mirage" / "manifest.json").is_file()


def test_invalid_manifest_is_reported(workspace_dir: Path) -> None:
    (workspace_dir / "MANIFEST.yaml").write_text("artifacts:\n  - id: '../bad'\n    files: []\n")
    with pytest.raises(ManifestError, match="artifact id"):
        Workspace.open(workspace_dir)
    (workspace_dir / "MANIFEST.yaml").write_text(
        "artifacts:\n  - id: a\n    files: [x.txt]\n  - id: b\n    files: [x.txt]\n"
    )
    with pytest.raises(ManifestError, match="listed under both"):
        Workspace.open(workspace_dir)


def test_plain_directory_is_a_workspace(tmp_path: Path) -> None:
    (tmp_path / "report.v2.txt").write_text("hello")
    workspace = Workspace.open(tmp_path)
    assert workspace.resolve("report.v2.txt") == "report"
    assert list(workspace.manifest.files) == ["report.v2.txt"]


def test_snapshot_is_content_addressed_and_cheap(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    first = workspace.snapshot()
    blobs = sorted((workspace_dir / ".mirage" / "blobs").rglob("*"))
    mtimes = {path: path.stat().st_mtime_ns for path in blobs if path.is_file()}
    assert workspace.snapshot() == first
    assert {p: p.stat().st_mtime_ns for p in blobs if p.is_file()} == mtimes

    (workspace_dir / "notes" / "new.txt").write_text("a new fact")
    second = workspace.snapshot()
    assert second != first
    new_blobs = [p for p in (workspace_dir / ".mirage" / "blobs").rglob("*") if p.is_file()]
    assert len(new_blobs) == len(mtimes) + 1
    assert {p: p.stat().st_mtime_ns for p in blobs if p.is_file()} == mtimes


def test_version_is_immutable_after_edits(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    version = workspace.snapshot()
    table = "derived/chart_3f9a1c20.table.csv"
    original = workspace.read_bytes(table)
    (workspace_dir / table).write_text("city,year\nParis,2020\n")
    assert workspace.read_bytes(table, version=version) == original
    assert workspace.read_bytes(table) != original
    assert workspace.version(version).files[table].sha256 != workspace.refresh().files[table].sha256


def test_unknown_version_is_an_error(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    with pytest.raises(UnknownVersionError):
        workspace.version("v_doesnotexist")
    with pytest.raises(UnknownVersionError):
        workspace.version("../../etc/passwd")


def test_append_note_only_appends(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    note = workspace_dir / "memory" / "2026-01-03.md"
    before = note.read_text()
    landed = workspace.append_note("- Berlin rent rose to 2110 EUR by 2023.", date="2026-01-03")
    after = note.read_text()
    assert after.startswith(before)
    assert "2110 EUR" in after
    lines = after.splitlines()
    assert lines[landed.start_line - 1] == "- Berlin rent rose to 2110 EUR by 2023."
    assert workspace.resolve(f"{landed.path}#L{landed.start_line}") == "memory/2026-01-03"


def test_append_note_creates_todays_note(workspace_dir: Path) -> None:
    import datetime as dt

    workspace = Workspace.open(workspace_dir)
    landed = workspace.append_note("first line\nsecond line")
    assert landed.path == f"memory/{dt.date.today().isoformat()}.md"
    assert landed.end_line == landed.start_line + 1
    assert workspace.resolve(landed.path) == f"memory/{dt.date.today().isoformat()}"


def test_concurrent_appends_lose_nothing(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    threads = [
        threading.Thread(target=workspace.append_note, args=(f"fact {i}", "2026-02-01"))
        for i in range(12)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    text = (workspace_dir / "memory" / "2026-02-01.md").read_text()
    assert all(f"fact {i}\n" in text for i in range(12))


@pytest.mark.parametrize(
    ("text", "date", "message"),
    [
        ("", None, "empty"),
        ("   \n ", None, "empty"),
        ("x" * 20_001, None, "limit"),
        ("ok", "2026-13-01", "ISO date"),
        ("ok", "../../evil", "ISO date"),
    ],
)
def test_append_note_rejects_bad_input(
    workspace_dir: Path, text: str, date: str | None, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        Workspace.open(workspace_dir).append_note(text, date=date)


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "/etc/passwd", "notes/../../outside.txt", ".mirage/manifest.json", "C:/x"],
)
def test_reads_are_confined(workspace_dir: Path, path: str) -> None:
    (workspace_dir.parent / "outside.txt").write_text("secret")
    with pytest.raises(PathEscapeError):
        Workspace.open(workspace_dir).read_bytes(path)


def test_symlink_escape_is_refused_and_not_indexed(workspace_dir: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2")
    os.symlink(secret, workspace_dir / "notes" / "link.txt")
    os.symlink(workspace_dir / "MEMORY.md", workspace_dir / "notes" / "inside_link.md")
    workspace = Workspace.open(workspace_dir)
    assert "notes/link.txt" not in workspace.manifest.files
    assert "notes/inside_link.md" in workspace.manifest.files
    with pytest.raises(PathEscapeError, match="symlink"):
        workspace.read_bytes("notes/link.txt")


def test_append_refuses_symlinked_memory_dir(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / "memory")
    with pytest.raises(PathEscapeError):
        Workspace.open(root).append_note("should not land outside", date="2026-01-01")
    assert not any(elsewhere.iterdir())


def test_file_entry_by_id_or_path(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    assert workspace.file_entry("invoice_2023_0042").path == "artifacts/invoice_2023_0042.json"
    assert workspace.file_entry("./MEMORY.md").path == "MEMORY.md"
    with pytest.raises(UnknownReferenceError):
        workspace.file_entry("nothing_here")
