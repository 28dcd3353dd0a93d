"""``mirage rescore``, ``mirage report`` and ``mirage view``: recompute, report, compare and
look at a run's results (``view`` serves ``report.html`` on loopback, ``view_server``).

Above: the ``mirage`` root (``mirage.cli``), which calls ``register(app)``. Below: records,
scoring and the report writer, imported inside the commands so the CLI stays light to import.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mirage.cli.options import WORKSPACE, fail, folder_to_write

if TYPE_CHECKING:
    from harness.mirage.probing.records import ProbeRecord
    from harness.mirage.report import ReportFiles
    from harness.mirage.scoring import ScoringProfile

DirArgument = Annotated[
    Path,
    typer.Argument(help="Run directory holding results.jsonl.", exists=True, file_okay=False),
]
WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        *WORKSPACE,
        help="Workspace whose manifest canonicalises SOURCE answers (default: the one the run "
        "used, found through DIR/workspace-link.json, DIR/workspace or ../workspace).",
        exists=True,
        file_okay=False,
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
    from harness.mirage.scoring import get_profile

    try:
        return get_profile(name)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _bad_file(exc: Exception) -> typer.Exit:
    """A corrupt or busy results file: one line on stderr, exit 2 (bad input)."""
    return fail(str(exc))


def _read(directory: Path) -> list[ProbeRecord]:
    from harness.kit.results import RESULTS_FILE, ResultsLogError, read_records
    from harness.mirage.probing.records import ProbeRecord

    try:
        return read_records(directory / RESULTS_FILE, ProbeRecord)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc)) from exc
    except ResultsLogError as exc:
        raise _bad_file(exc) from exc


def _rescored(
    directory: Path, records: list[ProbeRecord], profile: ScoringProfile, workspace: Path | None
) -> list[ProbeRecord]:
    from harness.kit.rundir import WorkspaceNotFoundError
    from harness.mirage.probing.records import rescore_record
    from harness.mirage.probing.repath import checkpoint_roots
    from harness.mirage.scoring.profiles import source_resolvers_for
    from harness.mirage.trunk.checkpoints import workspace_versions

    try:
        resolver_at = source_resolvers_for(directory, profile, workspace)
        versions = workspace_versions(checkpoint_roots(directory))
        return [
            rescore_record(r, resolver_at(versions.get(r.checkpoint_sha256 or "")), profile)
            for r in records
        ]
    except (WorkspaceNotFoundError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from exc


def rescore(
    directory: DirArgument, workspace: WorkspaceOption = None, scoring: ScoringOption = "paper"
) -> None:
    """Recompute the indicators in DIR/results.jsonl from raw outputs under a scoring profile,
    canonicalising SOURCE with the run's workspace at the version each record's checkpoint names
    (an error when the workspace cannot be found); an older record's two-way retrieval path
    becomes the four-way one, recomputed from its checkpoint when that is still there
    (path_source checkpoint), else kept and marked binary."""
    from harness.kit.results import RESULTS_FILE, ResultsLogError, rewrite_records
    from harness.mirage.probing.repath import upgrade_paths

    profile = _profile(scoring)
    records = _read(directory)
    rescored, paths = upgrade_paths(directory, _rescored(directory, records, profile, workspace))
    changed = sum(old != new for old, new in zip(records, rescored, strict=True))
    path = directory / RESULTS_FILE
    try:
        rewrite_records(path, rescored)
    except ResultsLogError as exc:
        raise _bad_file(exc) from exc
    typer.echo(
        f"rescored {len(rescored)} records in {path} under scoring {profile.name}; "
        f"{changed} changed" + "".join(f"; {n} path(s) {how}" for how, n in sorted(paths.items()))
    )


DirsArgument = Annotated[
    list[Path],
    typer.Argument(
        help="Run directories holding results.jsonl, or a run folder with one sub-folder per "
        "answerer; several answerers are also compared side by side.",
        exists=True,
        file_okay=False,
    ),
]
CompareOutOption = Annotated[
    Path | None,
    typer.Option(
        "--compare-out",
        help="Where comparison.md/.json and comparison-figures/ go (default: DIR for one "
        "multi-answerer run, else the folder the DIRs share).",
        callback=folder_to_write,
    ),
]
AllowIncomparableOption = Annotated[
    bool,
    typer.Option(
        "--allow-incomparable",
        help="Compare runs that differ in pack, profile, scoring or depth, marked NOT "
        "COMPARABLE (refused otherwise).",
    ),
]


def _report_one(
    directory: Path, profile: ScoringProfile, workspace: Path | None
) -> tuple[list[ProbeRecord], ReportFiles]:
    """Write DIR's report; records of another profile are rescored in memory for it."""
    from harness.kit.rundir import RunFileError
    from harness.mirage.report import write_report
    from harness.mirage.report.aggregate import MixedProfilesError

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
        return records, write_report(directory, records, note=note)
    except MixedProfilesError as exc:
        raise typer.BadParameter(str(exc)) from exc
    except RunFileError as exc:  # a file the report reads back: nothing was written
        raise _bad_file(exc) from exc


