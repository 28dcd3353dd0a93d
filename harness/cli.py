"""``mirage rescore``, ``mirage report`` and ``mirage run`` (harness commands).

Above: the ``mirage`` typer root, which calls ``register(app)``. Below: records, scoring and the
report writer, imported inside the commands so the CLI stays light to import. ``run`` comes from
the runner's own CLI module (``harness.run_cli``), hooked in by ``register_run``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from harness.scoring import SourceResolver

DirArgument = Annotated[
    Path,
    typer.Argument(help="Run directory holding results.jsonl.", exists=True, file_okay=False),
]
WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="Workspace whose manifest canonicalises SOURCE answers (default: DIR/workspace "
        "if present, else DIR/sources.json, else the gold artifact ids of the records).",
    ),
]


def _source_resolver(
    directory: Path, workspace: Path | None, gold_ids: list[str]
) -> SourceResolver:
    from harness.scoring import ChainResolver, KnownIdResolver, MappingResolver

    resolvers: list[SourceResolver] = []
    workspace_dir = workspace or (directory / "workspace")
    if workspace is not None or workspace_dir.is_dir():
        from memory_server.workspace import Workspace

        resolvers.append(Workspace.open(workspace_dir))
    sources = directory / "sources.json"
    if sources.is_file():
        table = json.loads(sources.read_text(encoding="utf-8"))
        if not isinstance(table, dict):
            raise typer.BadParameter(f"{sources} must map references to artifact ids")
        resolvers.append(MappingResolver({str(k): str(v) for k, v in table.items()}))
    resolvers.append(KnownIdResolver(gold_ids))
    return ChainResolver(*resolvers)


def _bad_file(exc: Exception) -> typer.Exit:
    """A corrupt or busy results file: one line on stderr, exit 1 (not a usage error)."""
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code=1)


def rescore(directory: DirArgument, workspace: WorkspaceOption = None) -> None:
    """Recompute the indicators in DIR/results.jsonl from raw outputs with the current scorer."""
    from harness.records import (
        RESULTS_FILE,
        ResultsLogError,
        read_records,
        rescore_record,
        rewrite_records,
    )

    path = directory / RESULTS_FILE
    try:
        records = read_records(path)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc)) from exc
    except ResultsLogError as exc:
        raise _bad_file(exc) from exc
    gold_ids = sorted({r.gold.source for r in records if r.gold and r.gold.source})
    resolver = _source_resolver(directory, workspace, gold_ids)
    try:
        rescored = [rescore_record(r, resolver) for r in records]
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    changed = sum(old != new for old, new in zip(records, rescored, strict=True))
    try:
        rewrite_records(path, rescored)
    except ResultsLogError as exc:
        raise _bad_file(exc) from exc
    typer.echo(f"rescored {len(rescored)} records in {path}; {changed} changed")


def report(directory: DirArgument) -> None:
    """Write summary.json, details.json, report.md and figures/ for DIR; print Tables 1-2."""
    from harness.records import ResultsLogError
    from harness.report import write_report
    from harness.report.tables import table1, table2

    try:
        files = write_report(directory)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc)) from exc
    except ResultsLogError as exc:
        raise _bad_file(exc) from exc
    typer.echo(table1(files.aggregate))
    typer.echo("")
    typer.echo(table2(files.aggregate))
    typer.echo(
        f"\nwrote {files.summary}, {files.details}, {files.report}, {len(files.figures)} figures"
    )


def register_run(app: typer.Typer) -> None:
    from harness.run_cli import register as register_runner

    register_runner(app)


def register(app: typer.Typer) -> None:
    app.command("rescore")(rescore)
    app.command("report")(report)
    register_run(app)
