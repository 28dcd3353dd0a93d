"""``mirage run``: the MIRAGE protocol end to end on the embedded defaults or given models."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError
from rich.progress import ProgressColumn, Task
from rich.text import Text

from harness.mirage.config import RunConfig, flag_of
from harness.mirage.probing.records import ProbeRecord
from mirage.cli import run_options as ro
from mirage.cli.options import EXIT_FAILURE, EXIT_INTERRUPTED, fail

if TYPE_CHECKING:
    from harness.mirage.report import ReportFiles

PLAIN_PROGRESS_INTERVAL_S = 5.0
PLAIN_PROGRESS_HEARTBEAT_S = 60.0


@dataclass
class _Phase:
    description: str
    total: float | None
    started: float
    completed: float = 0.0
    last_line: float = field(default=float("-inf"))
    shown: float | None = None  # ``completed`` as of the last line

    @property
    def finished(self) -> bool:
        return self.total is not None and self.completed >= self.total


class _LineConsole:
    """The part of rich's ``Console`` the run prints its notes with, as plain lines."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write

    def print(self, text: str, **_style: object) -> None:
        self._write(text)


class PlainProgress:
    """Progress as plain lines for a log file (``mirage run > run.log 2>&1``), where rich's
    live display, which draws only on a terminal, shows nothing. The subset of rich's
    ``Progress`` that ``MirageRun`` calls; a line when a phase starts and ends, and at most
    every ``interval_s`` seconds in between, with done/total and an ETA from the phase's rate;
    while a phase does not move (one long trunk turn), a line every ``heartbeat_s``; the run's
    notes (``console.print``) as lines of their own."""

    def __init__(
        self,
        write: Callable[[str], None],
        *,
        interval_s: float = PLAIN_PROGRESS_INTERVAL_S,
        heartbeat_s: float = PLAIN_PROGRESS_HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self._interval_s = interval_s
        self._heartbeat_s = heartbeat_s
        self._clock = clock
        self._run_started = clock()
        self._phases: list[_Phase] = []
        self._lock = threading.Lock()  # updates come from the run, heartbeats from a thread
        self._stopped = threading.Event()
        self._beats = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)
        self.console = _LineConsole(self._note)

    def _note(self, line: str) -> None:
        with self._lock:
            self._write(line)

    def __enter__(self) -> PlainProgress:
        self._beats.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stopped.set()
        self._beats.join()
        with self._lock:
            self._flush()

    def _beat(self) -> None:
        while not self._stopped.wait(self._heartbeat_s):
            self.heartbeat()

    def heartbeat(self) -> None:
        """A line for the running phase when it printed nothing for ``heartbeat_s``."""
        with self._lock:
            running = [phase for phase in self._phases if not phase.finished]
            if running and self._clock() - running[-1].last_line >= self._heartbeat_s:
                self._emit(running[-1], force=True)

    def _flush(self) -> None:
        """The latest state of phases that moved since their last line (a phase may end short
        of its total: the trunk stops at its last state, not at the window)."""
        for phase in self._phases:
            if phase.shown != phase.completed and not phase.finished:
                self._emit(phase, force=True)

    def add_task(self, description: str, total: float | None = None) -> int:
        with self._lock:
            self._flush()
            self._phases.append(_Phase(description, total, started=self._clock()))
            self._emit(self._phases[-1], force=True)
            return len(self._phases) - 1

    def update(
        self,
        task_id: int,
        *,
        completed: float | None = None,
        advance: float | None = None,
        description: str | None = None,
        total: float | None = None,
    ) -> None:
        with self._lock:
            phase = self._phases[task_id]
            was_finished = phase.finished
            phase.total = phase.total if total is None else total
            if completed is not None:
                phase.completed = completed
            phase.completed += advance or 0.0
            phase.description = description or phase.description
            self._emit(phase, force=phase.finished and not was_finished)

    def advance(self, task_id: int, advance: float = 1.0) -> None:
        self.update(task_id, advance=advance)

    def _emit(self, phase: _Phase, *, force: bool) -> None:
        now = self._clock()
        if not force and now - phase.last_line < self._interval_s:
            return
        phase.last_line, phase.shown = now, phase.completed
        self._write(f"[{_clock_text(now - self._run_started)}] {_phase_text(phase, now)}")


