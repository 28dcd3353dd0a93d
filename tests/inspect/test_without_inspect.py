"""Without the ``inspect`` extra the default install never loads inspect-ai: ``mirage --help``
does not import it, and ``mirage export inspect`` says how to install it in one line, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mirage.cli import app
from tests.cli_errors import assert_one_line_error
from tests.harness.report_support import write_result_folder


def test_the_cli_does_not_import_inspect() -> None:
    code = "import sys, mirage.cli; print(any(m.startswith('inspect_ai') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_export_without_inspect_is_one_line_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_result_folder(tmp_path / "run")
    for name in [m for m in sys.modules if m.startswith(("inspect_ai", "harness.mirage.inspect"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # an import of it fails
    result = CliRunner().invoke(app, ["export", "inspect", str(folder), "--to", str(tmp_path)])
    assert_one_line_error(result, "error: Inspect is not installed", '".[inspect]"', exit_code=2)
