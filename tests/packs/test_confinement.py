"""Every path a pack names stays inside the pack folder: validation refuses escapes (``..``,
absolute paths, symlinks out of the folder) naming file, field and record, and reads and writes
check again at the moment they happen."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.kit.packfiles import PackFormatError
from harness.mirage.packs import load_pack
from harness.mirage.packs.importer import import_bank
from harness.mirage.packs.pack import BUNDLED_DIR
from harness.mirage.packs.schema import PackPathError
from harness.mirage.packs.validate import validate_pack
from mirage.cli import app
from tests.cli_errors import assert_one_line_error
from tests.packs import UNLOCKED

runner = CliRunner()
CHART = "chart_17eee3bd"


def _copy_core(tmp_path: Path) -> Path:
    target = tmp_path / "packs" / "core"
    shutil.copytree(BUNDLED_DIR / "mirage-core", target, ignore=UNLOCKED)  # edited below
    return target


def _edit_pack(pack_dir: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = pack_dir / "pack.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _add_derived(path: str) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["artifacts"][0]["derived"].append({"path": path, "kind": "text"})


ESCAPES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("derived", _add_derived("../escaped.txt"), f"artifacts.0.derived.3.path (id {CHART})"),
    ("questions", lambda d: d.update(questions="../q.yaml"), "questions:"),
    ("filler", lambda d: d.update(filler="/etc/passwd"), "filler:"),
    (
        "original",
        lambda d: d["artifacts"][1]["originals"].append("artifacts/../../x.png"),
        "artifacts.1.originals.1 (id chart_25b06cc1)",
    ),
    ("data", lambda d: d["artifacts"][0].update(data="../data.json"), "artifacts.0.data"),
    (
        "attachment",
        lambda d: d["planting"][1]["attachments"][0].update(file="../../outside.png"),
        "planting.1.attachments.0.file",
    ),
    (
        "workspace write",
        lambda d: d["planting"][0]["workspace_writes"].append("../../../tmp/w.txt"),
        "planting.0.workspace_writes.",
    ),
]


@pytest.mark.parametrize(("field", "edit", "where"), ESCAPES, ids=[e[0] for e in ESCAPES])
def test_validation_refuses_an_escape_naming_file_and_field(
    tmp_path: Path, field: str, edit: Callable[[dict[str, Any]], None], where: str
) -> None:
    pack_dir = _copy_core(tmp_path)
    _edit_pack(pack_dir, edit)
    problems = validate_pack(pack_dir)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{pack_dir / 'pack.yaml'}: {where}")
    assert "leaves the pack folder" in problems[0] or "is absolute" in problems[0]
    with pytest.raises(PackFormatError):
        load_pack(pack_dir)


def test_a_symlink_out_of_the_pack_is_refused_one_inside_is_fine(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of any pack")
    summary = pack_dir / "derived" / f"{CHART}.summary.md"
    summary.unlink()
    summary.symlink_to(secret)
    problems = validate_pack(pack_dir)  # the derived file and the text_representation
    assert any(f"artifacts.0.derived.1.path (id {CHART})" in p for p in problems), problems
    assert all("outside" in p and "symlink" in p for p in problems), problems

    summary.unlink()
    (pack_dir / "summary-elsewhere.md").write_text("# Apple harvest\n")
    summary.symlink_to(pack_dir / "summary-elsewhere.md")
    load_pack(pack_dir)


def test_a_symlinked_directory_out_of_the_pack_is_refused(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)
    outside = tmp_path / "outside-derived"
    shutil.move(pack_dir / "derived", outside)
    (pack_dir / "derived").symlink_to(outside, target_is_directory=True)
    problems = validate_pack(pack_dir)
    assert problems and all("outside" in p for p in problems)


def test_cli_validate_and_run_refuse_the_escaping_pack_before_touching_disk(
    tmp_path: Path,
) -> None:
    pack_dir = _copy_core(tmp_path)
    _edit_pack(pack_dir, _add_derived("../escaped.txt"))
    (pack_dir.parent / "escaped.txt").write_text("outside the pack")
    result = runner.invoke(app, ["pack", "validate", str(pack_dir)])
    assert result.exit_code == 2
    assert "artifacts.0.derived.3.path" in result.output and "leaves the pack" in result.output

    out = tmp_path / "runs" / "r"
    result = runner.invoke(
        app, ["run", "--pack", str(pack_dir), "--trunk-model", "scripted", "--out", str(out)]
    )
    assert_one_line_error(result, "error:", str(pack_dir / "pack.yaml"), "leaves the pack folder")
    assert not out.exists()
    assert not (tmp_path / "runs" / "escaped.txt").exists()


def test_reads_and_writes_check_again_when_they_happen(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)
    pack = load_pack(pack_dir)
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of any pack")
    table = pack_dir / "derived" / f"{CHART}.table.csv"
    table.unlink()
    table.symlink_to(secret)  # swapped in after the pack was loaded and validated
    workspace = tmp_path / "ws"
    with pytest.raises(PackPathError, match="outside"):
        pack.materialize_workspace(workspace)
    assert not (workspace / "derived" / f"{CHART}.table.csv").exists()

    fresh = load_pack(BUNDLED_DIR / "mirage-core")
    target = tmp_path / "ws2"
    (target / "derived").parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (target / "derived").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(PackPathError, match="outside"):
        fresh.materialize_workspace(target)
    assert list(elsewhere.iterdir()) == []


def test_import_refuses_manifest_paths_and_symlinks_out_of_the_artifacts_folder(
    tmp_path: Path,
) -> None:
    bank = tmp_path / "bank.json"
    bank.write_text(
        '{"base_questions": [{"id": "q1", "question": "Which?", "gold_answerable": "NO",'
        ' "gold_source": "NONE", "gold_answer": null, "artifact": "chart_a"}]}'
    )
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    (evidence / "chart_a.png").write_bytes(b"png")
    (evidence / "MANIFEST.yaml").write_text(
        yaml.safe_dump({"artifacts": [{"id": "chart_a", "files": ["chart_a.png", "../../x.md"]}]})
    )
    out = tmp_path / "out" / "p"
    with pytest.raises(PackFormatError) as caught:
        import_bank(bank, evidence, out, "p")
    line = caught.value.lines()[0]
    assert line.startswith(f"{evidence / 'MANIFEST.yaml'}: artifacts.0 (id chart_a)")
    assert "leaves the pack folder" in line

    (evidence / "MANIFEST.yaml").unlink()
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    (evidence / "chart_b.txt").symlink_to(secret)
    with pytest.raises(PackFormatError, match=r"chart_b\.txt: originals\.0: .*outside"):
        import_bank(bank, evidence, out, "p")
    assert not (out / "chart_b.txt").exists()


def test_the_pack_digest_never_reads_through_a_symlink_out_of_the_pack(tmp_path: Path) -> None:
    from harness.kit.rundir import pack_digest

    pack_dir = _copy_core(tmp_path)
    before = pack_digest(pack_dir)
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    (pack_dir / "notes.txt").symlink_to(secret)
    assert pack_digest(pack_dir) == before
    (pack_dir / "notes-inside.txt").write_text("part of the pack")
    assert pack_digest(pack_dir) != before
