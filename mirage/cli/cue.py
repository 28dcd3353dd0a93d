"""``mirage cue``: CUE-Mem on the mirage runtime — run, report, import, validate, build.

Above: the ``mirage`` typer root (``register(app)``). Below: the modules of ``harness.cue``,
imported inside the commands so ``mirage --help`` stays fast. Every bad input (a pack, a release
file, a run config, an output folder of another pack) ends with a one-line-per-problem message
and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mirage.cli.options import MODEL, OUT, fail, folder_to_write

cue_app = typer.Typer(
    help="CUE-Mem: explicit vs implicit multimodal cues, EI-Gap, stratified bootstrap + Holm.",
    no_args_is_help=True,
)

PackArgument = Annotated[str, typer.Argument(help="bundled CUE pack name (cue-en) or a folder")]

# -- the options of ``mirage cue run`` -------------------------------------------------------

RunPackOption = Annotated[str | None, typer.Option(help="CUE pack name or folder (default cue-en)")]
SystemsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--system",
        help="Memory system to run (repeatable): full-context, naive-rag, mirage-memory, "
        "agent (with --agent), or one named in --config; replaces the config's conditions "
        "and contrasts",
    ),
]
RunModelOption = Annotated[
    str | None, typer.Option(*MODEL, help="Answerer model (default the embedded SmolLM2)")
]
RunOutOption = Annotated[Path | None, typer.Option(*OUT, help="Output folder; re-run to resume")]
RunConfigOption = Annotated[
    Path | None,
    typer.Option(
        help="Run config YAML (default harness/cue/data/default-run.yaml)",
        exists=True,
        dir_okay=False,
    ),
]
StudyOption = Annotated[
    Path | None,
    typer.Option(
        help="A study file (TOML, the keys of the run config; docs/cue.md), read strictly; "
        "flags given here override it. Every run writes its resolved study to "
        "OUT/MODEL/study.toml",
        dir_okay=False,
    ),
]
SystemImageLevelOption = Annotated[
    str, typer.Option(help="Image caption level for --system: brief, medium, detailed")
]
SystemAudioLevelOption = Annotated[
    str, typer.Option(help="Audio caption level for --system: asr, hint, split")
]
AgentOption = Annotated[
    str | None,
    typer.Option(help="An agent we did not write as system 'agent': openai:URL or cmd:PATH"),
]
AgentModelOption = Annotated[str | None, typer.Option(help="Model name sent to an openai: agent")]
ApiBaseOption = Annotated[str | None, typer.Option(help="Base URL for a served --model")]
ReplicatesOption = Annotated[int | None, typer.Option(min=100, help="Bootstrap replicates")]
SeedOption = Annotated[int | None, typer.Option(help="Bootstrap seed")]
ConcurrencyOption = Annotated[int | None, typer.Option(min=1, help="Questions in flight at once")]


@cue_app.command("run")
def run_command(
    pack: RunPackOption = None,
    system: SystemsOption = None,
    model: RunModelOption = None,
    out: RunOutOption = None,
    config: RunConfigOption = None,
    study: StudyOption = None,
    image_level: SystemImageLevelOption = "detailed",
    audio_level: SystemAudioLevelOption = "split",
    agent: AgentOption = None,
    agent_model: AgentModelOption = None,
    api_base: ApiBaseOption = None,
    replicates: ReplicatesOption = None,
    seed: SeedOption = None,
    concurrency: ConcurrencyOption = None,
) -> None:
    """Answer every question of a CUE pack under each condition (memory system × caption levels),
    then write summary.json, report.md and figures. With no options: the bundled cue-en pack,
    full context, naive RAG and the mirage memory server, answered by the embedded SmolLM2."""
    from harness.cue.report import summary_table

    run = _make_run(
        config,
        study,
        pack=pack,
        model=model,
        out=out,
        api_base=api_base,
        concurrency=concurrency,
        systems=system,
        image_level=image_level,
        audio_level=audio_level,
        agent=agent,
        agent_model=agent_model,
        replicates=replicates,
        seed=seed,
    )
    started = time.perf_counter()
    files = _execute_with_progress(run)
    typer.echo(summary_table(files.metrics))
    typer.echo(f"\nreport: {files.report}\nfinished in {time.perf_counter() - started:.0f} s")


def _execute_with_progress(run: Any) -> Any:
    """``_execute`` with rich's progress bars (description, bar, done/total, elapsed) on
    stderr; the run's result files."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True)) as progress:
        run.progress = progress
        return _execute(run)


