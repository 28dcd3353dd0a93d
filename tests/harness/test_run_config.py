"""``mirage run`` checks its inputs before any work starts: a bad ``--summary-format
template:FILE`` is refused at config validation, before the workspace or the trunk exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from harness.mirage.config import RunConfig
from mirage.cli import app
from tests.cli_errors import assert_one_line_error


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "summary template file 't.txt' does not exist"),
        (b"Summarise {transcript} for {bogus}", "unknown placeholder {bogus}"),
        (b"Summarise {focus} only", "must contain the {transcript} placeholder"),
        (b"Summarise {transcript} \xff", "cannot read summary template 't.txt'"),
        (b"", "summary template 't.txt' is a folder"),
    ],
    ids=["missing", "unknown-placeholder", "no-transcript", "not-utf8", "folder"],
)
def test_a_bad_summary_template_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes | None, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    if content == b"":
        (tmp_path / "t.txt").mkdir()
    elif content is not None:
        (tmp_path / "t.txt").write_bytes(content)
    with pytest.raises(ValidationError, match="summary template"):
        RunConfig(summary_formats="template:t.txt")
    result = CliRunner().invoke(
        app,
        ["run", "--trunk-model", "scripted", "--summary-format", "template:t.txt", "--out", "r"],
    )
    assert_one_line_error(result, message, exit_code=2)
    assert not (tmp_path / "r").exists()  # no workspace, no trunk, nothing written


def test_a_good_summary_template_passes(tmp_path: Path) -> None:
    template = tmp_path / "t.txt"
    template.write_text("Keep every number. {focus}\n{transcript}")
    assert RunConfig(summary_formats=f"template:{template}").primary_format.endswith("t.txt")


def test_the_command_runs_with_exactly_the_api_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RunConfig] = []

    def capture(config: RunConfig, progress: object) -> list[object]:
        seen.append(config)
        return []

    monkeypatch.setattr("mirage.cli.run._execute", capture)
    result = CliRunner().invoke(app, ["run"])
    assert result.exit_code == 0, result.output
    assert seen == [RunConfig()]


def test_limit_zero_uses_every_question(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RunConfig] = []
    monkeypatch.setattr("mirage.cli.run._execute", lambda config, _: seen.append(config) or [])
    assert CliRunner().invoke(app, ["run", "--limit", "0"]).exit_code == 0
    assert seen[0].limit is None


@pytest.mark.parametrize(
    ("option", "model", "message"),
    [
        ("--model", "scripted", "unknown model 'scripted': litellm cannot tell its provider"),
        ("--trunk-model", "gpt-nothing", "unknown model 'gpt-nothing'"),
        ("--summarizer", "local/tinyllama", "unknown local model 'local/tinyllama'"),
    ],
)
def test_an_unknown_model_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, model: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", option, model, "--out", "r"])
    assert_one_line_error(result, message, exit_code=2)
    assert not (tmp_path / "r").exists()


def test_request_timeout_reaches_the_provider_backbones(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.mirage.run import MirageRun

    seen: list[RunConfig] = []
    monkeypatch.setattr("mirage.cli.run._execute", lambda config, _: seen.append(config) or [])
    assert CliRunner().invoke(app, ["run", "--request-timeout", "7.5"]).exit_code == 0
    [config] = seen
    assert config.request_timeout_s == 7.5
    served = MirageRun(config.model_copy(update={"api_base": "http://127.0.0.1:9/v1"}))
    backbone = served.models.backbone("hosted_vllm/served", 64, context_window=8192)
    assert backbone.timeout_s == 7.5  # type: ignore[attr-defined]
    refused = CliRunner().invoke(app, ["run", "--request-timeout", "0"])
    assert_one_line_error(refused, "--request-timeout", exit_code=2)


@pytest.mark.parametrize("url", [None, "http://0.0.0.0:8765/mcp", "http://127.0.0.1:8765/mcp"])
def test_a_blank_memory_token_is_refused_wherever_the_server_listens(url: str | None) -> None:
    with pytest.raises(ValidationError, match="--memory-token is blank"):
        RunConfig(agent="cmd:/bin/cat", memory_url=url, memory_token=" ")
