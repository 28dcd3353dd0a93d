"""``mirage cue import``: the release format in, a CUE pack out; every bad input named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.cue.importer import import_release
from harness.cue.pack import load_cue_pack
from harness.cue.schema import Setting, Task
from harness.cue.validate import validate_cue_pack
from harness.kit.packfiles import PackFormatError
from mirage.cli import app
from tests.cue.release_fixture import CANARY, INSTRUCTION, mutated, release_profile, write_release


def test_import_maps_points_settings_options_and_skips_with_reasons(tmp_path: Path) -> None:
    source = write_release(tmp_path / "release")
    result = import_release(source, tmp_path / "pack", "lin")
    pack = load_cue_pack(result.path)
    by_source = {q.source.qa_id: q for q in pack.questions if q.source}
    assert (result.profiles, result.questions, result.skipped) == (1, 5, 1)
    assert (by_source["0-Items-1"].task, by_source["0-Items-1"].setting) == (
        Task.entity_recall,
        Setting.implicit,
    )
    assert by_source["0-Pets-1"].setting is Setting.explicit  # Pets entities are explicit
    assert by_source["0-Food-1"].task is Task.long_pattern
    assert by_source["0-Home-1"].task is Task.recommendation
    assert (by_source["0-Home-1-adv1"].task, by_source["0-Home-1-adv1"].setting) == (
        Task.refusal,
        Setting.explicit,
    )
    assert by_source["0-Items-1"].options == {
        "A": "Cactus",
        "B": "Fern",
        "C": "Orchid",
        "D": "Bonsai",
    }
    assert INSTRUCTION not in by_source["0-Items-1"].question
    skipped = yaml.safe_load((result.path / "skipped.yaml").read_text())["skipped"]
    assert "mixed" in skipped[0]["reason"] and "0-Items-2" in skipped[0]["record"]
    assert pack.spec.image_levels == ("detailed",) and pack.spec.audio_levels == ("split",)
    assert validate_cue_pack(pack).problems == []


def test_answer_stating_fields_never_reach_the_pack(tmp_path: Path) -> None:
    result = import_release(write_release(tmp_path / "release"), tmp_path / "pack")
    written = [p.read_text(encoding="utf-8") for p in result.path.rglob("*") if p.is_file()]
    assert written and not any(CANARY in text for text in written)


def test_caption_level_folders_merge_into_one_pack(tmp_path: Path) -> None:
    write_release(tmp_path / "release" / "brief", release_profile(image_caption="A desk."))
    write_release(tmp_path / "release" / "detailed")
    write_release(tmp_path / "release" / "asr", release_profile(voice_caption="Buy milk."))
    pack = load_cue_pack(import_release(tmp_path / "release", tmp_path / "pack").path)
    image = pack.histories["p0"].sessions[0].rounds[1].images[0]
    voice = pack.histories["p0"].sessions[0].rounds[2].voices[0]
    assert image.captions == {
        "brief": "A desk.",
        "detailed": "A desk with a laptop; a small cactus at the edge.",
    }
    assert voice.captions["asr"] == "Buy milk."
    assert pack.spec.image_levels == ("brief", "detailed")
    assert pack.spec.audio_levels == ("asr", "split")


def _drop_answer(p: dict[str, Any]) -> None:
    del p["human-annotated QAs"][1]["answer"]


def _unknown_point(p: dict[str, Any]) -> None:
    p["human-annotated QAs"][1]["point"] = "audio_context"


def _letter_outside(p: dict[str, Any]) -> None:
    p["human-annotated QAs"][1]["answer"] = "E"


def _unknown_clue(p: dict[str, Any]) -> None:
    p["human-annotated QAs"][1]["clue"] = ["D00:00", "D09:99"]


def _three_options(p: dict[str, Any]) -> None:
    p["human-annotated QAs"][1]["question"] = "What is the cat called?\nA. Tom\nB. Mimi\nC. Luna"


BAD_QAS: list[tuple[Callable[[dict[str, Any]], None], str]] = [
    (_drop_answer, "human-annotated QAs.1 (qa_id 0-Pets-1).answer: missing"),
    (_unknown_point, "human-annotated QAs.1 (qa_id 0-Pets-1).point: unknown point 'audio_context'"),
    (
        _letter_outside,
        "human-annotated QAs.1 (qa_id 0-Pets-1).answer: 'E' is not one of the options",
    ),
    (_unknown_clue, "human-annotated QAs.1 (qa_id 0-Pets-1).clue: ['D09:99'] name no round"),
    (_three_options, "human-annotated QAs.1 (qa_id 0-Pets-1).question: needs a stem and the four"),
]


@pytest.mark.parametrize(("change", "message"), BAD_QAS)
def test_bad_qa_is_a_clear_error_and_writes_nothing(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], message: str
) -> None:
    source = write_release(tmp_path / "release", mutated(change))
    with pytest.raises(PackFormatError) as raised:
        import_release(source, tmp_path / "pack")
    assert str(source) in str(raised.value) and message in str(raised.value)
    assert not (tmp_path / "pack").exists()


@pytest.mark.parametrize(("change", "message"), BAD_QAS)
def test_skip_invalid_records_the_reason(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], message: str
) -> None:
    source = write_release(tmp_path / "release", mutated(change))
    result = import_release(source, tmp_path / "pack", skip_invalid=True)
    skipped = yaml.safe_load((result.path / "skipped.yaml").read_text())["skipped"]
    reasons = [f"{s['record']}.{s['reason']}" for s in skipped]
    assert any(reason.startswith(message) for reason in reasons)


def _no_sessions(p: dict[str, Any]) -> None:
    del p["multi_session_dialogues"]


def _session_without_date(p: dict[str, Any]) -> None:
    del p["multi_session_dialogues"][1]["date"]


def _caption_without_id(p: dict[str, Any]) -> None:
    p["multi_session_dialogues"][0]["dialogues"][1]["image_id"] = []


BAD_HISTORIES = [
    (_no_sessions, "multi_session_dialogues: Field required"),
    (_session_without_date, "multi_session_dialogues.1.date: Field required"),
    (_caption_without_id, "multi_session_dialogues.0.dialogues.1: image_id has 0 entries"),
]


@pytest.mark.parametrize(("change", "message"), BAD_HISTORIES)
def test_bad_history_names_the_field(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], message: str
) -> None:
    source = write_release(tmp_path / "release", mutated(change))
    with pytest.raises(PackFormatError, match=r"history_with_qa_p0\.json") as raised:
        import_release(source, tmp_path / "pack")
    assert message in str(raised.value)


def test_cli_import_exits_non_zero_with_the_problem(tmp_path: Path) -> None:
    source = write_release(tmp_path / "release", mutated(_letter_outside))
    result = CliRunner().invoke(
        app, ["cue", "import", str(source), "--out", str(tmp_path / "pack")]
    )
    assert result.exit_code == 2
    assert "qa_id 0-Pets-1" in result.output and "answer" in result.output
    assert "Traceback" not in result.output


def test_cli_import_of_a_good_release(tmp_path: Path) -> None:
    source = write_release(tmp_path / "release")
    result = CliRunner().invoke(
        app, ["cue", "import", str(source), "--out", str(tmp_path / "pack")]
    )
    assert result.exit_code == 0, result.output
    assert "imported 5 questions of 1 profile(s)" in result.output


def test_import_refuses_to_overwrite_a_folder_that_is_not_a_pack(tmp_path: Path) -> None:
    (tmp_path / "pack").mkdir()
    (tmp_path / "pack" / "notes.txt").write_text("mine")
    with pytest.raises(PackFormatError, match="not a CUE pack"):
        import_release(write_release(tmp_path / "release"), tmp_path / "pack")
    assert (tmp_path / "pack" / "notes.txt").read_text() == "mine"


def _import_with_clue(tmp_path: Path, clue: list[str], change: Any = None) -> Any:
    def edit(p: dict[str, Any]) -> None:
        p["human-annotated QAs"][1]["clue"] = clue
        if change is not None:
            change(p)

    source = write_release(tmp_path / "release", mutated(edit))
    pack = load_cue_pack(import_release(source, tmp_path / "pack").path)
    return next(q for q in pack.questions if q.source and q.source.qa_id == "0-Pets-1")


# The fixture's round D00:01 has image D00-001 at ../image/D00/D00-001.png, round D01:02 voice
# D01-V01 at ../voice/D01/D01-V01.wav.
CLUE_FORMS = [
    ("D00-001.png", "D00-001"),  # an image id with its file extension (issue 28)
    ("D00-001.PNG", "D00-001"),  # the extension in any case
    ("D00-001.jpg", "D00-001"),  # any image extension
    ("D01-V01.wav", "D01-V01"),  # a voice id with an audio extension
    ("D01-V01.MP3", "D01-V01"),
    ("../image/D00/D00-001.png", "D00-001"),  # input_image as written
    ("image/D00/D00-001.png", "D00-001"),  # a trailing part of it
    ("D00/D00-001.png", "D00-001"),
    ("..\\image\\D00\\D00-001.png", "D00-001"),  # backslashes read as /
    ("./../image/D00/./D00-001.png", "D00-001"),  # . collapsed
    ("../voice/D01/D01-V01.wav", "D01-V01"),  # input_voice_message as written
    ("D01/D01-V01.WAV", "D01-V01"),
]


@pytest.mark.parametrize(("clue", "resolved"), CLUE_FORMS)
def test_a_clue_naming_a_media_file_resolves_to_its_id(
    tmp_path: Path, clue: str, resolved: str
) -> None:
    question = _import_with_clue(tmp_path, ["D00:00", clue])
    assert question.clues == ("D00:00", resolved)


def test_a_clue_by_a_file_name_that_is_not_the_id(tmp_path: Path) -> None:
    def rename(p: dict[str, Any]) -> None:
        p["multi_session_dialogues"][2]["dialogues"][1]["input_image"] = ["photos/desk.JPG"]

    question = _import_with_clue(tmp_path, ["desk.jpg", "photos/desk.JPG"], rename)
    assert question.clues == ("D02-001",)  # both forms name one image; stored once, by id


NAMES_NOTHING = [
    "d00-001.png",  # ids are compared as written (only the extension's case is free)
    "D00-001.wav",  # an image id with an audio extension
    "D00-001.txt",  # not a media extension
    "D00:01.png",  # a round has no file
    "other/D00-001.png",  # a path whose folders are not the file's
    "00/D00-001.png",  # a trailing part must start at a /
    "../image/D00/D00-002.png",
]


@pytest.mark.parametrize("clue", NAMES_NOTHING)
def test_a_clue_that_names_no_file_stays_a_clear_error(tmp_path: Path, clue: str) -> None:
    source = write_release(
        tmp_path / "release", mutated(lambda p: p["human-annotated QAs"][1].update(clue=[clue]))
    )
    with pytest.raises(PackFormatError) as raised:
        import_release(source, tmp_path / "pack")
    assert f"(qa_id 0-Pets-1).clue: [{clue!r}] name no round, image or voice message" in str(
        raised.value
    )
    assert not (tmp_path / "pack").exists()


def _same_file_name(p: dict[str, Any]) -> None:
    for index in (0, 1):
        session = p["multi_session_dialogues"][index]
        session["dialogues"][1]["input_image"] = [f"../image/{session['session_id']}/desk.png"]


def test_a_clue_that_fits_two_rounds_files_is_an_error_naming_both(tmp_path: Path) -> None:
    def change(p: dict[str, Any]) -> None:
        _same_file_name(p)
        p["human-annotated QAs"][1]["clue"] = ["desk.png"]

    source = write_release(tmp_path / "release", mutated(change))
    with pytest.raises(PackFormatError) as raised:
        import_release(source, tmp_path / "pack")
    message = str(raised.value)
    assert "(qa_id 0-Pets-1).clue: 'desk.png' fits more than one file" in message
    assert "image D00-001 of round D00:01 (../image/D00/desk.png)" in message
    assert "image D01-001 of round D01:01 (../image/D01/desk.png)" in message
    skipped = import_release(source, tmp_path / "pack", skip_invalid=True)
    assert skipped.skipped == 2  # the mixed item and this one
    assert _import_with_clue(tmp_path / "b", ["D01/desk.png"], _same_file_name).clues == (
        "D01-001",
    )  # a longer part of the path tells them apart
