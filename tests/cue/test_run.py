"""``mirage cue run`` machinery without the embedded model: resume after an interruption,
recorded failures, refusal to mix packs, and run-config errors."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cue.config import RunConfigError, load_run_config
from harness.cue.pack import BUNDLED_DIR, DEFAULT_PACK
from harness.cue.records import CueRecord
from harness.cue.run import CueRun, RunFolderError
from harness.kit.results import read_records
from mirage.cli import app
from runtime.backbones import FunctionBackbone, ProviderError
from runtime.messages import Message, UserMessage

CONDITIONS = ["full-context@detailed/split", "full-context@brief/asr"]


def _config(out: Path, pack: str = DEFAULT_PACK, conditions: list[str] = CONDITIONS) -> object:
    return load_run_config(
        None, pack=pack, out=out, conditions=conditions, bootstrap={"replicates": 200, "seed": 1}
    )


def _run(config: object, backbone: FunctionBackbone) -> object:
    return asyncio.run(CueRun(config, backbone=backbone).execute())  # type: ignore[arg-type]


def test_an_interrupted_run_resumes_without_loss_or_duplication(tmp_path: Path) -> None:
    calls = {"n": 0}

    def flaky(messages: list[Message]) -> str:
        calls["n"] += 1
        if calls["n"] == 20:
            raise KeyboardInterrupt  # the run dies mid-way, as under Ctrl-C
        return "A"

    config = _config(tmp_path / "out")
    with pytest.raises(KeyboardInterrupt):
        _run(config, FunctionBackbone(flaky))
    folder = tmp_path / "out" / "local_smollm2-135m"
    before = read_records(folder / "results.jsonl", CueRecord)
    assert len(before) == 19
    files = _run(config, FunctionBackbone(lambda m: "B"))
    after = read_records(folder / "results.jsonl", CueRecord)
    assert len(after) == 2 * 32 and len({r.key for r in after}) == 2 * 32
    assert after[:19] == before and {r.raw_output for r in after[19:]} == {"B"}
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["conditions"] == CONDITIONS and len(summary["contrasts"]) == 2
    assert files.report.is_file() and len(files.figures) == 4  # type: ignore[attr-defined]


def test_failures_are_recorded_and_unparsed_replies_count_wrong(tmp_path: Path) -> None:
    def reply(messages: list[Message]) -> str:
        last = messages[-1]
        assert isinstance(last, UserMessage)
        text = last.plain_text.rsplit("Question:", 1)[1]
        if "Maya's dog" in text:
            raise ProviderError("timeout", "no answer in time")
        return "I could not say." if "Lisbon" in text else "C"

    _run(_config(tmp_path / "out", conditions=CONDITIONS[:1]), FunctionBackbone(reply))
    records = read_records(tmp_path / "out" / "local_smollm2-135m", CueRecord)
    failed = [r for r in records if r.error]
    assert [r.question_id for r in failed] == ["p1-ER-E1"] and failed[0].correct is None
    unparsed = next(r for r in records if r.question_id == "p1-ER-E2")
    assert (unparsed.choice, unparsed.parse_rule, unparsed.correct) == (None, "none", False)
    summary = json.loads((tmp_path / "out" / "local_smollm2-135m" / "summary.json").read_text())
    metrics = summary["metrics"][CONDITIONS[0]]
    assert (metrics["scored"], metrics["errors"]) == (31, 1)


def test_a_folder_holding_another_pack_version_is_refused(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(BUNDLED_DIR / DEFAULT_PACK, pack)
    config = _config(tmp_path / "out", pack=str(pack), conditions=CONDITIONS[:1])
    _run(config, FunctionBackbone(lambda m: "A"))
    bank = yaml.safe_load((pack / "questions.yaml").read_text())
    bank["questions"][0]["question"] += " Really?"
    (pack / "questions.yaml").write_text(yaml.safe_dump(bank, sort_keys=False))
    with pytest.raises(RunFolderError, match="another content digest"):
        _run(config, FunctionBackbone(lambda m: "A"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"conditions": ["nope@detailed/split"]}, "unknown system(s) ['nope']"),
        ({"conditions": ["naive-rag@huge/split"]}, "must be SYSTEM@IMAGE/AUDIO"),
        ({"bootstrap": {"replicates": 5}}, "bootstrap.replicates"),
    ],
)
def test_bad_run_config_names_the_field(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(
        RunConfigError, match=r"default-run\.yaml with the command-line options"
    ) as raised:
        load_run_config(None, **overrides)
    assert message in str(raised.value)


def test_a_contrast_must_differ_in_exactly_its_factor(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "conditions": ["naive-rag@brief/asr", "naive-rag@detailed/split"],
                "contrasts": [
                    {
                        "name": "captions",
                        "kind": "image_level",
                        "a": "naive-rag@detailed/split",
                        "b": "naive-rag@brief/asr",
                        "setting": "implicit",
                    }
                ],
            }
        )
    )
    with pytest.raises(
        RunConfigError, match=r"differ only in image_level.*\['image_level', 'audio_level'\]"
    ):
        load_run_config(config)


def test_cli_reports_a_bad_system_without_a_traceback() -> None:
    result = CliRunner().invoke(app, ["cue", "run", "--system", "nope"])
    assert result.exit_code == 2
    assert "unknown system(s) ['nope']" in result.output and "Traceback" not in result.output


def test_default_contrasts_pair_neighbours_that_differ_in_one_factor() -> None:
    config = load_run_config(
        None,
        conditions=[
            "naive-rag@detailed/split",
            "naive-rag@brief/split",
            "mirage-memory@brief/split",
            "mirage-memory@brief/asr",
        ],
    )
    kinds = [(c.kind, c.a, c.b) for c in config.contrasts if c.kind != "explicit_vs_implicit"]
    assert kinds == [
        ("image_level", "naive-rag@brief/split", "naive-rag@detailed/split"),
        ("system", "mirage-memory@brief/split", "naive-rag@brief/split"),
        ("audio_level", "mirage-memory@brief/asr", "mirage-memory@brief/split"),
    ]
