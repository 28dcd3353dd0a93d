"""Content keywords: the token rule, the derivation rule, the bundled packs' keywords, and
validation and import of packs whose keywords are missing or cannot show the content."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.mirage.packs import Pack, load_pack
from harness.mirage.packs.pack import BUNDLED_DIR
from harness.mirage.packs.validate import validate_pack
from harness.mirage.protocol.keywords import derive_keywords, matched, token_set, tokens
from mirage.cli import app
from tests.cli_errors import assert_one_line_error
from tests.packs import UNLOCKED
from tests.packs.test_import_cli import _reference_bank

DOCS = Path(__file__).resolve().parents[2] / "docs" / "packs.md"


def test_tokens_are_numbers_and_words() -> None:
    text = (
        "Port Ellis to Gull Island,34.5,39.5; 1,315 at 22:41 (1:46:05) €36.90 INV-20417 Aldhelm's"
    )
    assert tokens(text) == [
        "Port", "Ellis", "to", "Gull", "Island", "34.5", "39.5", "1,315", "at", "22:41",
        "1:46:05", "36.90", "INV-20417", "Aldhelm", "s",
    ]  # fmt: skip
    assert tokens("derived/chart_17eee3bd.table.csv 2024-02-05 DATUM_OFFSET_M") == [
        "derived", "chart_17eee3bd", "table", "csv", "2024", "02", "05", "DATUM_OFFSET_M",
    ]  # fmt: skip


def test_keywords_match_whole_tokens_in_any_case() -> None:
    keywords = ["41.2", "Elmbrook", "9:41", "2019"]
    assert matched("ELMBROOK's crop was 41.2, at 9:41", keywords) == ["41.2", "Elmbrook", "9:41"]
    assert matched("141.25 at 09:41 in 20190; Elmbrooks", keywords) == []


def test_derivation_prefers_values_and_names_outside_the_boilerplate() -> None:
    text = (
        "# Harvest chart chart_x\n- Series: Elmbrook, Kestrel\nYear,Elmbrook,Kestrel\n"
        "2016,41.2,28.7\n2017,44.8,30.2\nsome plain words here\n"
    )
    excluded = token_set("Here is the harvest chart. Kestrel valley.")
    # 6 numbers for 5 places (44.8 is the one the even spread leaves out), 3 names, no id,
    # nothing excluded, no plain lower-case word
    assert derive_keywords("chart_x", text, excluded) == [
        "Series", "Elmbrook", "Year", "2016", "41.2", "28.7", "2017", "30.2",
    ]  # fmt: skip


def test_derivation_spreads_over_long_tables_and_caps_at_eight() -> None:
    rows = "\n".join(f"Row{i},{100 + i}.5" for i in range(40))
    assert derive_keywords("t_1", rows, set()) == [
        "Row0", "100.5", "109.5", "Row19", "119.5", "129.5", "Row39", "139.5",
    ]  # fmt: skip


def test_plain_words_join_only_when_values_and_names_are_too_few() -> None:
    assert derive_keywords("ss_1", "search the result forum", set()) == [
        "search",
        "result",
        "forum",
    ]
    assert derive_keywords("ss_1", "Search 2019 forum pages", set()) == ["Search", "2019"]
    assert derive_keywords("ss_1", "ss_1 ok", {"ok"}) == []


@pytest.mark.parametrize("name", ["mirage-core", "mirage-ext"])
def test_bundled_keywords_are_the_rule_applied_to_the_pack(name: str) -> None:
    pack = load_pack(name)
    assert {a.id: a.keywords for a in pack.spec.artifacts} == pack.derived_keywords()
    for artifact in pack.spec.artifacts:
        assert 2 <= len(artifact.keywords) <= 8
        text = pack.text_representation(artifact.id)
        assert matched(text, artifact.keywords) == artifact.keywords
        for turn in pack.planting_turns():
            assert matched(f"{turn.text}\n{turn.assistant}", artifact.keywords) == []
        for other in pack.spec.artifacts:
            if other.id != artifact.id:
                assert matched(pack.text_representation(other.id), artifact.keywords) == []


def test_docs_list_the_bundled_keywords() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \(mirage-\w+\) \| (.+) \|$", DOCS.read_text(), re.M))
    for name in ("mirage-core", "mirage-ext"):
        for artifact in load_pack(name).spec.artifacts:
            assert rows[artifact.id] == ", ".join(f"`{k}`" for k in artifact.keywords)


def _edited_core(tmp_path: Path, index: int, keywords: list[str] | None) -> Path:
    target = tmp_path / "core"
    shutil.copytree(BUNDLED_DIR / "mirage-core", target, ignore=UNLOCKED)  # edited below
    spec: dict[str, Any] = yaml.safe_load((target / "pack.yaml").read_text(encoding="utf-8"))
    if keywords is None:
        del spec["artifacts"][index]["keywords"]
    else:
        spec["artifacts"][index]["keywords"] = keywords
    (target / "pack.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return target


def test_an_artifact_without_keywords_is_an_error_naming_it(tmp_path: Path) -> None:
    pack_dir = _edited_core(tmp_path, 1, None)
    problems = validate_pack(pack_dir)
    assert len(problems) == 1
    assert problems[0].startswith("artifact chart_25b06cc1: no keywords; the retrieval path")
    result = CliRunner().invoke(app, ["pack", "validate", str(pack_dir)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "artifact chart_25b06cc1: no keywords" in result.output


@pytest.mark.parametrize(
    ("keyword", "problem"),
    [
        ("47.9", "does not occur in the artifact's text representation"),
        ("chart_17eee3bd", "names the artifact id, which is not content"),
        ("Regional", "also occurs in planting turn 1, so it would match without the content"),
        ("41.2", "also occurs in the text of artifact chart_1121ed9b"),
        ("Values", "also occurs in filler task structured-logging stage 2 variant 1"),
        ("2023", "also occurs in the title, aliases or file names of chart_17eee3bd"),
        ("Elmbrook Kestrel", "is not one token"),
        ("elmbrook", "is listed twice"),
    ],
)
def test_keywords_that_cannot_show_the_content_are_errors(
    tmp_path: Path, keyword: str, problem: str
) -> None:
    problems = validate_pack(_edited_core(tmp_path, 0, ["Elmbrook", keyword]))
    assert len(problems) == 1
    assert problems[0].startswith(f"artifact chart_17eee3bd: keyword {keyword!r} {problem}")


def test_import_derives_keywords_and_warns_per_artifact(tmp_path: Path) -> None:
    bank, artifacts = _reference_bank(tmp_path)
    shutil.copyfile(artifacts / "chart_rent.png", artifacts / "photo_blank.png")  # no text
    out = tmp_path / "p"
    result = CliRunner().invoke(
        app, ["pack", "import", str(bank), "--artifacts", str(artifacts), "--out", str(out)]
    )
    pack = Pack(out)
    derived = pack.derived_keywords()
    assert derived["photo_blank"] == []
    listed = ", ".join(derived["chart_rent"])
    assert (
        f"warning: artifact chart_rent: keywords derived from its text: {listed}" in result.output
    )
    assert (
        "warning: artifact photo_blank: photo_blank.png is not text and no derived text "
        "describes it, so it has no content keywords; add derived/photo_blank.description.md"
    ) in result.output
    assert "artifact photo_blank: no text representation, so no content keywords" in result.output
    assert result.exit_code == 2
    assert {a.id: a.keywords for a in pack.spec.artifacts} == derived


def test_a_run_whose_question_artifact_has_no_keywords_stops_before_the_trunk(
    tmp_path: Path,
) -> None:
    """Never a silent R_none: the run names the artifact and the pack file before any work."""
    target = _edited_core(tmp_path, 0, None)
    spec: dict[str, Any] = yaml.safe_load((target / "pack.yaml").read_text(encoding="utf-8"))
    for artifact in spec["artifacts"]:
        artifact.pop("keywords", None)
    (target / "pack.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    out = tmp_path / "run"
    command = ["run", "--pack", str(target), "--trunk-model", "scripted", "--limit", "2"]
    result = CliRunner().invoke(app, [*command, "--out", str(out)])
    line = assert_one_line_error(result, f"error: {target / 'pack.yaml'}: artifact ", exit_code=2)
    assert re.search(r"artifact \w+: no keywords; the retrieval path needs", line)
    assert not (out / "checkpoints").exists()
