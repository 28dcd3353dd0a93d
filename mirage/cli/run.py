"""``mirage run``: the MIRAGE protocol end to end on the embedded defaults or given models."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from harness.mirage.checkpoints import SCRIPTED_TRUNK_MODEL
from harness.mirage.config import RunConfig
from harness.mirage.records import ProbeRecord
from mirage.cli.options import EXIT_FAILURE, EXIT_INTERRUPTED, MODEL, OUT, SUMMARY_FORMAT, fail

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


class PlainProgress:
    """Progress as plain lines for a log file (``mirage run > run.log 2>&1``), where rich's
    live display, which draws only on a terminal, shows nothing. The subset of rich's
    ``Progress`` that ``MirageRun`` calls; a line when a phase starts and ends, and at most
    every ``interval_s`` seconds in between, with done/total and an ETA from the phase's rate;
    while a phase does not move (one long trunk turn), a line every ``heartbeat_s``."""

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
    ) -> None:
        with self._lock:
            phase = self._phases[task_id]
            was_finished = phase.finished
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
    if done > 0:
        remaining = (now - phase.started) * (total - done) / done
        return f"{text}, ETA {_clock_text(remaining)}"
    return text


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _conditions(value: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    unknown = [item for item in items if item not in {"C0", "Cm"}]
    if not items or unknown:
        raise typer.BadParameter(f"conditions must be a comma list of C0 and Cm, got {value!r}")
    return items


DEFAULTS = RunConfig.model_construct()
"""``RunConfig``'s defaults (unvalidated, nothing else set): the API and the command share them."""


def run(
    pack: Annotated[str, typer.Option(help="Bundled pack name or pack folder")] = DEFAULTS.pack,
    model: Annotated[
        list[str] | None,
        typer.Option(
            *MODEL,
            help="Answerer model (repeatable); default the embedded SmolLM2. "
            "reference/retriever, reference/context-reader and reference/confabulator are "
            "reference agents with known grounding behaviour (docs/references.md)",
        ),
    ] = None,
    references: Annotated[
        bool | None,
        typer.Option(
            "--references/--no-references",
            help="Also run the three reference agents (seconds; their rows and the instrument "
            "check open the comparison); default: on when no --model is given",
            show_default=False,
        ),
    ] = None,
    trunk_model: Annotated[
        str,
        typer.Option(
            help=f"Model that plays the trunk; '{SCRIPTED_TRUNK_MODEL}' replays fixed replies"
        ),
    ] = DEFAULTS.trunk_model,
    summarizer: Annotated[
        str | None, typer.Option(help="Compaction summarizer model (default: the trunk model)")
    ] = None,
    profile: Annotated[str, typer.Option(help="Depth profile: paper or scaled")] = DEFAULTS.profile,
    scoring: Annotated[
        str,
        typer.Option(
            help="Probe wording and scoring rules: paper (the authors' released scorer) or "
            "lenient (tolerant; docs/metrics.md)"
        ),
    ] = DEFAULTS.scoring,
    conditions: Annotated[str, typer.Option(help="Comma list of C0, Cm")] = ",".join(
        DEFAULTS.conditions
    ),
    repeats: Annotated[
        int, typer.Option(min=1, help="Independent repeats per probe")
    ] = DEFAULTS.repeats,
    limit: Annotated[
        int,
        typer.Option(
            min=0,
            help="Questions to use, as whole answerable/unanswerable pairs "
            "spread over the evidence objects; 0 = every question",
        ),
    ] = DEFAULTS.limit or 0,
    summary_format: Annotated[
        str,
        typer.Option(
            *SUMMARY_FORMAT,
            help="Compaction summary format (verbatim, free-form, per-fact-citations, "
            "template:FILE), or a comma list of them: the trunk is built once and every format "
            "after the first adds the state S2@<format>, branched from the same state right "
            "before the first compaction (docs/compaction.md)",
        ),
    ] = ",".join(DEFAULTS.summary_formats),
    calibration: Annotated[
        bool | None,
        typer.Option(
            "--calibration/--no-calibration",
            help="Also branch the compaction calibration arms from the pre-compaction state: "
            "summary formats written by reference summarizers with declared retention "
            "(S2@verbatim~reference-keep-charts, …; docs/references.md), probed by the "
            "reference agents only; default: on when the reference agents run",
            show_default=False,
        ),
    ] = None,
    memory_flush: Annotated[
        bool, typer.Option(help="Pre-compaction memory flush")
    ] = DEFAULTS.memory_flush,
    seed: Annotated[int, typer.Option(help="Filler sampling seed")] = DEFAULTS.seed,
    out: Annotated[
        Path, typer.Option(*OUT, help="Output folder (re-run to resume)")
    ] = DEFAULTS.out,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Probes in flight at once")
    ] = DEFAULTS.concurrency,
    adapters: Annotated[bool, typer.Option(help="Pseudo-tool adapters on")] = DEFAULTS.adapters,
    api_base: Annotated[
        str | None, typer.Option(help="Base URL for non-local models (OpenAI-compatible)")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="Evaluate an agent we did not write instead of --model: "
            "openai:http://HOST:PORT/v1 (an OpenAI-compatible endpoint), cmd:PATH (one JSON "
            "request on stdin, one JSON reply on stdout; docs/own_agent.md) or openclaw (the "
            "installed OpenClaw, answering with the first --model; docs/openclaw.md)",
        ),
    ] = None,
    agent_model: Annotated[
        str | None, typer.Option(help="Model name sent to an openai: agent (also the folder)")
    ] = None,
    agent_api_key: Annotated[
        str | None,
        typer.Option(help="Bearer key for an openai: agent", envvar="MIRAGE_AGENT_API_KEY"),
    ] = None,
    agent_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds an agent may take for one probe")
    ] = DEFAULTS.agent_timeout_s,
    memory_url: Annotated[
        str | None,
        typer.Option(
            help="Serve the memory server here for the agent (http://HOST:PORT/mcp); each probe "
            "also gets its own URL .../t/<tag>/mcp, sent as header X-Mirage-Memory-Url",
        ),
    ] = None,
    memory_token: Annotated[
        str | None,
        typer.Option(
            help="Bearer token the memory server requires (needed off loopback)",
            envvar="MIRAGE_MEMORY_TOKEN",
        ),
    ] = None,
    openclaw_config: Annotated[
        Path | None,
        typer.Option(
            help="With --agent openclaw: your OpenClaw settings (JSON5, as openclaw.json), "
            "merged over the generated config and checked by `openclaw config validate`",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="Run only shard K of N (K/N) of the study's probes, e.g. on N machines with the "
            "same flags and their own --out; `mirage merge` joins them (docs/running.md)",
        ),
    ] = None,
    retry_errors: Annotated[
        bool,
        typer.Option(
            help="Re-run exactly the probes recorded with a provider or agent error (same flags "
            "otherwise), replacing their records atomically; nothing else runs",
        ),
    ] = DEFAULTS.retry_errors,
    dry_run: Annotated[
        bool,
        typer.Option(
            help="Plan only: probes, input tokens per state (from existing checkpoints, else "
            "estimated from the pack and the profile), output budget and cost with and "
            "without prompt caching (litellm's local price map); builds and writes nothing",
        ),
    ] = False,
) -> None:
    """Run MIRAGE end to end: workspace, trunk and checkpoints, probes under each condition on
    fresh restores, scoring and the report. With no options: the bundled pack on the embedded
    SmolLM2 model and the three reference agents, 12 questions (6 pairs) under C0 and Cm, and a
    comparison that opens with what the rows show; --limit 0 uses every question."""
    given = {"models": model} if model else {}  # unset: the default, with the references
    config = _config(
        **given,
        references=references,
        pack=pack,
        trunk_model=trunk_model,
        summarizer_model=summarizer,
        profile=profile,
        scoring=scoring,
        conditions=_conditions(conditions),
        repeats=repeats,
        limit=limit or None,
        summary_formats=summary_format,
        calibration=calibration,
        memory_flush=memory_flush,
        seed=seed,
        out=out,
        concurrency=concurrency,
        adapters=adapters,
        api_base=api_base,
        agent=agent,
        agent_model=agent_model,
        agent_api_key=agent_api_key,
        agent_timeout_s=agent_timeout,
        memory_url=memory_url,
        memory_token=memory_token,
        openclaw_config=openclaw_config,
        shard=shard,
        retry_errors=retry_errors,
    )
    if dry_run:
        typer.echo(_plan(config))
        return
    started = time.perf_counter()
    with progress_display() as progress:
        reports = _execute(config, progress)
    for files in reports:
        _print_report(files, config)
    if len(reports) > 1:
        from harness.kit.results import read_records
        from harness.mirage.report.compare import write_comparison

        folders = [files.report.parent for files in reports]
        answerers = {f: read_records(f, ProbeRecord) for f in folders}
        compared = write_comparison(answerers, out, allow_incomparable=True)  # marked, not lost
        if compared.comparison.overview:
            typer.echo("\n" + compared.comparison.overview)
        typer.echo(f"\ncomparison of {len(folders)} answerers: {compared.markdown}")
    typer.echo(f"\nfinished in {time.perf_counter() - started:.0f} s; results in {out}")
    exit_on_failed_probes([files.report.parent for files in reports])


