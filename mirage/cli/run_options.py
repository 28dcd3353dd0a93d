"""The options of ``mirage run``, one annotated type each, grouped in help panels (model, pack
and depth, compaction, agent, output), and how the given ones become ``RunConfig`` fields.

Precedence, lowest first: ``RunConfig``'s defaults, the study file (``--study``), the flags the
user gave on the command line (click's parameter source says which were given: a flag left at
its default never overrides the file).

Above: the ``mirage run`` command (``mirage.cli.run``). Below: ``RunConfig`` (the fields, their
defaults and checks) and ``harness.mirage.study`` (the file); nothing heavy is imported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from harness.mirage.config import FIELD_OF, SCRIPTED_TRUNK_SUMMARIZER, RunConfig
from harness.mirage.trunk.checkpoints import SCRIPTED_TRUNK_MODEL
from mirage.cli.options import (
    MODEL,
    OUT,
    REQUEST_TIMEOUT,
    REQUEST_TIMEOUT_HELP,
    SUMMARY_FORMAT,
)

DEFAULTS = RunConfig.model_construct()
"""``RunConfig``'s defaults (unvalidated, nothing else set): the API and the command share them."""
DEFAULT_CONDITIONS = ",".join(DEFAULTS.conditions)

MODEL_PANEL = "Model"
PACK_PANEL = "Pack and depth"
COMPACTION_PANEL = "Compaction"
AGENT_PANEL = "Agent"
OUTPUT_PANEL = "Output"


def _option(*names: str, panel: str, **options: Any) -> Any:
    return typer.Option(*names, rich_help_panel=panel, **options)