def _phase_text(phase: _Phase, now: float) -> str:
    if phase.total is None:
        return f"{phase.description}: {phase.completed:.0f} done"
    done, total = phase.completed, phase.total
    text = f"{phase.description}: {done:.0f}/{total:.0f} ({100 * done / max(total, 1):.0f}%)"
    if done >= total:
        return f"{text}, done in {_clock_text(now - phase.started)}"
    remaining = eta_seconds(now - phase.started, done, total)
    return text if remaining is None else f"{text}, ETA {_clock_text(remaining)}"


def eta_seconds(elapsed: float, done: float, total: float | None) -> float | None:
    """Time left at the rate so far (None before anything is done, or with no total)."""
    if total is None or done <= 0 or done >= total:
        return None
    return elapsed * (total - done) / done


class EtaColumn(ProgressColumn):
    """The time left at the task's rate since it started, as the plain lines say it (rich's
    own column averages the last 30 s: nothing for a compaction chunk that takes a minute)."""

    def render(self, task: Task) -> Text:
        remaining = eta_seconds(task.elapsed or 0.0, task.completed, task.total)
        shown = "" if remaining is None else f"ETA {_clock_text(remaining)}"
        return Text(shown, style="progress.remaining")


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def run(
    ctx: typer.Context,
    study: ro.Study = None,
    dry_run: ro.DryRun = False,
    **_options: Any,
) -> None:
    """Run MIRAGE end to end: workspace, trunk and checkpoints, probes under each condition on
    fresh restores, scoring and the report. With no options: the bundled pack on the embedded
    SmolLM2 model and the three reference agents, 12 questions (6 pairs) under C0 and Cm, and a
    comparison that opens with what the rows show; --limit 0 uses every question. With --study
    FILE: the run that file writes down, the flags given here overriding it."""
    config = _config(study, ro.given_options(ctx))  # the run options, read by field through ctx
    if dry_run:
        typer.echo(_plan(config))
        return
    started = time.perf_counter()
    with progress_display() as progress:
        reports = _execute(config, progress)
    _print_reports(reports, config)
    typer.echo(f"\nfinished in {time.perf_counter() - started:.0f} s; results in {config.out}")
    exit_on_failed_probes([files.report.parent for files in reports])


def _print_reports(reports: list[ReportFiles], config: RunConfig) -> None:
    """Table 1 of each result folder and, with several, the comparison of them."""
    for files in reports:
        _print_report(files, config)
    if len(reports) > 1:
        from harness.kit.results import read_records
        from harness.mirage.report.compare import write_comparison

        folders = [files.report.parent for files in reports]
        answerers = {f: read_records(f, ProbeRecord) for f in folders}
        compared = write_comparison(answerers, config.out, allow_incomparable=True)  # marked
        if compared.comparison.overview:
            typer.echo("\n" + compared.comparison.overview)
        typer.echo(
            f"\ncomparison of {len(folders)} answerers: {compared.markdown} (full tables: "
            f"{compared.appendix.name}; in a browser: {compared.html.name})"
        )


def exit_on_failed_probes(folders: list[Path]) -> None:
    """Name the failed probes (provider and agent errors) of each folder on stderr and exit 1
    while any remain."""
    from harness.mirage.probing.retry import failures_line, folder_failures

    counted = [(folder, folder_failures(folder)) for folder in folders]
    failed = [(folder, summary) for folder, summary in counted if summary.total]
    total = sum(summary.total for _, summary in failed)
    typer.echo(f"failed probes (provider/agent errors): {total}")
    for folder, summary in failed:
        typer.echo(f"error: {failures_line(folder, summary)}", err=True)
    if failed:
        raise typer.Exit(code=EXIT_FAILURE)


def _print_report(files: ReportFiles, config: RunConfig) -> None:
    """Table 1 of one result folder, its attribution summary (``--agent``) and where the report
    is."""
    from harness.mirage.report.tables import table1
    from harness.mirage.strategies import strategy_for

    folder = files.report.parent
    typer.echo(f"\n## {folder.name} (scoring {config.scoring})\n")
    typer.echo(table1(files.aggregate))
    for line in files.flagged:
        typer.echo(f"flagged: {line}")
    if strategy_for(config).kind.attributed:
        from harness.mirage.report.attribution import (
            ATTRIBUTION_FILE,
            AttributionSummary,
            summary_text,
        )

        attribution = (folder / ATTRIBUTION_FILE).read_text()
        typer.echo("\n" + summary_text(AttributionSummary.model_validate_json(attribution)))
    typer.echo(f"\nreport: {files.report}")


