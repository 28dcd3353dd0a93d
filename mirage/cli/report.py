"""``mirage rescore`` and ``mirage report``: recompute and report a run's results.

Above: the ``mirage`` root (``mirage.cli``), which calls ``register(app)``. Below: records,
scoring and the report writer, imported inside the commands so the CLI stays light to import.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from harness.records import ProbeRecord
    from harness.scoring import ScoringProfile

DirArgument = Annotated[
    Path,
    typer.Argument(help="Run directory holding results.jsonl.", exists=True, file_okay=False),
]
WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="Workspace whose manifest canonicalises SOURCE answers (default: the one the run "
        "used, found through DIR/workspace-link.json, DIR/workspace or ../workspace).",
    ),
]
ScoringOption = Annotated[
    str,
    typer.Option(
        "--scoring",
        help="Scoring profile: paper (the authors' released scorer) or lenient (docs/metrics.md)",
    ),
]


def _profile(name: str) -> ScoringProfile:
    from harness.scoring import get_profile

    try:
        return get_profile(name)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _bad_file(exc: Exception) -> typer.Exit:
    """A corrupt or busy results file: one line on stderr, exit 1 (not a usage error)."""
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code=1)


def _read(directory: Path) -> list[ProbeRecord]:
    from harness.records import RESULTS_FILE, ResultsLogError, read_records

    try:
        return read_records(directory / RESULTS_FILE)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc)) from exc
    except ResultsLogError as exc:
        raise _bad_file(exc) from exc


def _rescored(
    directory: Path, records: list[ProbeRecord], profile: ScoringProfile, workspace: Path | None
) -> list[ProbeRecord]:
    from harness.records import rescore_record
    from harness.rundir import WorkspaceNotFoundError, source_resolver_for

    try:
        resolver = source_resolver_for(directory, profile, workspace)
        return [rescore_record(r, resolver, profile) for r in records]
    except (WorkspaceNotFoundError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from exc


def rescore(
    directory: DirArgument, workspace: WorkspaceOption = None, scoring: ScoringOption = "paper"
) -> None:
    """Recompute the indicators in DIR/results.jsonl from raw outputs under a scoring profile,
    canonicalising SOURCE with the run's workspace (an error when it cannot be found)."""
    from harness.records import RESULTS_FILE, ResultsLogError, rewrite_records

    profile = _profile(scoring)
    records = _read(directory)
    rescored = _rescored(directory, records, profile, workspace)
    changed = sum(old != new for old, new in zip(records, rescored, strict=True))
    path = directory / RESULTS_FILE
    try:
        rewrite_records(path, rescored)
    except ResultsLogError as exc:
        raise _bad_file(exc) from exc
    typer.echo(
        f"rescored {len(rescored)} records in {path} under scoring {profile.name}; "
        f"{changed} changed"
    )


def report(
    directory: DirArgument, scoring: ScoringOption = "paper", workspace: WorkspaceOption = None
) -> None:
    """Write summary.json, details.json, report.md and figures/ for DIR; print Tables 1-2.

    Records scored under another profile are rescored in memory for the report (results.jsonl
    is left as it is; ``mirage rescore`` rewrites it)."""
    from harness.aggregate import MixedProfilesError
    from harness.report import write_report
    from harness.report.tables import table1, table2

    profile = _profile(scoring)
    records = _read(directory)
    note = None
    recorded = sorted({record.scoring for record in records})
    if recorded != [profile.name]:
        try:
            records = _rescored(directory, records, profile, workspace)
        except typer.BadParameter as exc:
            hint = f"; or report them as scored: --scoring {recorded[0]}" if recorded else ""
            raise typer.BadParameter(f"{exc.message}{hint}") from exc
        note = (
            f"results.jsonl holds records of another scoring profile; this report rescored "
            f"them in memory under {profile.name} (mirage rescore DIR --scoring "
            f"{profile.name} rewrites the file)."
        )
        typer.echo(note, err=True)
    try:
        files = write_report(directory, records, note=note)
    except MixedProfilesError as exc:
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(table1(files.aggregate))
    typer.echo("")
    typer.echo(table2(files.aggregate))
    typer.echo(
        f"\nscoring {profile.name}; wrote {files.summary}, {files.details}, {files.report}, "
        f"{len(files.figures)} figures"
    )


def register(app: typer.Typer) -> None:
    app.command("rescore")(rescore)
    app.command("report")(report)
