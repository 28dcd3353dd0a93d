"""``mirage merge DIR… --out D``: join the shards of one study (``mirage run --shard K/N``)
into one run folder with its report.

Above: the ``mirage`` root (``mirage.cli``), which calls ``register(app)``. Below:
``harness.mirage.run.shards`` (the checks and the merge) and the report writer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mirage.cli.options import OUT, fail, folder_to_write


def merge(
    shards: Annotated[
        list[Path],
        typer.Argument(
            metavar="DIR...", help="The shards' --out folders", exists=True, file_okay=False
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(*OUT, help="The merged run folder (new or empty)", callback=folder_to_write),
    ],
) -> None:
    """Join the shards of one study (`mirage run --shard K/N`, every K of one N, same flags)
    into one run folder: results, memory-server call logs, workspace, checkpoints and a report
    equal to an unsharded run's. Shards of different studies (pack, depth profile, scoring,
    questions, models, checkpoint hashes, …) are refused with the reason."""
    from harness.kit.results import ResultsLogError
    from harness.kit.rundir import RunFileError
    from harness.mirage.run.shards import MergeError, merge_shards
    from harness.mirage.trunk.checkpoints import CheckpointError
    from mirage.cli.run import exit_on_failed_probes

    try:
        reports = merge_shards(shards, out)
    except (MergeError, ResultsLogError, RunFileError, CheckpointError) as exc:
        raise fail(str(exc)) from exc
    for files in reports:
        typer.echo(f"report: {files.report}")
    if len(reports) > 1:  # several answerers: their comparison, as `mirage run` writes it
        from harness.kit.results import read_records
        from harness.mirage.probing.records import ProbeRecord
        from harness.mirage.report.compare import write_comparison

        folders = [files.report.parent for files in reports]
        answerers = {folder: read_records(folder, ProbeRecord) for folder in folders}
        compared = write_comparison(answerers, out, allow_incomparable=True)
        typer.echo(f"comparison of {len(folders)} answerers: {compared.markdown}")
    typer.echo(f"merged {len(shards)} shards into {out}")
    exit_on_failed_probes([files.report.parent for files in reports])


def register(app: typer.Typer) -> None:
    app.command("merge")(merge)