Study = Annotated[
    Path | None,
    typer.Option(
        help="A study file (TOML): every run option a key (docs/running.md, 'Study files'); "
        "flags given here override it. Every run writes its resolved study to OUT/study.toml",
        dir_okay=False,
    ),
]
Models = Annotated[
    list[str] | None,
    _option(
        *MODEL,
        panel=MODEL_PANEL,
        help="Answerer model (repeatable); default the embedded SmolLM2. "
        "reference/retriever, reference/context-reader and reference/confabulator are "
        "reference agents with known grounding behaviour (docs/references.md)",
    ),
]
References = Annotated[
    bool | None,
    _option(
        "--references/--no-references",
        panel=MODEL_PANEL,
        help="Also run the three reference agents (seconds; their rows and the instrument "
        "check open the comparison); default: on when no --model is given",
        show_default=False,
    ),
]
TrunkModel = Annotated[
    str,
    _option(
        panel=MODEL_PANEL,
        help=f"Model that plays the trunk; '{SCRIPTED_TRUNK_MODEL}' replays fixed replies",
    ),
]
Summarizer = Annotated[
    str | None,
    _option(
        panel=MODEL_PANEL,
        help="Compaction summarizer model (default: the trunk model; with a scripted trunk, "
        f"the reference summarizer {SCRIPTED_TRUNK_SUMMARIZER})",
    ),
]
ApiBase = Annotated[
    str | None,
    _option(
        panel=MODEL_PANEL,
        help="Base URL for non-local models (OpenAI-compatible); checked to answer before the "
        "run starts",
    ),
]
RequestTimeout = Annotated[
    float, _option(*REQUEST_TIMEOUT, panel=MODEL_PANEL, min=0.1, help=REQUEST_TIMEOUT_HELP)
]
Adapters = Annotated[bool, _option(panel=MODEL_PANEL, help="Pseudo-tool adapters on")]
Pack = Annotated[str, _option(panel=PACK_PANEL, help="Bundled pack name or pack folder")]
Profile = Annotated[str, _option(panel=PACK_PANEL, help="Depth profile: paper or scaled")]
Scoring = Annotated[
    str,
    _option(
        panel=PACK_PANEL,
        help="Probe wording and scoring rules: paper (the authors' released scorer) or "
        "lenient (tolerant; docs/metrics.md)",
    ),
]
Conditions = Annotated[str, _option(panel=PACK_PANEL, help="Comma list of C0, Cm")]
Repeats = Annotated[int, _option(panel=PACK_PANEL, min=1, help="Independent repeats per probe")]
Limit = Annotated[
    int,
    _option(
        panel=PACK_PANEL,
        min=0,
        help="Questions to use, as whole answerable/unanswerable pairs "
        "spread over the evidence objects; 0 = every question",
    ),
]
Seed = Annotated[int, _option(panel=PACK_PANEL, help="Filler sampling seed")]
SummaryFormats = Annotated[
    list[str] | None,
    _option(
        *SUMMARY_FORMAT,
        panel=COMPACTION_PANEL,
        help="Compaction summary format (verbatim, free-form, per-fact-citations, "
        "template:FILE); repeat it or give a comma list: the trunk is built once and every "
        "format after the first adds the state S2@<format>, branched from the same state right "
        "before the first compaction (docs/compaction.md)  [default: verbatim]",
        show_default=False,
    ),
]
Calibration = Annotated[
    bool | None,
    _option(
        "--calibration/--no-calibration",
        panel=COMPACTION_PANEL,
        help="Also branch the compaction calibration arms from the pre-compaction state: "
        "summary formats written by reference summarizers with declared retention "
        "(S2@verbatim~reference-keep-charts, …; docs/references.md), probed by the "
        "reference agents only; default: on when the reference agents run",
        show_default=False,
    ),
]
MemoryFlush = Annotated[bool, _option(panel=COMPACTION_PANEL, help="Pre-compaction memory flush")]
Agent = Annotated[
    str | None,
    _option(
        panel=AGENT_PANEL,
        help="Evaluate an agent we did not write instead of --model: "
        "openai:http://HOST:PORT/v1 (an OpenAI-compatible endpoint), cmd:PATH (one JSON "
        "request on stdin, one JSON reply on stdout; docs/own_agent.md) or openclaw (the "
        "installed OpenClaw, answering with the first --model; docs/openclaw.md)",
    ),
]
AgentModel = Annotated[
    str | None,
    _option(panel=AGENT_PANEL, help="Model name sent to an openai: agent (also the folder)"),
]
AgentApiKey = Annotated[
    str | None,
    _option(
        panel=AGENT_PANEL, help="Bearer key for an openai: agent", envvar="MIRAGE_AGENT_API_KEY"
    ),
]
AgentTimeout = Annotated[
    float, _option(panel=AGENT_PANEL, min=0.1, help="Seconds an agent may take for one probe")
]
MemoryUrl = Annotated[
    str | None,
    _option(
        panel=AGENT_PANEL,
        help="Serve the memory server here for the agent (http://HOST:PORT/mcp); each probe "
        "also gets its own URL .../t/<tag>/mcp, sent as header X-Mirage-Memory-Url",
    ),
]
MemoryToken = Annotated[
    str | None,
    _option(
        panel=AGENT_PANEL,
        help="Bearer token the memory server requires (needed off loopback)",
        envvar="MIRAGE_MEMORY_TOKEN",
    ),
]
OpenclawConfig = Annotated[
    Path | None,
    _option(
        panel=AGENT_PANEL,
        help="With --agent openclaw: your OpenClaw settings (JSON5, as openclaw.json), "
        "merged over the generated config and checked by `openclaw config validate`",
        exists=True,
        dir_okay=False,
    ),
]
Out = Annotated[Path, _option(*OUT, panel=OUTPUT_PANEL, help="Output folder (re-run to resume)")]
Concurrency = Annotated[int, _option(panel=OUTPUT_PANEL, min=1, help="Probes in flight at once")]
ShardOption = Annotated[
    str | None,
    _option(
        panel=OUTPUT_PANEL,
        help="Run only shard K of N (K/N) of the study's probes, e.g. on N machines with the "
        "same flags and their own --out; `mirage merge` joins them (docs/running.md)",
    ),
]
RetryErrors = Annotated[
    bool,
    _option(
        panel=OUTPUT_PANEL,
        help="Re-run exactly the probes recorded with a provider or agent error (same flags "
        "otherwise), replacing their records atomically; nothing else runs",
    ),
]
DryRun = Annotated[
    bool,
    _option(
        panel=OUTPUT_PANEL,
        help="Plan only: the summarizer (and its chunks when the compaction input exceeds its "
        "window), probes, input tokens per state (from existing checkpoints, else "
        "estimated from the pack and the profile), output budget and cost with and "
        "without prompt caching (litellm's local price map); builds and writes nothing",
    ),
]

NOT_FIELDS = frozenset({"study", "dry_run"})
"""Parameters of the command that are not run options."""


def _conditions(value: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    unknown = [item for item in items if item not in {"C0", "Cm"}]
    if not items or unknown:
        raise typer.BadParameter(f"conditions must be a comma list of C0 and Cm, got {value!r}")
    return items


def _summary_formats(values: list[str]) -> list[str]:
    """``--summary-format`` repeated and/or as comma lists, in order (a repeat is refused by
    ``RunConfig``, naming it)."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _field_value(param: str, value: Any) -> Any:
    if param == "conditions":
        return _conditions(value)
    if param == "limit":
        return value or None  # 0 = every question
    if param == "summary_format":
        return _summary_formats(value)
    return value


def given_options(ctx: typer.Context) -> dict[str, Any]:
    """The run options the user gave on the command line (or through an environment
    variable), by ``RunConfig`` field; options left at their defaults are not in it."""
    given: dict[str, Any] = {}
    for param, value in ctx.params.items():
        source = ctx.get_parameter_source(param)
        if param in NOT_FIELDS or source is None or source.name == "DEFAULT":  # typer's click
            continue
        given[FIELD_OF.get(param, param)] = _field_value(param, value)
    return given
