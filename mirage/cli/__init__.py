"""The ``mirage`` command line: the root typer app and its command registry.

Every command module below registers its commands through ``register(app)``; the registry is
the explicit tuple ``COMMAND_MODULES`` (plain imports, so the import graph shows who is wired
here). Command modules import their heavy libraries inside the commands, so ``mirage --help``
stays fast. Flags, exit codes and error lines every command shares are in ``mirage.cli.options``
(docs/architecture.md says how to add a command).
"""

from __future__ import annotations

import inspect

import typer

from mirage.cli import (
    agents,
    chat,
    compact,
    cue,
    doctor,
    export,
    memory,
    merge,
    pack,
    parse,
    report,
    run,
    serve_model,
)
from mirage.cli.logs import configure_logging
from mirage.cli.options import EXIT_CODES_HELP, OneLineUsageErrors, paragraphs

app = typer.Typer(
    cls=OneLineUsageErrors,
    name="mirage",
    help=(
        "MIRAGE: does an agent ground its answers in earlier evidence, or only sound as if it does?"
    ),
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
)

COMMAND_MODULES = (
    chat,
    serve_model,
    doctor,
    parse,
    memory,
    compact,
    pack,
    report,
    run,
    merge,
    export,
    agents,
    cue,
)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress events to stderr"),
) -> None:
    configure_logging(verbose)


def _tidy_help(group: typer.Typer) -> None:
    """Every command's help as paragraphs (docstrings' hard line breaks dropped, so the help
    wraps at the terminal's width), with the exit codes under it."""
    group.info.help = paragraphs(group.info.help)
    for command in group.registered_commands:
        command.help = paragraphs(command.help or inspect.getdoc(command.callback))
        command.epilog = command.epilog or EXIT_CODES_HELP
    for subgroup in group.registered_groups:
        if subgroup.typer_instance is not None:
            subgroup.typer_instance.info.epilog = EXIT_CODES_HELP
            _tidy_help(subgroup.typer_instance)


for _module in COMMAND_MODULES:
    _module.register(app)
_tidy_help(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
