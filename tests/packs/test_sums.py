"""Packs carry a SHA256SUMS: `pack build`/`import`/`lock` write it, the bundled packs are locked,
`pack validate` and `mirage run` refuse a file that does not match it with one line, and the
list is no part of the pack digest (so locking a pack keeps its checkpoint families)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.kit.packsums import SUMS_FILE, check_sums
from harness.kit.rundir import pack_digest
from harness.mirage.packs.build import BUNDLED_PACKS
from harness.mirage.packs.pack import BUNDLED_DIR
from mirage.cli import app
from tests.cli_errors import assert_one_line_error

runner = CliRunner()
DERIVED = "derived/chart_1121ed9b.summary.md"


def _locked_copy(tmp_path: Path) -> Path:
    target = tmp_path / "core"
    shutil.copytree(BUNDLED_DIR / "mirage-core", target)
    return target


def _flip_byte(path: Path, offset: int = 10) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x80  # makes the text invalid UTF-8 as well as different
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", BUNDLED_PACKS)
def test_bundled_packs_are_locked_and_match(name: str) -> None:
    assert (BUNDLED_DIR / name / SUMS_FILE).is_file()
    assert check_sums(BUNDLED_DIR / name) is True


def test_the_sums_file_does_not_change_the_pack_digest(tmp_path: Path) -> None:
    pack = _locked_copy(tmp_path)
    locked = pack_digest(pack)
    (pack / SUMS_FILE).unlink()
    assert pack_digest(pack) == locked
    result = runner.invoke(app, ["pack", "lock", str(pack)])
    assert result.exit_code == 0, result.output
    assert pack_digest(pack) == locked
    assert (pack / SUMS_FILE).read_bytes() == (BUNDLED_DIR / "mirage-core" / SUMS_FILE).read_bytes()


def test_validate_refuses_a_flipped_byte_in_a_derived_file(tmp_path: Path) -> None:
    pack = _locked_copy(tmp_path)
    _flip_byte(pack / DERIVED)
    result = runner.invoke(app, ["pack", "validate", str(pack)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "UnicodeDecodeError" not in result.output
    lines = [line for line in result.output.splitlines() if "SHA256SUMS" in line]
    assert lines == [
        f"  - {pack / DERIVED}: does not match SHA256SUMS; restore it from the pack's source, "
        f"or run `mirage pack lock {pack}` if you changed it"
    ]


def test_validate_refuses_a_missing_and_an_unlisted_file(tmp_path: Path) -> None:
    pack = _locked_copy(tmp_path)
    (pack / DERIVED).unlink()
    result = runner.invoke(app, ["pack", "validate", str(pack)])
    assert result.exit_code == 2 and "listed in SHA256SUMS but missing" in result.output
    pack = _locked_copy(tmp_path / "second")
    (pack / "derived" / "extra.md").write_text("planted later\n")
    result = runner.invoke(app, ["pack", "validate", str(pack)])
    assert result.exit_code == 2 and "extra.md: is not listed in SHA256SUMS" in result.output


def test_run_refuses_a_pack_file_that_does_not_match(tmp_path: Path) -> None:
    pack = _locked_copy(tmp_path)
    _flip_byte(pack / DERIVED)
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["run", "--pack", str(pack), "--trunk-model", "scripted", "--out", str(out)]
    )
    assert_one_line_error(
        result, f"error: {pack / DERIVED}: does not match SHA256SUMS", exit_code=2
    )
    assert not out.exists()


def test_lock_then_validate_accepts_an_intended_change(tmp_path: Path) -> None:
    pack = _locked_copy(tmp_path)
    path = pack / "derived" / "chart_1121ed9b.summary.md"
    path.write_text(path.read_text(encoding="utf-8") + "\nA note added on purpose.\n")
    assert runner.invoke(app, ["pack", "validate", str(pack)]).exit_code == 2
    assert runner.invoke(app, ["pack", "lock", str(pack)]).exit_code == 0
    result = runner.invoke(app, ["pack", "validate", str(pack)])
    assert result.exit_code == 0, result.output
