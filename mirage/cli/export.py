"""``mirage export inspect RUN… --to DIR``: result folders as Inspect eval logs, for
``inspect view`` and ``inspect_ai.analysis`` beside other evals (docs/inspect.md).

Above: the ``mirage`` root (``mirage.cli``), which calls ``register(app)``. Below:
``harness.mirage.inspect.export``, which needs the ``inspect`` extra; it is imported inside the
command, so ``mirage --help`` and the default install never load inspect-ai.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mirage.cli.options import fail, folder_to_write

INSPECT_EXTRA = 'pip install -e ".[inspect]"'

export_app = typer.Typer(
    name="export",
    help="Write a run's results in another ecosystem's format (Inspect eval logs).",
    no_args_is_help=True,
)


def inspect_logs(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN...",
            help="A result folder (holding results.jsonl) or a run folder with one sub-folder "
            "per answerer",
            exists=True,
            file_okay=False,
        ),
    ],
    to: Annotated[
        Path,
        typer.Option("--to", help="Folder the eval logs are written to", callback=folder_to_write),
    ],
) -> None:
    """Write one Inspect eval log (.eval) per answerer of each RUN into --to: one sample per
    probe (input the probe prompt, output the reply, the indicators and retrieval path as its
    `mirage` score with the path evidence and tool calls in its metadata), the provenance as
    the eval's metadata and summary.json's figures per state x condition as its results. Open
    them with `inspect view --log-dir DIR` or read them with inspect_ai.log.read_eval_log."""
    try:
        from harness.mirage.inspect.export import ExportError, export_runs
    except ImportError as exc:
        raise fail(f"Inspect is not installed ({exc.name}): {INSPECT_EXTRA}") from exc
    try:
        written = export_runs(runs, to)
    except ExportError as exc:
        raise fail(str(exc)) from exc
    for path in written:
        typer.echo(f"wrote {path}")


export_app.command("inspect")(inspect_logs)


def register(app: typer.Typer) -> None:
    app.add_typer(export_app)
