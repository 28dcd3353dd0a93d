"""``mirage run``'s options are declared once, on ``RunConfig``'s fields (``RunOption``): the
command's typer options, the study file's keys, ``study.json``'s fields, the keys a resume keeps
and docs/running.md's key table are all generated from the declarations, so an option is added
in one place (issue 46, item 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from pydantic import BaseModel, Field
from typer.core import TyperOption
from typer.testing import CliRunner

from harness.kit.options import Given, RunOption, StudyRole, declared_options
from harness.mirage.config import OUTPUT_PANEL, PANELS, RUN_OPTIONS, RunConfig, flag_of
from harness.mirage.run.resume import FIXED_KEYS, fixed_keys
from harness.mirage.run.shards import STUDY_FIELDS, study_fields
from harness.mirage.study import keys_markdown, study_keys
from mirage.cli import app
from mirage.cli.run_options import given_options, with_run_options
from tests.cli_errors import assert_one_line_error

DOC = Path(__file__).resolve().parents[1] / "docs" / "running.md"
BEGIN = "<!-- study keys: generated from harness/mirage/config.py"
END = "<!-- end of study keys -->"
COMMAND_OWN = {"study", "dry_run", "help"}
"""Parameters of ``mirage run`` that are not run options."""


def _declared_params() -> dict[str, TyperOption]:
    """The options of ``mirage run`` but its own (typer's click classes: it vendors click)."""
    command = getattr(typer.main.get_command(app), "commands", {})["run"]
    return {
        str(p.name): p
        for p in command.params
        if isinstance(p, TyperOption) and p.name not in COMMAND_OWN
    }


def test_a_field_that_declares_no_option_is_refused_naming_it() -> None:
    class Undeclared(BaseModel):
        seed: int = 0

    with pytest.raises(TypeError, match=r"Undeclared\.seed must declare one RunOption"):
        declared_options(Undeclared)


def test_every_field_has_a_meaning_and_every_flag_help_in_a_panel() -> None:
    assert list(RUN_OPTIONS) == list(RunConfig.model_fields)
    for name, option in RUN_OPTIONS.items():
        assert option.field.description, f"{name}: no description (its meaning in the docs)"
        if option.flag is None:  # a study file sets it: declared so, with nothing for a flag
            assert not (option.option.help or option.option.short or option.option.envvar), name
        else:
            assert option.option.help and option.option.panel in PANELS, name


def test_the_run_command_has_exactly_the_declared_options() -> None:
    params = _declared_params()
    with_flags = {option.param: option for option in RUN_OPTIONS.values() if option.flag}
    assert set(params) == set(with_flags)
    for name, param in params.items():
        option = with_flags[name]
        assert param.opts == [option.flag, *filter(None, [option.option.short])], name
        negated = [f"--no-{str(option.flag)[2:]}"] if option.is_bool else []
        assert param.secondary_opts == negated, name
        assert param.help == option.option.help, name
        assert getattr(param, "rich_help_panel", None) == option.option.panel, name
        assert param.envvar == option.option.envvar, name
        assert getattr(param, "min", None) == option.lower_bound, name
        assert param.multiple == (option.option.given in (Given.REPEATED, Given.REPEATED_OR_COMMAS))


def test_run_help_shows_panels_defaults_and_every_flag() -> None:
    shown = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "250"}).output
    for panel in PANELS:
        assert f"─ {panel} ─" in shown, panel
    for option in RUN_OPTIONS.values():
        assert option.flag is None or option.flag in shown, option.name
    for default in ("[default: 12]", "[default: C0,Cm]", "[default: mirage-runs/default]"):
        assert default in shown
    assert "[env var: MIRAGE_AGENT_API_KEY]" in shown
    assert shown.index("─ Model ─") < shown.index("─ Pack and depth ─") < shown.index("─ Output ─")
    assert shown.index("--retry-errors") < shown.index("--dry-run")  # the command's own last


def test_the_flag_a_refusal_names_is_the_declared_one() -> None:
    assert flag_of("summary_formats") == "--summary-format"
    assert flag_of("summarizer_model") == flag_of("summarizer") == "--summarizer"
    assert flag_of("agent_timeout_s") == "--agent-timeout"
    assert flag_of("agent_kind") == "--agent"


