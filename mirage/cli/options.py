"""What every ``mirage`` command shares: flag names, exit codes, errors and help layout.

One flag spelling per thing: a command that takes a workspace, a model, a reply budget, a
summary format or an output folder spells it as below (``tests/test_cli_conventions.py``
checks that no flag means two things). Old spellings stay as hidden aliases that warn.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup

try:  # typer vendors its own click (typer._click); older typers use click itself
    from typer._click import Context as ClickContext
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import Context as ClickContext  # type: ignore[assignment]
    from click import exceptions as click_errors  # type: ignore[no-redef]

T = TypeVar("T")

WORKSPACE = ("--workspace", "-w")
MODEL = ("--model", "-m")
OUT = ("--out", "-o")
MAX_OUTPUT_TOKENS = ("--max-output-tokens",)
SUMMARY_FORMAT = ("--summary-format",)
FAMILY = ("--family", "-f")
REQUEST_TIMEOUT = ("--request-timeout",)
REQUEST_TIMEOUT_HELP = (
    "Seconds one call to a litellm model's provider may take before it fails as a timeout "
    "(it is retried like other provider failures); the embedded model has no provider"
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
EXIT_CODES_HELP = (
    "Exit status: 0 done; 1 a runtime failure (a model, provider, process or machine check "
    "failed; what was written is kept); 2 a usage error or bad input (an option, a file, a pack)."
)


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``error: message`` on stderr; return the ``typer.Exit`` to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=code)


def usage_line(error: click_errors.UsageError) -> str:
    """A usage error (bad option value, value out of range, unknown option, missing argument)
    as the one line every other error is: ``error: …``, and where the help is."""
    where = f" (see {error.ctx.command_path} --help)" if error.ctx is not None else ""
    return f"error: {error.format_message()}{where}"


class OneLineUsageErrors(TyperGroup):
    """The root group: click's usage errors, which typer draws as a box of five lines, are one
    ``error:`` line on stderr and exit 2 like the errors the commands raise themselves."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: ClickContext | None = None,
        **extra: Any,
    ) -> ClickContext:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click_errors.NoArgsIsHelpError:
            raise  # the help, shown as it is
        except click_errors.UsageError as exc:
            typer.echo(usage_line(exc), err=True)
            raise typer.Exit(exc.exit_code) from exc

    def invoke(self, ctx: ClickContext) -> Any:
        try:
            return super().invoke(ctx)
        except click_errors.NoArgsIsHelpError:
            raise
        except click_errors.UsageError as exc:  # a command's options, or a BadParameter it raised
            typer.echo(usage_line(exc), err=True)
            raise typer.Exit(exc.exit_code) from exc


def folder_to_write(value: Path | None) -> Path | None:
    """The callback of an option naming a folder the command creates or writes into
    (``--out``): a usage error when ``value`` cannot be one (a file, a file on the way to it),
    before any work starts."""
    from harness.kit.paths import folder_problem

    return _checked(value, folder_problem)


def file_to_write(value: Path | None) -> Path | None:
    """The callback of an option naming a file the command creates or appends to (``--log``):
    a usage error when ``value`` cannot be one (a folder, a file on the way to it)."""
    from harness.kit.paths import file_problem

    return _checked(value, file_problem)


def _checked(value: Path | None, problem_of: Callable[[Path], str | None]) -> Path | None:
    problem = problem_of(value) if value is not None else None
    if problem is not None:
        raise typer.BadParameter(problem)
    return value


def deprecated(old: str, new: str) -> None:
    """Warn once on stderr that ``old`` is an old spelling of ``new``."""
    typer.echo(f"warning: {old} is deprecated; use {new}", err=True)


def aliased(value: T, old_value: T | None, old: str, new: str) -> T:
    """``value``, or the value given under the hidden old spelling ``old`` (with a warning)."""
    if old_value is None:
        return value
    deprecated(old, new)
    return old_value


def workspace_given(option: Path | None, positional: Path | None, command: str) -> Path:
    """The workspace of ``command``: ``-w W``, or the old positional form (with a warning);
    it must be an existing folder."""
    if option is not None and positional is not None:
        raise fail(f"give the workspace once: {command} -w W")
    if positional is not None:
        deprecated(f"'{command} W'", f"'{command} -w W'")
    chosen = option or positional
    if chosen is None:
        raise fail(f"missing the workspace: {command} -w W")
    if not chosen.is_dir():
        raise fail(f"workspace {chosen} is not a folder")
    return chosen


def paragraphs(text: str | None) -> str | None:
    """A docstring as help text: paragraphs kept, the hard line breaks inside each dropped (so
    the help wraps at the terminal's width, not at the source's)."""
    if not text:
        return text
    blocks = re.split(r"\n\s*\n", inspect.cleandoc(text))
    return "\n\n".join(" ".join(line.strip() for line in block.splitlines()) for block in blocks)
