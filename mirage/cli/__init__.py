"""The ``mirage`` command line: the root typer app and its command registry.

Every command module below registers its commands through ``register(app)``; the registry is
the explicit tuple ``COMMAND_MODULES`` (plain imports, so the import graph shows who is wired
here). Command modules import their heavy libraries inside the commands, so ``mirage --help``
stays fast.
"""

from __future__ import annotations

import typer

from mirage.cli import agents, chat, compact, doctor, memory, pack, parse, report, run, serve_model
from mirage.cli.logs import configure_logging

app = typer.Typer(
    name="mirage",
    help=(
        "MIRAGE: does an agent ground its answers in earlier evidence, or only sound as if it does?"
    ),
    no_args_is_help=True,
    add_completion=False,
)

COMMAND_MODULES = (chat, serve_model, doctor, parse, memory, compact, pack, report, run, agents)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress events to stderr"),
) -> None:
    configure_logging(verbose)


for _module in COMMAND_MODULES:
    _module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