def _make_run(config_path: Path | None, study: Path | None, **options: Any) -> Any:
    from harness.cue.config import RunConfigError, load_run_config, load_study
    from harness.cue.run import CueRun
    from harness.kit.packfiles import PackFormatError
    from harness.kit.paths import folder_problem
    from harness.kit.studyfile import StudyFileError

    if config_path is not None and study is not None:
        raise fail("give --config (YAML) or --study (TOML), not both")
    overrides = _overrides(**options)
    try:
        if study is not None:
            config = load_study(study, **overrides)
        else:
            config = load_run_config(config_path, **overrides)
        run = CueRun(config)
    except (RunConfigError, PackFormatError, StudyFileError) as exc:
        raise fail(str(exc)) from exc
    out_problem = folder_problem(config.out)
    if out_problem is not None:
        source = study or config_path or "the default run config"
        given_in = "--out" if options.get("out") is not None else f"{source}: out"
        raise fail(f"{given_in}: {out_problem}")
    return run


def _overrides(
    *,
    systems: list[str] | None,
    image_level: str,
    audio_level: str,
    agent: str | None,
    agent_model: str | None,
    replicates: int | None,
    seed: int | None,
    **plain: Any,
) -> dict[str, Any]:
    overrides = dict(plain)
    if agent is not None:
        overrides["systems"] = {
            "agent": {"kind": "agent", "agent": agent, "agent_model": agent_model}
        }
        systems = systems or ["agent"]
    if systems:
        overrides["conditions"] = [f"{name}@{image_level}/{audio_level}" for name in systems]
    if replicates is not None or seed is not None:
        overrides["bootstrap"] = {
            key: value
            for key, value in (("replicates", replicates), ("seed", seed))
            if value is not None
        }
    return overrides


def _execute(run: Any) -> Any:
    from harness.cue.run import RunFolderError
    from harness.kit.results import ResultsLogError

    try:
        return asyncio.run(run.execute())
    except (RunFolderError, ResultsLogError) as exc:
        raise fail(str(exc)) from exc


@cue_app.command("report")
def report_command(
    directory: Annotated[
        Path,
        typer.Argument(
            help="run folder holding run.json and results.jsonl", exists=True, file_okay=False
        ),
    ],
) -> None:
    """Recompute metrics, bootstrap contrasts and figures from DIR/results.jsonl."""
    from harness.cue.report import summary_table, write_cue_report
    from harness.kit.results import ResultsLogError

    try:
        files = write_cue_report(directory)
    except (FileNotFoundError, ResultsLogError) as exc:
        raise fail(str(exc)) from exc
    typer.echo(summary_table(files.metrics))
    typer.echo(f"\nwrote {files.summary}, {files.report}, {len(files.figures)} figures")


@cue_app.command("validate")
def validate_command(pack: PackArgument) -> None:
    """Check a CUE pack: files, clue ids, caption levels, support, no answer leaks."""
    from harness.cue.pack import load_cue_pack
    from harness.cue.validate import validate_cue_pack
    from harness.kit.packfiles import PackFormatError

    try:
        report = validate_cue_pack(load_cue_pack(pack))
    except PackFormatError as exc:
        raise fail(str(exc)) from exc
    for warning in report.warnings:
        typer.echo(f"  warning: {warning}", err=True)
    if not report.ok:
        raise fail(
            f"{pack}: {len(report.problems)} problem(s)\n"
            + "\n".join(f"  - {problem}" for problem in report.problems)
        )
    typer.echo(f"{pack}: ok")