def test_the_docs_key_table_is_generated_from_the_declarations() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "docs/running.md lost its study-keys markers"
    held = text.split(BEGIN, 1)[1].split("\n", 1)[1].split(END, 1)[0].strip()
    assert held == keys_markdown(), (
        "docs/running.md's key table is out of step with RunConfig's declarations: paste "
        "harness.mirage.study.keys_markdown() between its study-keys markers"
    )
    rows = {line.split("|")[1].strip() for line in held.splitlines()[2:]}
    assert rows == {f"`{name}`" for name in RunConfig.model_fields}


def test_the_study_keys_and_fixed_keys_follow_the_declarations() -> None:
    secrets = {name for name, option in RUN_OPTIONS.items() if option.secret}
    assert secrets == {"agent_api_key", "memory_token"}
    assert set(study_keys()) == set(RunConfig.model_fields) - secrets
    kept = {o.study_key for o in RUN_OPTIONS.values() if o.option.study is StudyRole.KEPT}
    assert set(FIXED_KEYS) == kept and "summarizer" in kept  # resolved: what the run uses
    assert "seed" in STUDY_FIELDS and "out" not in STUDY_FIELDS


class _Extended(RunConfig):
    """``RunConfig`` with one more option, declared as any option is."""

    budget_usd: Annotated[
        float | None, RunOption(OUTPUT_PANEL, "Stop at this cost", min=0, study=StudyRole.KEPT)
    ] = Field(default=None, description="stop at this cost (USD)")


def test_an_option_declared_once_reaches_the_command_the_study_the_resume_and_the_docs() -> None:
    options = declared_options(_Extended)
    seen: list[dict[str, Any]] = []

    def command(ctx: typer.Context, **_options: Any) -> None:
        seen.append(given_options(ctx, options))

    toy = typer.Typer()
    toy.command()(with_run_options(command, options))
    result = CliRunner().invoke(toy, ["--budget-usd", "2.5", "--limit", "0"])
    assert result.exit_code == 0, result.output
    assert seen == [{"budget_usd": 2.5, "limit": None}]
    help_text = CliRunner().invoke(toy, ["--help"], env={"COLUMNS": "200"}).output
    assert "--budget-usd" in help_text and "Stop at this cost" in help_text
    assert "budget_usd" in study_keys(options) and "budget_usd" in fixed_keys(options)
    assert "budget_usd" in study_fields(options)
    assert "| `budget_usd` | `--budget-usd` | stop at this cost (USD) | kept |" in (
        keys_markdown(options)
    )


@pytest.fixture
def given(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The run options each ``mirage run`` was given, by field (the run itself not made)."""
    seen: list[dict[str, Any]] = []

    def capture(study: Path | None, given: dict[str, Any]) -> RunConfig:
        seen.append(given)
        raise typer.Exit(0)

    monkeypatch.setattr("mirage.cli.run._config", capture)
    return seen


@pytest.mark.parametrize(
    ("args", "field", "value"),
    [
        (["--conditions", " Cm , C0 "], "conditions", ["Cm", "C0"]),
        (["--limit", "0"], "limit", None),
        (["-m", "a/b", "--model", "c/d"], "models", ["a/b", "c/d"]),
        (["--summary-format", "free-form,verbatim", "--summary-format", "x"], "summary_formats",
         ["free-form", "verbatim", "x"]),
        (["--shard", "2/3"], "shard", "2/3"),
        (["--no-references"], "references", False),
        (["--agent-timeout", "3"], "agent_timeout_s", 3.0),
        (["--summarizer", "s/t"], "summarizer_model", "s/t"),
        (["-o", "there"], "out", Path("there")),
    ],
)  # fmt: skip
def test_a_flag_given_becomes_its_field(
    args: list[str], field: str, value: Any, given: list[dict[str, Any]]
) -> None:
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 0, result.output
    assert given == [{field: value}]


def test_an_environment_variable_is_given_and_a_flag_at_its_default_too(
    given: list[dict[str, Any]],
) -> None:
    env = {"MIRAGE_AGENT_API_KEY": "sk-1"}
    assert CliRunner().invoke(app, ["run", "--seed", "0"], env=env).exit_code == 0
    assert CliRunner().invoke(app, ["run"]).exit_code == 0
    assert given == [{"agent_api_key": "sk-1", "seed": 0}, {}]


def test_a_comma_list_outside_its_choices_is_a_usage_error_naming_them() -> None:
    assert RUN_OPTIONS["conditions"].choices == ("C0", "Cm")
    result = CliRunner().invoke(app, ["run", "--conditions", "C0,C9", "--dry-run"])
    assert_one_line_error(result, "conditions must be a comma list of C0 and Cm", exit_code=2)
