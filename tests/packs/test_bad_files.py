"""Bad pack files fail with one line naming the file and what is wrong, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.kit.packfiles import PackFormatError
from harness.mirage.packs import load_pack
from harness.mirage.packs.pack import BUNDLED_DIR
from harness.mirage.packs.validate import validate_pack
from mirage.cli import app
from tests.cli_errors import assert_one_line_error
from tests.packs import UNLOCKED

runner = CliRunner()


def _copy_core(tmp_path: Path) -> Path:
    target = tmp_path / "core"
    shutil.copytree(BUNDLED_DIR / "mirage-core", target, ignore=UNLOCKED)  # edited below
    return target


@pytest.mark.parametrize("name", ["pack.yaml", "questions.yaml", "filler.yaml"])
def test_non_utf8_pack_files_are_one_problem_naming_the_file(tmp_path: Path, name: str) -> None:
    pack_dir = _copy_core(tmp_path)
    with (pack_dir / name).open("ab") as handle:
        handle.write(b"\n# caf\xe9\n")
    problems = validate_pack(pack_dir)
    assert problems == [
        f"{pack_dir / name}: not UTF-8 text (byte 0xe9 at offset {_offset(pack_dir / name)})"
    ]
    result = runner.invoke(app, ["pack", "validate", str(pack_dir)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{pack_dir / name}: not UTF-8 text" in result.output


def _offset(path: Path) -> int:
    return path.read_bytes().index(b"\xe9")


def test_run_with_a_non_utf8_pack_is_a_one_line_error(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)
    with (pack_dir / "pack.yaml").open("ab") as handle:
        handle.write(b"\n# \xff\n")
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["run", "--pack", str(pack_dir), "--trunk-model", "scripted", "--out", str(out)]
    )
    assert_one_line_error(result, f"error: {pack_dir / 'pack.yaml'}: not UTF-8 text", exit_code=2)
    assert not out.exists()


def test_bank_entries_that_are_not_objects_name_their_index(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)
    bank = yaml.safe_load((pack_dir / "questions.yaml").read_text(encoding="utf-8"))
    bank["questions"][3] = "just a string"
    (pack_dir / "questions.yaml").write_text(yaml.safe_dump(bank), encoding="utf-8")
    filler = yaml.safe_load((pack_dir / "filler.yaml").read_text(encoding="utf-8"))
    filler["tasks"][0] = 7
    (pack_dir / "filler.yaml").write_text(yaml.safe_dump(filler), encoding="utf-8")
    with pytest.raises(PackFormatError, match=r"questions\.3: Input should be a valid dictionary"):
        load_pack(pack_dir)
    bank["questions"][3] = bank["questions"][2]
    (pack_dir / "questions.yaml").write_text(yaml.safe_dump(bank), encoding="utf-8")
    with pytest.raises(PackFormatError, match=r"filler\.yaml[\s\S]*tasks\.0: Input should be"):
        load_pack(pack_dir)


def _import(bank: Path, artifacts: Path, out: Path) -> object:
    return runner.invoke(
        app, ["pack", "import", str(bank), "--artifacts", str(artifacts), "--out", str(out)]
    )


def test_import_bad_bank_entries_and_encoding_are_one_line_each(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    (evidence / "chart_a.png").write_bytes(b"png")
    bank = tmp_path / "bank.json"
    bank.write_text(json.dumps({"base_questions": [7, ["q"]]}))
    result = _import(bank, evidence, tmp_path / "p")
    assert_one_line_error(result, f"{bank}: base_questions.0: expected an object, got a number")
    assert_one_line_error(result, f"{bank}: base_questions.1: expected an object, got a list")

    bank.write_bytes(b'{"base_questions": [{"id": "caf\xe9"}]}')
    result = _import(bank, evidence, tmp_path / "p")
    assert_one_line_error(result, f"error: {bank}: not UTF-8 text (byte 0xe9 at offset 31)")

    (evidence / "MANIFEST.yaml").write_text("artifacts: [3, {id: x}]\n")
    bank.write_text(
        json.dumps(
            {
                "base_questions": [
                    {"id": "q", "question": "Q?", "gold_answerable": "NO", "artifact": "x"}
                ]
            }
        )
    )
    result = _import(bank, evidence, tmp_path / "p")
    assert_one_line_error(result, "MANIFEST.yaml: artifacts.0: expected an object with an id")
    assert not (tmp_path / "p").exists()


def test_import_with_a_missing_artifacts_folder_is_one_line(tmp_path: Path) -> None:
    bank = tmp_path / "bank.json"
    bank.write_text(
        json.dumps(
            {
                "base_questions": [
                    {"id": "q", "question": "Q?", "gold_answerable": "NO", "artifact": "x"}
                ]
            }
        )
    )
    missing = tmp_path / "no-such-folder"
    result = _import(bank, missing, tmp_path / "p")
    assert_one_line_error(result, f"error: {missing}: no such folder", exit_code=2)
    assert not (tmp_path / "p").exists()
