"""Every ``mirage`` command follows the shared conventions of ``mirage.cli.options``: one flag
spelling per thing, the workspace given the same way, help rendered as paragraphs with the exit
codes under it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.core import TyperArgument, TyperOption
from typer.testing import CliRunner

from mirage.cli import app
from mirage.cli.options import EXIT_CODES_HELP


def _commands(group: Any, path: str = "mirage") -> Iterator[tuple[str, Any]]:
    """Every command under ``group``, found by its ``commands`` (the typer installed here
    vendors its own click, ``typer._click``: ``click.Group`` and ``click.Option`` match none of
    its commands and options)."""
    yield path, group
    for name, command in getattr(group, "commands", {}).items():
        yield from _commands(command, f"{path} {name}")


def _visible_options() -> Iterator[tuple[str, TyperOption]]:
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if isinstance(param, TyperOption) and not param.hidden:
                yield path, param


def test_every_command_and_option_is_seen() -> None:
    commands = dict(_commands(typer.main.get_command(app)))
    assert {"mirage run", "mirage memory serve", "mirage cue run"} <= set(commands)
    assert ("mirage run", "--retry-errors") in {
        (path, flag) for path, option in _visible_options() for flag in option.opts
    }


def test_a_short_flag_means_one_long_flag_in_every_command() -> None:
    long_names: dict[str, set[str]] = defaultdict(set)
    for path, option in _visible_options():
        shorts = [o for o in option.opts if not o.startswith("--")]
        longs = [o for o in option.opts if o.startswith("--")]
        for short in shorts:
            long_names[short].update(f"{name} ({path})" for name in longs)
    clashes = {
        short: names
        for short, names in long_names.items()
        if len({name.split(" (")[0] for name in names}) > 1
    }
    assert clashes == {}


def test_a_long_flag_has_the_same_short_flag_in_every_command() -> None:
    shorts: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    where: dict[str, list[str]] = defaultdict(list)
    for path, option in _visible_options():
        short = tuple(sorted(o for o in option.opts if not o.startswith("--")))
        for name in (o for o in option.opts if o.startswith("--")):
            shorts[name].add(short)
            where[name].append(f"{path}: {short or 'none'}")
    assert {name: where[name] for name, seen in shorts.items() if len(seen) > 1} == {}


def test_the_workspace_is_always_the_workspace_option() -> None:
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if param.name == "workspace":
                assert isinstance(param, TyperOption), path
                assert set(param.opts) == {"--workspace", "-w"}, path
            if isinstance(param, TyperArgument) and "workspace" in (param.name or ""):
                assert param.hidden, f"{path}: a visible positional workspace"


def test_help_renders_docstrings_as_paragraphs_with_the_exit_codes() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "probes under each condition on fresh restores" in result.output
    assert "tool calls and the EIT/compaction status line are shown after each reply" in (
        result.output
    )
    command = CliRunner().invoke(app, ["memory", "serve", "--help"], env={"COLUMNS": "200"})
    assert " ".join(EXIT_CODES_HELP.split()[:6]) in " ".join(command.output.split())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "--limit", "-1"], "--limit"),
        (["run", "--repeats", "0"], "--repeats"),
        (["run", "--concurrency", "0"], "--concurrency"),
        (["run", "--conditions", "C5"], "conditions must be a comma list of C0 and Cm"),
        (["run", "--no-such-option"], "No such option: --no-such-option"),
        (["view", ".", "--port", "-1"], "--port"),
        (["merge"], "Missing argument"),
        (["no-such-command"], "No such command"),
    ],
)
def test_usage_and_range_errors_are_one_line_exit_2(args: list[str], says: str) -> None:
    """Issue 37: typer drew these as a box of five lines; every error is one ``error:`` line."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and says in lines[0] and "--help" in lines[0]
