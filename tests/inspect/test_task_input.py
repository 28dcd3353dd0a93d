"""The ``mirage/probe`` task refuses, with one line naming the folder, a folder that is not a
mirage run and a run without a finished checkpoint family (it never builds one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.report_support import write_result_folder

pytest.importorskip("inspect_ai")


def test_a_folder_without_run_json_is_refused(tmp_path: Path) -> None:
    from harness.mirage.inspect.task import ProbeSession, TaskInputError

    with pytest.raises(TaskInputError, match=r"has no run\.json: not the --out of a mirage run"):
        ProbeSession(tmp_path, "inspect")


def test_a_run_without_checkpoints_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    from harness.mirage.inspect.task import ProbeSession, TaskInputError

    run = tmp_path / "run"
    write_result_folder(run)
    with pytest.raises(TaskInputError, match="no finished checkpoint family"):
        ProbeSession(run, "inspect")
    assert not (run / "inspect").exists()
