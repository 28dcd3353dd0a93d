"""Schema errors name the file, the field and the record; bad packs are reported, not loaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from harness.kit.packfiles import PackFormatError
from harness.mirage.packs import load_pack
from harness.mirage.packs.pack import BUNDLED_DIR
from harness.mirage.packs.schema import NONE, Question
from harness.mirage.packs.validate import validate_pack
from tests.packs import UNLOCKED


def _copy_core(tmp_path: Path) -> Path:
    target = tmp_path / "core"
    shutil.copytree(BUNDLED_DIR / "mirage-core", target, ignore=UNLOCKED)  # edited below
    return target


def _edit_yaml(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def test_bad_modality_names_file_field_and_artifact(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)
    _edit_yaml(pack_dir / "pack.yaml", lambda d: d["artifacts"][1].update(modality="hologram"))
    with pytest.raises(PackFormatError) as caught:
        load_pack(pack_dir)
    message = str(caught.value)
    assert str(pack_dir / "pack.yaml") in message
    assert "artifacts.1.modality" in message
    assert "chart_" in message  # the id of the offending artifact


def test_answerable_question_without_source_is_rejected_with_its_id(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)

    def drop_source(bank: dict) -> None:  # type: ignore[type-arg]
        bank["questions"][4]["gold_source"] = NONE

    _edit_yaml(pack_dir / "questions.yaml", drop_source)
    problems = validate_pack(pack_dir)
    assert len(problems) == 1
    assert "questions.4" in problems[0] and "orchard_harvest-03-a" in problems[0]
    assert "needs a gold_source and a gold_answer" in problems[0]


def test_unknown_field_and_missing_file_are_reported(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)
    _edit_yaml(pack_dir / "pack.yaml", lambda d: d.update(colour="blue"))
    problems = validate_pack(pack_dir)
    assert any("colour: Extra inputs are not permitted" in p for p in problems)
    (pack_dir / "missing").mkdir()
    assert "no pack here" in validate_pack(pack_dir / "missing")[0]


def test_tampered_gold_is_caught_by_rederivation(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)
    _edit_yaml(pack_dir / "questions.yaml", lambda d: d["questions"][0].update(gold_answer="99.9"))
    problems = validate_pack(pack_dir)
    assert any("orchard_harvest-01-a" in p and "the data gives" in p for p in problems)


def test_unanswerable_with_support_is_caught(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)

    def make_twin_supported(bank: dict) -> None:  # type: ignore[type-arg]
        bank["questions"][1]["derivation"] = bank["questions"][0]["derivation"]

    _edit_yaml(pack_dir / "questions.yaml", make_twin_supported)
    problems = validate_pack(pack_dir)
    assert any("orchard_harvest-01-u" in p and "supports an answer" in p for p in problems)


def test_broken_pairing_and_filler_leak_are_reported(tmp_path: Path) -> None:
    pack_dir = _copy_core(tmp_path)
    pack = load_pack(pack_dir)
    _edit_yaml(pack_dir / "questions.yaml", lambda d: d["questions"][1].update(pair_id="lonely"))
    leaked_id = pack.spec.artifacts[0].id

    def leak(library: dict) -> None:  # type: ignore[type-arg]
        library["tasks"][0]["stages"][0].append(f"Please open {leaked_id} for me.")

    _edit_yaml(pack_dir / "filler.yaml", leak)
    problems = validate_pack(pack_dir)
    assert any("pair lonely" in p for p in problems)
    assert any(f"mentions artifact id {leaked_id}" in p for p in problems)


@pytest.mark.parametrize(
    ("answer_type", "answer", "error"),
    [
        ("numeric", "about ten", "is not a number"),
        ("year", "19", "four-digit year"),
        ("date", "14/05/2024", "ISO date"),
        ("enum", "maybe", "not one of choices"),
    ],
)
def test_gold_answer_must_match_its_type(answer_type: str, answer: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Question(
            id="q1",
            question="?",
            artifact="a",
            gold_answerable="YES",
            gold_source="a",
            gold_answer=answer,
            answer_type=answer_type,
            choices=["yes", "no"],
            difficulty="lookup",
            query_type="x",
        )
