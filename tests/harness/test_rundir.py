"""Finding the workspace a run used, from its result folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.kit.rundir import (
    WORKSPACE_LINK,
    WorkspaceNotFoundError,
    find_workspace,
    write_workspace_link,
)


def test_the_link_wins_and_survives_moving_the_whole_run(tmp_path: Path) -> None:
    run = tmp_path / "out"
    (run / "model").mkdir(parents=True)
    (run / "shared-workspace").mkdir()
    write_workspace_link(run / "model", run / "shared-workspace")
    (run / "model" / "workspace").mkdir()  # a decoy the link must beat
    assert find_workspace(run / "model").resolve() == (run / "shared-workspace").resolve()
    moved = tmp_path / "elsewhere"
    run.rename(moved)
    assert find_workspace(moved / "model").resolve() == (moved / "shared-workspace").resolve()


def test_runs_from_before_links_use_the_sibling_workspace(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "workspace").mkdir()
    with pytest.raises(WorkspaceNotFoundError):  # no run.json: not a mirage run layout
        find_workspace(tmp_path / "model")
    (tmp_path / "run.json").write_text("{}")
    assert find_workspace(tmp_path / "model") == tmp_path / "workspace"


def test_explicit_and_missing_workspaces(tmp_path: Path) -> None:
    assert find_workspace(tmp_path, explicit=tmp_path) == tmp_path
    with pytest.raises(WorkspaceNotFoundError, match=r"--workspace .* is not a directory"):
        find_workspace(tmp_path, explicit=tmp_path / "nope")
    with pytest.raises(WorkspaceNotFoundError, match=r"no workspace found .* pass --workspace W"):
        find_workspace(tmp_path)


def test_a_malformed_link_is_named(tmp_path: Path) -> None:
    (tmp_path / WORKSPACE_LINK).write_text("{not json")
    with pytest.raises(WorkspaceNotFoundError, match="is not a workspace link"):
        find_workspace(tmp_path)
