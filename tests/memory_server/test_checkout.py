"""Workspace versions as states to return to: ``checkout`` puts the dated notes back as a
version had them, ``resolver(version)`` reads a version's notes for line anchors, and tags name
versions (a run's workspace as its pack materialised it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory_server import workspace as workspace_module
from memory_server.errors import CorruptStateError, UnknownVersionError
from memory_server.store import atomic_write_bytes
from memory_server.workspace import Workspace


def test_checkout_returns_the_notes_to_a_version(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    first = workspace.snapshot()
    notes_before = {p: workspace.read_bytes(p) for p in workspace.manifest.files if "memory/" in p}
    workspace.append_note("The inverter invoice INV-2023-0042 is due 2023-11-30.", "2026-01-03")
    workspace.append_note("A new day's note about chart_3f9a1c20.", "2026-02-01")
    second = workspace.snapshot()

    workspace.checkout(first)
    assert workspace.snapshot() == first
    assert not (workspace_dir / "memory" / "2026-02-01.md").exists()
    for path, data in notes_before.items():
        assert (workspace_dir / path).read_bytes() == data
    workspace.checkout(second)
    assert workspace.snapshot() == second
    assert "A new day's note" in (workspace_dir / "memory" / "2026-02-01.md").read_text()


def test_checkout_of_same_sized_notes_is_not_fooled_by_the_hash_cache(
    workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two versions whose note differs but has the same size, checked out in turn on a file
    system whose clock is coarse (every write gets one modification time): the tree still
    hashes to the version checked out."""

    def coarse_clock(target: Path, data: bytes) -> None:
        atomic_write_bytes(target, data)
        os.utime(target, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))

    workspace = Workspace.open(workspace_dir)
    workspace.append_note("note AAAA", "2026-03-01")
    a = workspace.snapshot()
    (workspace_dir / "memory" / "2026-03-01.md").unlink()
    workspace.append_note("note BBBB", "2026-03-01")
    b = workspace.snapshot()
    assert a != b
    monkeypatch.setattr(workspace_module, "atomic_write_bytes", coarse_clock)
    for version in (a, b, a, b):
        workspace.checkout(version)
        assert Workspace.open(workspace_dir).snapshot() == version


def test_checkout_refuses_a_tree_whose_read_only_files_changed(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    version = workspace.snapshot()
    (workspace_dir / "derived" / "chart_3f9a1c20.table.csv").write_text("city\nnowhere\n")
    with pytest.raises(CorruptStateError, match=r"chart_3f9a1c20\.table\.csv differs from it"):
        workspace.checkout(version)
    with pytest.raises(UnknownVersionError):
        workspace.checkout("v_000000000000000000000000")


def test_a_versions_line_anchors_name_that_versions_lines(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    landed = workspace.append_note("About the rent chart: chart_3f9a1c20.", "2026-04-01")
    first = workspace.snapshot()
    (workspace_dir / "memory" / "2026-04-01.md").unlink()
    workspace.append_note("About the invoice: invoice_2023_0042.", "2026-04-01")
    anchor = f"memory/2026-04-01.md#L{landed.start_line}"
    assert workspace.resolve(anchor) == "invoice_2023_0042"
    assert workspace.resolver(first).resolve(anchor) == "chart_3f9a1c20"


def test_tags_name_versions(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    version = workspace.snapshot()
    assert workspace.store.tagged("pack") is None
    workspace.store.tag("pack", version)
    assert Workspace.open(workspace_dir).store.tagged("pack") == version
    with pytest.raises(ValueError, match="not a name"):
        workspace.store.tag("../escape", version)
    with pytest.raises(UnknownVersionError):
        workspace.store.tag("other", "v_000000000000000000000000")
