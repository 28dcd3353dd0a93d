"""``mirage cue run --study FILE``: a TOML study read strictly (unknown keys named with the
nearest valid one, no coerced value, a missing pack named), flags given override it, and the
resolved ``study.toml`` a run writes loads back to the same run configuration."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cue.config import CueRunConfig, load_run_config, load_study
from harness.cue.run import CueRun
from harness.kit.studyfile import StudyFileError
from mirage.cli import app
from runtime.backbones import FunctionBackbone
from runtime.messages import Message
from tests.cli_errors import assert_one_line_error

CONDITIONS = ["full-context@detailed/split", "full-context@brief/asr"]


def _study(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _answer(messages: list[Message]) -> str:
    return "A"


def test_a_run_writes_a_study_that_loads_back_to_its_config(tmp_path: Path) -> None:
    config = load_run_config(
        None, out=tmp_path / "out", conditions=CONDITIONS, bootstrap={"replicates": 200}
    )
    asyncio.run(CueRun(config, backbone=FunctionBackbone(_answer)).execute())
    written = tmp_path / "out" / "local_smollm2-135m" / "study.toml"
    again = load_study(written)
    assert (
        again.model_dump() == config.model_copy(update={"out": config.out.resolve()}).model_dump()
    )


def test_what_the_study_leaves_out_comes_from_the_default_run(tmp_path: Path) -> None:
    study = _study(tmp_path, 'conditions = ["naive-rag@brief/split"]\nconcurrency = 2\n')
    config = load_study(study)
    default = load_run_config(None)
    assert config.conditions == ("naive-rag@brief/split",) and config.concurrency == 2
    assert [c.name for c in config.contrasts] == ["EI naive-rag@brief/split"]  # derived
    assert config.bootstrap == default.bootstrap and config.model == default.model


def test_flags_given_override_the_study(tmp_path: Path) -> None:
    study = _study(tmp_path, 'model = "openai/gpt-4o-mini"\nconcurrency = 2\n')
    config = load_study(study, concurrency=3, model=None)  # None: the flag was not given
    assert isinstance(config, CueRunConfig)
    assert config.concurrency == 3 and config.model == "openai/gpt-4o-mini"


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('modle = "x"\n', ["unknown key 'modle'", "did you mean 'model'?"]),
        ('concurrency = "2"\n', ["concurrency:", "valid integer", "'2'"]),
        ("bootstrap = {replicates = 10}\n", ["bootstrap.replicates:", "greater than or equal"]),
        ('pack = "no-such-pack"\n', ["pack:", "'no-such-pack' is not a pack"]),
        ('conditions = ["nobody@brief/asr"]\n', ["unknown system(s) ['nobody']"]),
    ],
)
def test_a_bad_study_is_one_line_naming_the_key_and_exit_2(
    text: str, fragments: list[str], tmp_path: Path
) -> None:
    study = _study(tmp_path, text)
    with pytest.raises(StudyFileError):
        load_study(study)
    result = CliRunner().invoke(app, ["cue", "run", "--study", str(study)])
    assert_one_line_error(result, str(study), *fragments, exit_code=2)


def test_study_and_config_together_are_refused(tmp_path: Path) -> None:
    study = _study(tmp_path, "concurrency = 2\n")
    (tmp_path / "x.yaml").write_text("concurrency: 2\n")
    result = CliRunner().invoke(
        app, ["cue", "run", "--study", str(study), "--config", str(tmp_path / "x.yaml")]
    )
    assert_one_line_error(result, "--config", "--study", exit_code=2)
