"""Importing a reference-format question bank, and the `mirage pack` commands."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.kit.packfiles import PackFormatError
from harness.mirage.packs import load_pack
from harness.mirage.packs.importer import import_bank
from harness.mirage.packs.pack import BUNDLED_DIR
from mirage.cli import app
from tests.packs import UNLOCKED

runner = CliRunner()


def _reference_bank(tmp_path: Path) -> tuple[Path, Path]:
    """A small bank in the reference format over two artifacts copied from mirage-core."""
    core = load_pack("mirage-core")
    chart, view = core.spec.artifacts[0], core.spec.artifacts[4]
    artifacts_dir = tmp_path / "evidence"
    for artifact, name in ((chart, "chart_rent"), (view, "ui_profile")):
        (artifacts_dir / "derived").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(core.root / artifact.originals[0], artifacts_dir / f"{name}.png")
        summary = next(d.path for d in artifact.derived if d.kind.value == "summary")
        shutil.copyfile(core.root / summary, artifacts_dir / "derived" / f"{name}.summary.md")
    bank = {
        "base_questions": [
            {
                "question_id": "b1",
                "question": "What was Elmbrook's harvest in 2019?",
                "gold_answerable": True,
                "gold_source": "artifacts/chart_rent.png",
                "gold_answer": 47.3,
                "answer_type": "number",
                "difficulty": "lookup",
                "query_type": "point_lookup",
                "shortcut_risk": "template",
                "pair_id": "p1",
            },
            {
                "question_id": "b2",
                "question": "What was Elmbrook's harvest in 2014?",
                "gold_answerable": False,
                "gold_source": "NONE",
                "gold_answer": None,
                "answer_type": "number",
                "difficulty": "lookup",
                "pair_id": "p1",
            },
            {
                "id": "b3",
                "question": "Which username is on the profile?",
                "gold_answerable": "YES",
                "gold_source": "derived/ui_profile.summary.md",
                "gold_answer": "@trailrunner_maya",
                "answer_type": "string",
                "difficulty": "layout-sensitive",
                "shortcut_risk": ["lexical cue"],
            },
        ]
    }
    bank_path = tmp_path / "bank.json"
    bank_path.write_text(json.dumps(bank), encoding="utf-8")
    return bank_path, artifacts_dir


def test_import_reference_bank_builds_a_valid_pack(tmp_path: Path) -> None:
    bank_path, artifacts_dir = _reference_bank(tmp_path)
    result = runner.invoke(
        app,
        [
            "pack",
            "import",
            str(bank_path),
            "--artifacts",
            str(artifacts_dir),
            "--out",
            str(tmp_path / "p"),
        ],
    )
    assert result.exit_code == 0, result.output
    pack = load_pack(tmp_path / "p")
    assert sorted(pack.artifacts) == ["chart_rent", "ui_profile"]
    first, twin, third = pack.questions
    assert (first.gold_source, first.gold_answer, first.answer_type.value) == (
        "chart_rent",
        "47.3",
        "numeric",
    )
    assert twin.artifact == "chart_rent" and twin.gold_answer == "NONE"
    assert third.difficulty.value == "layout" and third.shortcut_risk[0].value == "lexical_cue"
    turn = pack.planting_turns()[0]
    assert turn.attachments[0].text_representation.startswith("# Apple harvest")
    assert (tmp_path / "p" / "derived" / "ui_profile.summary.md").is_file()


def test_import_reports_entries_it_cannot_map(tmp_path: Path) -> None:
    bank_path, artifacts_dir = _reference_bank(tmp_path)
    bank = json.loads(bank_path.read_text())
    bank["base_questions"][2]["gold_answer"] = None
    bank_path.write_text(json.dumps(bank))
    with pytest.raises(PackFormatError, match=r"base_questions\.2 \(id b3\)"):
        import_bank(bank_path, artifacts_dir, tmp_path / "p", "x")
    bank_path.write_text(json.dumps({"questions": []}))
    with pytest.raises(PackFormatError, match="base_questions"):
        import_bank(bank_path, artifacts_dir, tmp_path / "p", "x")


def test_import_rejects_questions_about_missing_artifacts(tmp_path: Path) -> None:
    bank_path, artifacts_dir = _reference_bank(tmp_path)
    (artifacts_dir / "ui_profile.png").unlink()
    with pytest.raises(PackFormatError, match=r"not found.*ui_profile"):
        import_bank(bank_path, artifacts_dir, tmp_path / "p", "x")


def test_cli_validate_ok_and_failing(tmp_path: Path) -> None:
    result = runner.invoke(app, ["pack", "validate", "mirage-core"])
    assert result.exit_code == 0 and "ok" in result.output
    broken = tmp_path / "broken"
    shutil.copytree(BUNDLED_DIR / "mirage-ext", broken, ignore=UNLOCKED)
    first_original = next((broken / "artifacts").iterdir())
    first_original.unlink()
    result = runner.invoke(app, ["pack", "validate", str(broken)])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_cli_build_writes_requested_pack(tmp_path: Path) -> None:
    result = runner.invoke(app, ["pack", "build", "--out", str(tmp_path), "--name", "mirage-ext"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "mirage-ext" / "pack.yaml").is_file()
    assert not (tmp_path / "mirage-core").exists()
