"""Issue 38: release files import as they are — refusal options by role, mirage's leakage
heuristics as warnings — while the release's own checks still refuse, naming question and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cue.validate import is_refusal_option
from mirage.cli import app
from tests.cue.release_fixture import _question, release_profile, write_release


def _free_release() -> dict[str, Any]:
    payload = release_profile()
    qas = payload["human-annotated QAs"]
    qas[4]["question"] = _question(
        "Why did the user say they hate cats?",
        ["Allergy", "The history does not say", "Noise", "Fur"],
    )
    qas.append(
        {
            **qas[4],
            "qa_id": "0-Home-1-ref1",
            "point": "refusal_text",
            "question": _question(
                "Which city did the user move to?",
                ["Paris", "Oslo", "There is not enough information to tell", "Rome"],
            ),
            "answer": "C",
        }
    )
    qas[2]["question"] = _question(
        "What does the user often add to the list?",
        ["Bread", "Eggs", "Milk from the corner shop, every week", "Rice"],
    )
    return payload


def _import(tmp_path: Path, payload: dict[str, Any]) -> Any:
    source = write_release(tmp_path / "release", payload)
    return CliRunner().invoke(app, ["cue", "import", str(source), "--out", str(tmp_path / "pack")])


def test_free_refusal_wording_and_long_correct_options_import_with_warnings(
    tmp_path: Path,
) -> None:
    result = _import(tmp_path, _free_release())
    assert result.exit_code == 0, result.output
    assert "imported 6 questions" in result.output
    assert "refusal" in result.output and "explicit" in result.output
    assert "warnings by kind: " in result.output and "length" in result.output
    assert "p0-0-Food-1: length:" in result.output
    assert "(37 characters against at most 5" in result.output
    assert "skipped 1: setting is 'mixed'" in result.output


def _five_options(p: dict[str, Any]) -> None:
    p["human-annotated QAs"][1]["question"] += "\nE. Bella"


def _no_point(p: dict[str, Any]) -> None:
    del p["human-annotated QAs"][1]["point"]


def _letter_e(p: dict[str, Any]) -> None:
    p["human-annotated QAs"][1]["answer"] = "E"


def _two_refusals(p: dict[str, Any]) -> None:
    p["human-annotated QAs"][4]["question"] = _question(
        "Why did the user say they hate cats?", ["Allergy", "历史中没有说明", "Unknown", "Fur"]
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (_five_options, "(qa_id 0-Pets-1).question: needs exactly four options"),
        (_no_point, "(qa_id 0-Pets-1).point: missing"),
        (_letter_e, "(qa_id 0-Pets-1).answer: 'E' is not one of the options"),
    ],
)
def test_release_checks_refuse_naming_question_and_field(
    tmp_path: Path, change: Any, field: str
) -> None:
    payload = release_profile()
    change(payload)
    result = _import(tmp_path, payload)
    assert result.exit_code != 0
    assert field in result.output and "Traceback" not in result.output
    assert not (tmp_path / "pack").exists()


def test_a_second_refusal_option_on_a_refusal_question_is_a_problem(tmp_path: Path) -> None:
    payload = release_profile()
    _two_refusals(payload)
    result = _import(tmp_path, payload)
    assert result.exit_code != 0
    assert "p0-0-Home-1-adv1: options: a refusal question needs exactly one" in result.output
    assert not (tmp_path / "pack").exists()


@pytest.mark.parametrize(
    "text",
    [
        "The history does not say",
        "Not enough information",
        "Insufficient evidence",
        "Unknown",
        "It cannot be determined",
        "Not mentioned",
        "无法确定",
        "没有提到",
        "历史中没有说明",
        "信息不足",
    ],
)
def test_refusal_wordings(text: str) -> None:
    assert is_refusal_option(text)


@pytest.mark.parametrize("text", ["A skateboard", "Known for jazz", "Notebook", "A say in it"])
def test_ordinary_options_are_not_refusals(text: str) -> None:
    assert not is_refusal_option(text)
