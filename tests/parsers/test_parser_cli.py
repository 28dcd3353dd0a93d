"""``mirage parse`` and ``mirage compliance`` through typer's CliRunner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from typer.testing import CliRunner

from mirage.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """The root CLI binds structlog to the CliRunner's stderr, which closes after invoke."""
    yield
    structlog.reset_defaults()


HERMES = '<tool_call>{"name": "artifact_recall", "arguments": {"query": "q", "k": 2}}</tool_call>'


def test_parse_prints_the_json_outcome_with_default_tools() -> None:
    result = runner.invoke(app, ["parse", "--family", "hermes"], input=f"Sure.\n{HERMES}")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["overall"] == "ok" and data["executable"] == 1
    assert data["calls"][0]["arguments"] == {"query": "q", "k": 2}
    assert data["content"] == "Sure."


def test_parse_uses_the_model_profile_and_adapters() -> None:
    pseudo = "```tool_code\nartifact_recall(query='q')\n```"
    off = json.loads(runner.invoke(app, ["parse", "-m", "gemma-3-27b-it"], input=pseudo).output)
    on = json.loads(
        runner.invoke(app, ["parse", "-m", "gemma-3-27b-it", "--adapters"], input=pseudo).output
    )
    assert (off["family"], off["overall"]) == ("pythonic", "pseudo_tool")
    assert off["pseudo_tool_markers"] == ["tool_code", "tool_name_call"]
    assert (on["overall"], on["calls"][0]["label"]) == ("adapted", "adapted")


def test_parse_with_a_tools_file(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "parameters": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                            "required": ["city"],
                        },
                    },
                }
            ]
        )
    )
    reply = '{"name": "get_weather", "parameters": {"city": "Lisbon"}}'
    result = runner.invoke(app, ["parse", "-f", "json", "--tools", str(tools)], input=reply)
    assert json.loads(result.output)["overall"] == "ok"
    unknown = runner.invoke(app, ["parse", "-f", "hermes", "--tools", str(tools)], input=HERMES)
    assert json.loads(unknown.output)["overall"] == "unknown_tool"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["parse", "-f", "yaml"], "unknown family 'yaml'"),
        (["parse", "-f", "hermes", "-m", "qwen3"], "not both"),
        (["parse", "--tools", "/nonexistent/tools.json"], "cannot read"),
    ],
)
def test_parse_rejects_bad_options_clearly(args: list[str], message: str) -> None:
    result = runner.invoke(app, args, input="x")
    assert result.exit_code != 0
    assert message in result.output


def test_parse_rejects_a_malformed_tools_file(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text('[{"type": "function", "function": {"description": "no name"}}]')
    result = runner.invoke(app, ["parse", "--tools", str(tools)], input="x")
    assert result.exit_code != 0 and "tool #0 has no function name" in result.output


def test_compliance_rejects_a_bad_n() -> None:
    result = runner.invoke(app, ["compliance", "-m", "local/smollm2-135m", "--n", "0"])
    assert result.exit_code != 0


@pytest.mark.slow
def test_compliance_runs_on_the_embedded_model(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "compliance",
            "-m",
            "local/smollm2-135m",
            "--n",
            "2",
            "--adapters",
            "both",
            "--out",
            str(tmp_path),
            "--max-output-tokens",
            "96",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "compliance.json").read_text())["rows"]
    assert [(row["model"], row["adapters"], row["attempted"]) for row in rows] == [
        ("local/smollm2-135m", False, 2),
        ("local/smollm2-135m", True, 2),
    ]