def _comparison_folder(directories: list[Path], explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit
    if len(directories) == 1:
        return directories[0]
    return Path(os.path.commonpath([d.resolve() for d in directories]))


def report(
    directories: DirsArgument,
    scoring: ScoringOption = "paper",
    workspace: WorkspaceOption = None,
    compare_out: CompareOutOption = None,
    allow_incomparable: AllowIncomparableOption = False,
) -> None:
    """Write summary.json, details.json, report.md, report.html and figures/ for each DIR; print
    Tables 1-2.

    Records scored under another profile are rescored in memory for the report (results.jsonl
    is left as it is; ``mirage rescore`` rewrites it). With several answerers (a run folder of
    several models, or several DIRs) also write comparison.md, comparison.json and
    comparison.html."""
    from harness.mirage.report.compare import (
        ComparisonInputError,
        NotComparableError,
        result_dirs,
        write_comparison,
    )
    from harness.mirage.report.tables import table1, table2

    profile = _profile(scoring)
    try:
        folders = result_dirs(directories)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc)) from exc
    answerers = {}
    for folder in folders:
        records, files = _report_one(folder, profile, workspace)
        answerers[folder] = records
        if len(folders) == 1:
            typer.echo(table1(files.aggregate))
            typer.echo("")
            typer.echo(table2(files.aggregate))
        typer.echo(
            f"\nscoring {profile.name}; wrote {files.summary}, {files.details}, {files.report}, "
            f"{len(files.figures)} figures"
        )
    if len(folders) > 1:
        out = _comparison_folder(directories, compare_out)
        try:
            compared = write_comparison(answerers, out, allow_incomparable=allow_incomparable)
        except NotComparableError as exc:
            raise typer.BadParameter(str(exc)) from exc
        except ComparisonInputError as exc:
            raise _bad_file(exc) from exc
        typer.echo(
            f"wrote {compared.markdown}, {compared.appendix.name}, {compared.html.name} and "
            f"{compared.data.name} ({len(folders)} answerers)"
        )


def _page(directory: Path) -> Path:
    """DIR's comparison.html or report.html, written first from results.jsonl if missing."""
    from harness.mirage.report.compare import COMPARISON_HTML
    from harness.mirage.report.html import HTML_FILE

    for name in (COMPARISON_HTML, HTML_FILE):
        if (directory / name).is_file():
            return directory / name
    from harness.kit.results import RESULTS_FILE
    from harness.mirage.report import write_report

    if not (directory / RESULTS_FILE).is_file():
        raise typer.BadParameter(f"no {HTML_FILE} in {directory}: run mirage report {directory}")

    from harness.kit.rundir import RunFileError

    try:
        return write_report(directory, _read(directory)).html
    except RunFileError as exc:
        raise _bad_file(exc) from exc


def view(
    directory: DirArgument,
    port: Annotated[int, typer.Option("--port", min=0, help="Loopback port (0: a free one).")] = 0,
) -> None:
    """Serve DIR's report.html (or comparison.html) on 127.0.0.1 until interrupted: the page
    and the files it references, nothing else of DIR (no listing, no symlink out of it), and
    only to Host 127.0.0.1 or localhost. The page needs no server (it opens from disk too),
    this is for convenience."""
    from mirage.cli.view_server import ReportServer

    page = _page(directory)
    try:
        server = ReportServer(page, port)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    except OSError as exc:
        raise typer.BadParameter(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from exc
    with server:
        url = f"http://127.0.0.1:{server.port}/{page.name}"
        typer.echo(f"serving {url} (Ctrl-C stops)")
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()


def register(app: typer.Typer) -> None:
    app.command("rescore")(rescore)
    app.command("report")(report)
    app.command("view")(view)
