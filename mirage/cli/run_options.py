"""The options of ``mirage run``, generated from ``RunConfig``'s declarations (``RUN_OPTIONS``:
each field's help panel, help text, flag, short flag, environment variable, default and bound),
and how the given ones become ``RunConfig`` fields.

``with_run_options`` gives the command function one typer option per declared field that has a
flag, between the command's own options (``--study``; ``--dry-run``, in the output panel), so
the command names none of them: they are read back by field through ``given_options``.

Precedence, lowest first: ``RunConfig``'s defaults, the study file (``--study``), the flags the
user gave on the command line (click's parameter source says which were given: a flag left at
its default never overrides the file).

Above: the ``mirage run`` command (``mirage.cli.run``). Below: ``RunConfig`` and its
declarations (``harness.mirage.config``, ``harness.kit.options``); nothing heavy is imported
here.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from harness.kit.options import DeclaredOption, Given
from harness.mirage.config import OUTPUT_PANEL, PANELS, RUN_OPTIONS

C = TypeVar("C", bound=Callable[..., Any])

Study = Annotated[
    Path | None,
    typer.Option(
        help="A study file (TOML): every run option a key (docs/running.md, 'Study files'); "
        "flags given here override it. Every run writes its resolved study to OUT/study.toml",
        dir_okay=False,
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(
        rich_help_panel=OUTPUT_PANEL,
        help="Plan only: the summarizer (and its chunks when the compaction input exceeds its "
        "window), probes, input tokens per state (from existing checkpoints, else "
        "estimated from the pack and the profile), output budget and cost with and "
        "without prompt caching (litellm's local price map); builds and writes nothing",
    ),
]


def cli_options(
    options: Mapping[str, DeclaredOption] = RUN_OPTIONS,
) -> list[DeclaredOption]:
    """The declared options that have a flag, in ``RunConfig``'s order."""
    return [option for option in options.values() if option.flag is not None]


def _cli_type(option: DeclaredOption) -> Any:
    """The type typer parses the flag's value as."""
    given = option.option.given
    if given in (Given.REPEATED, Given.REPEATED_OR_COMMAS):
        return list[str] | None
    if given is Given.COMMA_LIST:
        return str
    if given is Given.ZERO_FOR_NONE:
        return int
    if given is Given.TEXT:
        return str | None
    annotation = option.field.annotation
    return str if typing.get_origin(annotation) is typing.Literal else annotation


def _cli_default(option: DeclaredOption) -> Any:
    """The flag's default, from the field's (a list given by repeating the flag: none)."""
    given, default = option.option.given, option.default
    if given in (Given.REPEATED, Given.REPEATED_OR_COMMAS) or default is None:
        return None
    if given is Given.COMMA_LIST:
        return ",".join(default)
    if given is Given.ZERO_FOR_NONE:
        return default or 0
    return str(default) if given is Given.TEXT else default


def run_parameter(option: DeclaredOption) -> inspect.Parameter:
    """The typer option of one declared field: ``--flag`` (``--flag/--no-flag`` for a
    boolean) and its short flag, in its help panel, with its help, bound and variable."""
    flag = str(option.flag)
    names = [f"{flag}/--no-{flag[2:]}" if option.is_bool else flag]
    names += [option.option.short] if option.option.short else []
    default = _cli_default(option)
    settings = typer.Option(
        *names,
        rich_help_panel=option.option.panel,
        help=option.option.help,
        min=option.lower_bound,
        envvar=option.option.envvar,
        exists=option.option.existing_file,
        dir_okay=not option.option.existing_file,
    )
    annotation = Annotated[_cli_type(option), settings]  # type: ignore[valid-type]
    keyword = inspect.Parameter.KEYWORD_ONLY
    return inspect.Parameter(option.param, keyword, default=default, annotation=annotation)


def _panel_rank(parameter: inspect.Parameter) -> int:
    """Where a parameter's help panel comes (-1: typer's own panel, shown first)."""
    infos = typing.get_args(parameter.annotation)[1:]
    panel = next((getattr(info, "rich_help_panel", None) for info in infos), None)
    return PANELS.index(panel) if panel in PANELS else -1


def with_run_options(command: C, options: Mapping[str, DeclaredOption] = RUN_OPTIONS) -> C:
    """``command`` with a typer option for every declared option that has a flag: its own
    parameters (but ``**options``, where the declared ones arrive; typer passes every parameter
    by name) and the declared ones, ordered by help panel (``PANELS``; typer's own panel first),
    the command's own after the declared ones of their panel."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    own = inspect.signature(command, eval_str=True).parameters.values()
    kept = [p.replace(kind=keyword) for p in own if p.kind is not inspect.Parameter.VAR_KEYWORD]
    declared = [run_parameter(option) for option in cli_options(options)]
    signature = inspect.Signature(sorted([*declared, *kept], key=_panel_rank))
    command.__signature__ = signature  # type: ignore[attr-defined]
    return command


def _comma_list(option: DeclaredOption, value: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    choices = option.choices
    if not items or any(item not in choices for item in items):
        raise typer.BadParameter(
            f"{option.param} must be a comma list of {' and '.join(choices)}, got {value!r}"
        )
    return items


def _field_value(option: DeclaredOption, value: Any) -> Any:
    """The field's value of what the flag was given (``--limit 0``: None, every question;
    ``--summary-format`` repeated and/or as comma lists: the items in order, a repeat refused
    by ``RunConfig`` naming it)."""
    given = option.option.given
    if given is Given.COMMA_LIST:
        return _comma_list(option, value)
    if given is Given.ZERO_FOR_NONE:
        return value or None
    if given is Given.REPEATED_OR_COMMAS:
        return [part.strip() for item in value for part in item.split(",") if part.strip()]
    return value


def given_options(
    ctx: typer.Context, options: Mapping[str, DeclaredOption] = RUN_OPTIONS
) -> dict[str, Any]:
    """The run options the user gave on the command line (or through an environment
    variable), by ``RunConfig`` field; options left at their defaults are not in it."""
    given: dict[str, Any] = {}
    for option in cli_options(options):
        source = ctx.get_parameter_source(option.param)
        if source is None or source.name == "DEFAULT":  # typer's click
            continue
        given[option.name] = _field_value(option, ctx.params[option.param])
    return given
