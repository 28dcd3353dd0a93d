"""``mirage run``: the MIRAGE protocol end to end on the embedded defaults or given models."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from harness.run import DEFAULT_MODEL, RunConfig


def _conditions(value: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    unknown = [item for item in items if item not in {"C0", "Cm"}]
    if not items or unknown:
        raise typer.BadParameter(f"conditions must be a comma list of C0 and Cm, got {value!r}")
    return items


def run(
    pack: Annotated[str, typer.Option(help="Bundled pack name or pack folder")] = "mirage-core",
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Answerer model (repeatable); default the embedded SmolLM2"),
    ] = None,
    trunk_model: Annotated[
        str, typer.Option(help="Model that plays the trunk; 'scripted' replays fixed replies")
    ] = DEFAULT_MODEL,
    summarizer: Annotated[
        str | None, typer.Option(help="Compaction summarizer model (default: the trunk model)")
    ] = None,
    profile: Annotated[str, typer.Option(help="Depth profile: paper or scaled")] = "scaled",
    scoring: Annotated[
        str,
        typer.Option(
            help="Probe wording and scoring rules: paper (the authors' released scorer) or "
            "lenient (tolerant; docs/metrics.md)"
        ),
    ] = "paper",
    conditions: Annotated[str, typer.Option(help="Comma list of C0, Cm")] = "C0,Cm",
    repeats: Annotated[int, typer.Option(min=1, help="Independent repeats per probe")] = 1,
    limit: Annotated[
        int,
        typer.Option(
            min=0,
            help="Questions to use, as whole answerable/unanswerable pairs "
            "spread over the evidence objects; 0 = every question",
        ),
    ] = 12,
    summary_format: Annotated[
        str,
        typer.Option(
            help="Compaction summary format (verbatim, free-form, "
            "per-fact-citations, template:FILE)"
        ),
    ] = "verbatim",
    memory_flush: Annotated[bool, typer.Option(help="Pre-compaction memory flush")] = True,
    seed: Annotated[int, typer.Option(help="Filler sampling seed")] = 0,
    out: Annotated[Path, typer.Option(help="Output folder (re-run to resume)")] = Path(
        "mirage-runs/default"
    ),
    concurrency: Annotated[int, typer.Option(min=1, help="Probes in flight at once")] = 1,
    adapters: Annotated[bool, typer.Option(help="Pseudo-tool adapters on")] = False,
    api_base: Annotated[
        str | None, typer.Option(help="Base URL for non-local models (OpenAI-compatible)")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="Evaluate an agent we did not write instead of --model: "
            "openai:http://HOST:PORT/v1 (an OpenAI-compatible endpoint) or cmd:PATH (one JSON "
            "request on stdin, one JSON reply on stdout; docs/own_agent.md)",
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
    ] = 120.0,
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
) -> None:
    """Run MIRAGE end to end: workspace, trunk and checkpoints, probes under each condition on
    fresh restores, scoring and the report. With no options: the bundled pack on the embedded
    SmolLM2 model, 12 questions (6 pairs) under C0 and Cm; --limit 0 uses every question."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from harness.report import write_report
    from harness.report.tables import table1

    config = _config(
        pack=pack,
        models=model or [DEFAULT_MODEL],
        trunk_model=trunk_model,
        summarizer_model=summarizer,
        profile=profile,
        scoring=scoring,
        conditions=_conditions(conditions),
        repeats=repeats,
        limit=limit or None,
        summary_format=summary_format,
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
    )
    console = Console(stderr=True)
    started = time.perf_counter()
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        folders = _execute(config, progress)
    for folder in folders:
        files = write_report(folder)
        typer.echo(f"\n## {folder.name} (scoring {config.scoring})\n")
        typer.echo(table1(files.aggregate))
        if agent is not None:
            from harness.attribution import ATTRIBUTION_FILE, AttributionSummary, summary_text

            attribution = (folder / ATTRIBUTION_FILE).read_text()
            typer.echo("\n" + summary_text(AttributionSummary.model_validate_json(attribution)))
        typer.echo(f"\nreport: {files.report}")
    typer.echo(f"\nfinished in {time.perf_counter() - started:.0f} s; results in {out}")


def _config(**fields: Any) -> RunConfig:
    """The validated run configuration; a bad option is one ``error:`` line and exit 2, before
    any work starts."""
    try:
        return RunConfig(**fields)
    except ValidationError as exc:
        problems = "; ".join(error["msg"].removeprefix("Value error, ") for error in exc.errors())
        typer.echo(f"error: {problems}", err=True)
        raise typer.Exit(code=2) from exc


def _execute(config: RunConfig, progress: Any) -> list[Path]:
    from harness.attribution import AttributionError
    from harness.run import MirageRun, ResumeError, RunInputError

    try:
        return list(asyncio.run(MirageRun(config, progress).execute()))
    except (AttributionError, ResumeError, RunInputError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc


def register(app: typer.Typer) -> None:
    app.command("run")(run)