def progress_display() -> Any:
    """Rich's live bars on a terminal; plain lines on stderr when it is a file or a pipe."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        return PlainProgress(lambda line: typer.echo(line, err=True))
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        EtaColumn(),
    )
    return Progress(*columns, console=console)


def _config(study: Path | None, given: dict[str, Any]) -> RunConfig:
    """The validated run configuration: ``RunConfig``'s defaults, then the study file's keys,
    then the flags given; a bad file, key or option — or an output folder that cannot be one —
    is one ``error:`` line and exit 2, before any work starts."""
    from harness.kit.paths import folder_problem
    from harness.mirage.study import StudyError, read_study

    try:
        from_file = read_study(study) if study is not None else {}
    except StudyError as exc:
        raise fail(str(exc)) from exc
    fields = {**from_file, **given}
    try:
        config = RunConfig(**fields)
    except ValidationError as exc:
        problems = (_problem(error, from_file, given, study) for error in exc.errors())
        raise fail("; ".join(problems)) from exc
    out_problem = folder_problem(config.out)
    if out_problem is not None:
        error = {"msg": out_problem, "loc": ("out",)}
        raise fail(_problem(error, from_file, given, study))
    return config


def _problem(
    error: Any, from_file: dict[str, Any], given: dict[str, Any], study: Path | None
) -> str:
    """One validation problem, naming the study key or the flag it came from."""
    message = str(error["msg"]).removeprefix("Value error, ")
    field = str(error["loc"][0]) if error["loc"] else None
    if field is None or field in given or field not in from_file:
        return f"{flag_of(field)}: {message}" if field else message
    return f"{study}: {field}: {message}"


def _plan(config: RunConfig) -> str:
    from harness.mirage.run import MirageRun, RunInputError
    from harness.mirage.run.plan import plan_run, plan_text
    from harness.mirage.trunk.runner import TrunkError

    try:
        return plan_text(plan_run(MirageRun(config)))
    except (RunInputError, TrunkError, ValueError) as exc:
        raise fail(str(exc)) from exc


def _execute(
    config: RunConfig, progress: Any, backbones: dict[str, Any] | None = None
) -> list[ReportFiles]:
    """Run every stage; the report of each result folder. ``backbones``: ready backbones by
    model string (a test driver's)."""
    from harness.kit.diskfull import disk_full
    from harness.mirage.run import MirageRun

    mirage_run = None
    try:
        mirage_run = MirageRun(config, progress, backbones)
        asyncio.run(mirage_run.execute())
        return mirage_run.reports
    except KeyboardInterrupt as exc:  # Ctrl-C: what is kept, and how to go on, in one line
        typer.echo(_interrupted_line(mirage_run, config), err=True)
        raise typer.Exit(code=EXIT_INTERRUPTED) from exc
    except Exception as exc:
        full = disk_full(exc, config.out)  # first: the layers above may have wrapped it
        if full is not None:
            raise fail(full.message(), EXIT_FAILURE) from exc
        _known_failure(exc)
        raise


def _interrupted_line(mirage_run: Any, config: RunConfig) -> str:
    if mirage_run is None:
        return f"interrupted: nothing written to {config.out} yet; run the same command to start"
    try:
        kept, planned = mirage_run.probing.tally()
    except (OSError, ValueError, RuntimeError):  # a log it cannot read: the resume says
        return f"interrupted: probes kept in {config.out}; run the same command to resume"
    return (
        f"interrupted: {kept} of {planned} probes kept in {config.out}; run the same command "
        "to resume"
    )


def _known_failure(exc: Exception) -> None:
    """Raise the one-line exit of a failure the command knows; return for any other."""
    from harness.kit.agents.base import AgentFailure
    from harness.kit.attribution import AttributionError
    from harness.mirage.run import ResumeError, RunInputError
    from runtime.backbones.base import ProviderError

    if isinstance(exc, AttributionError | ResumeError | RunInputError):
        raise fail(str(exc)) from exc
    if isinstance(exc, AgentFailure):
        raise fail(str(exc), EXIT_FAILURE) from exc
    if isinstance(exc, ProviderError):  # outside a probe (the trunk, compaction): the run stops
        message = f"{exc.detail}; results so far are kept, re-run to resume"
        raise fail(message, EXIT_FAILURE) from exc


def register(app: typer.Typer) -> None:
    app.command("run")(ro.with_run_options(run))  # RunConfig's declared options as parameters