def exit_on_failed_probes(folders: list[Path]) -> None:
    """Name the failed probes (provider and agent errors) of each folder on stderr and exit 1
    while any remain."""
    from harness.mirage.retry import failures_line, folder_failures

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
    if strategy_for(config).attributed:
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
    )
    return Progress(*columns, console=console)


def _config(**fields: Any) -> RunConfig:
    """The validated run configuration; a bad option is one ``error:`` line and exit 2, before
    any work starts."""
    try:
        return RunConfig(**fields)
    except ValidationError as exc:
        problems = "; ".join(error["msg"].removeprefix("Value error, ") for error in exc.errors())
        raise fail(problems) from exc


def _plan(config: RunConfig) -> str:
    from harness.mirage.plan import plan_run, plan_text
    from harness.mirage.run import MirageRun, RunInputError
    from harness.mirage.trunk import TrunkError

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
        kept, planned = mirage_run.probe_tally()
    except (OSError, ValueError, RuntimeError):  # a log it cannot read: the resume says
        return f"interrupted: probes kept in {config.out}; run the same command to resume"
    return (
        f"interrupted: {kept} of {planned} probes kept in {config.out}; run the same command "
        "to resume"
    )


def _known_failure(exc: Exception) -> None:
    """Raise the one-line exit of a failure the command knows; return for any other."""
    from harness.kit.agents.openclaw.errors import OpenClawError
    from harness.kit.attribution import AttributionError
    from harness.mirage.run import ResumeError, RunInputError
    from runtime.backbones.base import ProviderError

    if isinstance(exc, AttributionError | ResumeError | RunInputError):
        raise fail(str(exc)) from exc
    if isinstance(exc, OpenClawError):
        raise fail(str(exc), EXIT_FAILURE) from exc
    if isinstance(exc, ProviderError):  # outside a probe (the trunk, compaction): the run stops
        message = f"{exc.detail}; results so far are kept, re-run to resume"
        raise fail(message, EXIT_FAILURE) from exc


def register(app: typer.Typer) -> None:
    app.command("run")(run)
