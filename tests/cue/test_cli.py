"""``mirage cue validate|build|report``: exit codes and one-line problems, no tracebacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from typer.testing import CliRunner

from harness.cue.pack import BUNDLED_DIR, DEFAULT_PACK
from mirage.cli import app


def test_validate_the_bundled_pack() -> None:
    result = CliRunner().invoke(app, ["cue", "validate", DEFAULT_PACK])
    assert result.exit_code == 0 and "cue-en: ok" in result.output


def test_validate_lists_problems_and_exits_2(tmp_path: Path) -> None:
    root = tmp_path / "pack"
    shutil.copytree(BUNDLED_DIR / DEFAULT_PACK, root)
    bank = yaml.safe_load((root / "questions.yaml").read_text())
    bank["questions"][0]["question"] = "Is Biscuit the name of Maya's dog?"
    (root / "questions.yaml").write_text(yaml.safe_dump(bank, sort_keys=False, allow_unicode=True))
    result = CliRunner().invoke(app, ["cue", "validate", str(root)])
    assert result.exit_code == 2
    assert "2 problem(s)" in result.output and "the stem contains the answer terms" in result.output


def test_validate_an_unknown_pack_names_the_bundled_ones() -> None:
    result = CliRunner().invoke(app, ["cue", "validate", "no-such-pack"])
    assert result.exit_code == 2 and "bundled packs: cue-en" in result.output


def test_build_an_unknown_pack_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["cue", "build", "--name", "nope", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "unknown bundled CUE pack 'nope'" in result.output


def test_report_on_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["cue", "report", str(tmp_path)])
    assert result.exit_code == 2 and "no run.json" in result.output
    assert "Traceback" not in result.output