@cue_app.command("build")
def build_command(
    out: Annotated[
        Path | None,
        typer.Option(
            *OUT, help="output folder (default: the bundled packs)", callback=folder_to_write
        ),
    ] = None,
    name: Annotated[str, typer.Option(help="pack to build")] = "cue-en",
) -> None:
    """Regenerate a bundled CUE pack (byte-identically) from harness/cue/data/sources."""
    from harness.cue.build import build_cue_pack
    from harness.cue.pack import BUNDLED_DIR

    try:
        path = build_cue_pack(name, out or BUNDLED_DIR)
    except KeyError as exc:
        raise fail(str(exc.args[0])) from exc
    typer.echo(f"built {name} -> {path}")


@cue_app.command("import")
def import_command(
    source: Annotated[
        Path,
        typer.Argument(
            help="a release file history_with_qa_p*.json, or a "
            "folder of them (or of caption-level subfolders)",
            exists=True,
        ),
    ],
    out: Annotated[Path, typer.Option(*OUT, help="pack folder to write", callback=folder_to_write)],
    name: Annotated[str, typer.Option(help="pack name")] = "imported",
    image_level: Annotated[
        str,
        typer.Option(
            help="image caption level of files not in a level folder: brief, medium, detailed"
        ),
    ] = "detailed",
    audio_level: Annotated[
        str,
        typer.Option(help="audio caption level of files not in a level folder: asr, hint, split"),
    ] = "split",
    skip_invalid: Annotated[
        bool, typer.Option(help="record invalid QAs in skipped.yaml instead of failing")
    ] = False,
) -> None:
    """Convert the CUE-Mem release format into a CUE pack (never copying the answer-stating
    session fields), then validate it."""
    from harness.cue.importer import import_release
    from harness.cue.pack import load_cue_pack
    from harness.cue.validate import validate_cue_pack
    from harness.kit.packfiles import PackFormatError

    try:
        result = import_release(
            source,
            out,
            name,
            image_level=image_level,
            audio_level=audio_level,
            skip_invalid=skip_invalid,
        )
        report = validate_cue_pack(load_cue_pack(result.path))
    except PackFormatError as exc:
        raise fail(str(exc)) from exc
    _import_summary(result.path, report.warnings)
    if report.problems:
        import shutil

        shutil.rmtree(result.path)  # a pack that fails the release's checks is not left behind
        raise fail(
            f"{len(report.problems)} validation problem(s); nothing written\n"
            + "\n".join(f"  - {problem}" for problem in report.problems)
        )
    typer.echo(
        f"imported {result.questions} questions of {result.profiles} profile(s) into "
        f"{result.path}; {result.skipped} skipped (skipped.yaml)"
    )


def _import_summary(path: Path, warnings: list[str]) -> None:
    """Questions per task × setting, skipped records by reason, warnings by kind (to stderr)."""
    from collections import Counter

    import yaml

    from harness.cue.pack import load_cue_pack

    pack = load_cue_pack(path)
    strata = Counter((q.task.value, q.setting.value) for q in pack.questions)
    typer.echo("questions (task × setting):", err=True)
    for (task, setting), count in sorted(strata.items()):
        typer.echo(f"  {task:<16} {setting:<9} {count}", err=True)
    skipped = yaml.safe_load((path / "skipped.yaml").read_text(encoding="utf-8"))["skipped"]
    for reason, count in Counter(item["reason"] for item in skipped).most_common():
        typer.echo(f"  skipped {count}: {reason}", err=True)
    kinds = Counter(w.split(": ", 2)[1] if w.count(": ") >= 2 else "pack" for w in warnings)
    if warnings:
        typer.echo(
            "warnings by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()),
            err=True,
        )
    for warning in warnings:
        typer.echo(f"  warning: {warning}", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(cue_app, name="cue")
