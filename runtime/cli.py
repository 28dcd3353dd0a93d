"""The ``mirage`` command line.

Each package contributes its own commands through a ``register(app)`` function in its CLI
module, so this root stays small and commands live next to the code they drive.
"""

from __future__ import annotations

import importlib

import typer

import runtime  # noqa: F401  (offline defaults before anything else)
from runtime.logs import configure_logging

app = typer.Typer(
    name="mirage",
    help=(
        "MIRAGE: does an agent ground its answers in earlier evidence, or only sound as if it does?"
    ),
    no_args_is_help=True,
    add_completion=False,
)

COMMAND_MODULES: tuple[str, ...] = (
    "runtime.chat_cli",
    "runtime.serve.cli",
    "runtime.backbones.doctor",
    "runtime.parsers.cli",
    "memory_server.cli",
    "compaction.cli",
    "harness.packs.cli",
    "harness.cli",
    "harness.agents.cli",
)


def _register_all() -> None:
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.register(app)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress events to stderr"),
) -> None:
    configure_logging(verbose)


_register_all()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
