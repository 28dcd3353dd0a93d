"""The bundled CUE pack: byte-identical rebuild, exact captions, recurrence, and validation that
proves support and catches leaks."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cue.build import build_cue_pack
from harness.cue.pack import BUNDLED_DIR, DEFAULT_PACK, load_cue_pack
from harness.cue.schema import Setting
from harness.cue.validate import validate_cue_pack
from harness.kit.packfiles import PackFormatError


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_rebuild_is_byte_identical(tmp_path: Path) -> None:
    built = _files(build_cue_pack(DEFAULT_PACK, tmp_path))
    committed = _files(BUNDLED_DIR / DEFAULT_PACK)
    assert sorted(built) == sorted(committed)
    assert [path for path in built if built[path] != committed[path]] == []


def test_bundled_pack_validates_and_covers_every_stratum() -> None:
    pack = load_cue_pack(DEFAULT_PACK)
    report = validate_cue_pack(pack)
    assert report.problems == [] and report.warnings == []
    strata = {(q.profile, q.task, q.setting) for q in pack.questions}
    assert len(strata) == len(pack.histories) * 8  # 4 tasks x 2 settings per profile


def test_implicit_cues_recur_and_only_the_detailed_caption_shows_a_peripheral_object() -> None:
    pack = load_cue_pack(DEFAULT_PACK)
    question = next(q for q in pack.questions if q.id == "p1-ER-I1")  # the teal bicycle
    assert question.setting is Setting.implicit and len(set(pack.clue_rounds(question))) >= 3
    images = {m.id: m for s in pack.histories["p1"].sessions for r in s.rounds for m in r.images}
    for clue in question.clues:
        captions = images[clue].captions
        assert "teal bicycle" in captions["detailed"]
        assert "teal bicycle" not in captions["brief"] + captions["medium"]
        assert (pack.root / images[clue].file).is_file()


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "pack"
    shutil.copytree(BUNDLED_DIR / DEFAULT_PACK, target)
    return target


def _edit(path: Path, change: Callable[[Any], None]) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _question(data: Any, qid: str) -> Any:
    return next(q for q in data["questions"] if q["id"] == qid)


def _round(data: Any, round_id: str) -> Any:
    return next(r for s in data["sessions"] for r in s["rounds"] if r["round"] == round_id)


def _first_text_round(data: Any) -> Any:
    return next(
        r for s in data["sessions"] for r in s["rounds"] if "user" in r and "images" not in r
    )


MUTATIONS: list[tuple[str, str, Callable[[Any], None], str]] = [
    (
        "questions.yaml",
        "p1-ER-E1",
        lambda d: _question(d, "p1-ER-E1").update(question="Is Biscuit the dog's name?"),
        "the stem contains the answer terms",
    ),
    (
        "questions.yaml",
        "p1-ER-I1",
        lambda d: _question(d, "p1-ER-I1")["clues"].pop(),
        "implicit evidence must recur in 3 sessions",
    ),
    (
        "profiles/p1.yaml",
        "p1-ER-I1",
        lambda d: _first_text_round(d).update(user="I love my teal bicycle."),
        "implicit terms ['teal bicycle'] are stated",
    ),
    (
        "profiles/p1.yaml",
        "p1-ER-E2",
        lambda d: _first_text_round(d).update(user="Flying to Lisbon in May."),
        "absent term 'Lisbon' occurs",
    ),
    (
        "questions.yaml",
        "p1-AR-E1",
        lambda d: _question(d, "p1-AR-E1")["options"].update(
            {
                k: "Three years old"
                for k, v in _question(d, "p1-AR-E1")["options"].items()
                if v.startswith("Not stated")
            }
        ),
        "a refusal question needs exactly one refusal option",
    ),
]


@pytest.mark.parametrize(("file", "qid", "change", "problem"), MUTATIONS)
def test_validation_catches(
    tmp_path: Path, file: str, qid: str, change: Callable[[Any], None], problem: str
) -> None:
    root = _copy(tmp_path)
    _edit(root / file, change)
    problems = validate_cue_pack(load_cue_pack(root)).problems
    assert any(p.startswith(f"{qid}: ") and problem in p for p in problems), problems


def test_an_unknown_clue_id_fails_loading(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root / "questions.yaml", lambda d: _question(d, "p2-LP-E1")["clues"].append("D42:07"))
    with pytest.raises(
        PackFormatError, match=r"questions\.\d+ \(id p2-LP-E1\)\.clues: \['D42:07'\]"
    ):
        load_cue_pack(root)


def test_a_missing_caption_level_fails_loading(tmp_path: Path) -> None:
    root = _copy(tmp_path)

    def drop(data: Any) -> None:
        image = next(r for s in data["sessions"] for r in s["rounds"] if "images" in r)["images"][0]
        del image["captions"]["medium"]

    _edit(root / "profiles" / "p2.yaml", drop)
    with pytest.raises(
        PackFormatError, match=r"(?s)p2\.yaml.*no caption at level\(s\) \[.medium.\]"
    ):
        load_cue_pack(root)
