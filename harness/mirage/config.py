"""``RunConfig``: every option of ``mirage run``, declared once and checked before any work.

Each field declares, beside its type, default and checks, its flag (help panel, help text),
its study-file key and what it is to a study (a ``RunOption`` of ``harness.kit.options``) and
its meaning in docs/running.md's key table (its ``description``). The command's typer options
(``mirage.cli.run_options``), the study file's keys (``harness.mirage.study``), ``study.json``'s
fields and the resume check's fixed keys (``harness.mirage.run``) and the docs' table are
generated from ``RUN_OPTIONS``, so the API, the command, the file and the docs cannot disagree
and an option is added in one place.

Above: ``MirageRun``, ``harness.mirage.study`` and the ``mirage run`` command. Below: the kit's
option declarations, agent factory (``agent_spec``) and memory binding, each named agent's
options (``harness.mirage.openclaw.options``), the checkpoints' format slugs and the scoring
profiles' names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from compaction.config import split_format
from harness.kit.agents.factory import agent_spec
from harness.kit.memory import memory_binding
from harness.kit.options import DeclaredOption, Given, RunOption, StudyRole, declared_options
from harness.mirage.openclaw.options import AGENT as OPENCLAW_AGENT
from harness.mirage.openclaw.options import check_options as check_openclaw_options
from harness.mirage.protocol import CONDITIONS, DEFAULT_PROFILE, Condition, ProfileName
from harness.mirage.trunk.checkpoints import SCRIPTED_TRUNK_MODEL, format_slug
from runtime.asgi import check_binding
from runtime.backbones import DEFAULT_MODEL, DEFAULT_TIMEOUT_S, LOCAL_PREFIX

DEFAULT_LIMIT = 12
NAMED_AGENTS = (OPENCLAW_AGENT,)
"""``--agent`` values that name an agent mirage installs and drives with a strategy of its own
(the others are ``openai:URL`` and ``cmd:COMMAND``)."""
SCRIPTED_TRUNK_SUMMARIZER = "reference/keep-charts"
"""The summarizer of a scripted trunk given no ``--summarizer``: like the trunk, no model — a
reference summarizer (``compaction.references``) whose S2 keeps every chart's facts, sends UI
screenshots to the memory flush's notes and drops the rest, so an agent under test meets all
three (in its summary, in its notes, only behind ``artifact_recall``) in milliseconds. The
embedded SmolLM2 wrote a degenerate S2 and took 4 of a 6-minute run (issue 45)."""
CALIBRATION_FORMATS: tuple[str, ...] = (
    "verbatim~reference/keep-charts",
    "free-form~reference/keep-charts",
    "per-fact-citations~reference/keep-charts",
    "verbatim~reference/keep-nothing",
)
"""The compaction calibration arms: summary formats written by reference summarizers (their
retention declared in ``compaction.references``), branched from the pre-compaction state like
every other format and probed by the reference agents only (docs/references.md)."""
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")

MODEL_PANEL = "Model"
PACK_PANEL = "Pack and depth"
COMPACTION_PANEL = "Compaction"
AGENT_PANEL = "Agent"
OUTPUT_PANEL = "Output"
PANELS = (MODEL_PANEL, PACK_PANEL, COMPACTION_PANEL, AGENT_PANEL, OUTPUT_PANEL)
"""The help panels of ``mirage run --help``, in the order it shows them."""
KEPT, GROWS, SHARED = StudyRole.KEPT, StudyRole.GROWS, StudyRole.SHARED


def flag_of(key: str) -> str:
    """The command-line flag of a ``RunConfig`` field or study key (``summary_formats`` →
    --summary-format, ``summarizer`` → --summarizer, ``agent_kind`` → --agent); a field with no
    flag (a study file sets it) and a resolved key are named as flags would be."""
    option = RUN_OPTIONS.get(key)
    if option is not None and option.flag is not None:
        return option.flag
    return "--agent" if key == "agent_kind" else "--" + key.replace("_", "-")


class Shard(BaseModel):
    """Shard ``index`` of ``count`` (1-based): ``--shard 2/3``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    count: int

    @classmethod
    def parse(cls, value: object) -> Shard:
        """``"K/N"`` (or a dumped shard) with 1 ≤ K ≤ N."""
        if isinstance(value, Shard):
            return value
        if isinstance(value, dict):
            value = f"{value.get('index')}/{value.get('count')}"
        match = _SHARD.match(str(value))
        if match is None:
            raise ValueError(f"--shard must be K/N (e.g. 1/4), got {value!r}")
        index, count = int(match[1]), int(match[2])
        if not 1 <= index <= count:
            raise ValueError(f"--shard {index}/{count}: K must be between 1 and N")
        return cls(index=index, count=count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


class RunConfig(BaseModel):
    """Every option of ``mirage run``, each declared once: its flag, help panel and help text,
    its study-file key and what it is to a study (``RunOption``, ``harness.kit.options``), its
    meaning in docs/running.md's key table (``description``), its default and its checks."""

    model_config = ConfigDict(extra="forbid")

    pack: Annotated[str, RunOption(PACK_PANEL, "Bundled pack name or pack folder", study=KEPT)] = (
        Field(default="mirage-core", description="bundled pack name or pack folder")
    )
    models: Annotated[
        list[str],
        RunOption(
            MODEL_PANEL,
            "Answerer model (repeatable); default the embedded SmolLM2. reference/retriever, "
            "reference/context-reader and reference/confabulator are reference agents with "
            "known grounding behaviour (docs/references.md)",
            param="model",
            short="-m",
            given=Given.REPEATED,
            study=SHARED,
        ),
    ] = Field(
        default_factory=lambda: [DEFAULT_MODEL],
        description="answerer models (`reference/<kind>`: a reference agent, docs/references.md)",
    )
    references: Annotated[
        bool | None,
        RunOption(
            MODEL_PANEL,
            "Also run the three reference agents (seconds; their rows and the instrument check "
            "open the comparison); default: on when no --model is given",
        ),
    ] = Field(
        default=None,
        description="also run the three reference agents (reference/retriever, context-reader, "
        "confabulator); default: when no model is given",
    )
    trunk_model: Annotated[
        str,
        RunOption(
            MODEL_PANEL,
            f"Model that plays the trunk; '{SCRIPTED_TRUNK_MODEL}' replays fixed replies",
            study=KEPT,
        ),
    ] = Field(
        default=DEFAULT_MODEL,
        description=f"the model that plays the trunk (`{SCRIPTED_TRUNK_MODEL}`: fixed replies)",
    )
    summarizer_model: Annotated[
        str | None,
        RunOption(
            MODEL_PANEL,
            "Compaction summarizer model (default: the trunk model; with a scripted trunk, the "
            f"reference summarizer {SCRIPTED_TRUNK_SUMMARIZER})",
            param="summarizer",
            study=KEPT,
            resolved="summarizer",
        ),
    ] = Field(
        default=None,
        description="compaction summarizer (default: the trunk model; for a scripted trunk, the "
        f"reference summarizer `{SCRIPTED_TRUNK_SUMMARIZER}`)",
    )
    profile: Annotated[str, RunOption(PACK_PANEL, "Depth profile: paper or scaled", study=KEPT)] = (
        Field(default="scaled", description="depth profile: `paper` or `scaled`")
    )
    scoring: Annotated[
        ProfileName,
        RunOption(
            PACK_PANEL,
            "Probe wording and scoring rules: paper (the authors' released scorer) or lenient "
            "(tolerant; docs/metrics.md)",
            study=KEPT,
        ),
    ] = Field(
        default=DEFAULT_PROFILE,
        description="probe wording and scoring rules: `paper` (the released scorer) or "
        "`lenient` (docs/metrics.md)",
    )
    conditions: Annotated[
        list[Condition],
        RunOption(PACK_PANEL, "Comma list of C0, Cm", given=Given.COMMA_LIST, study=GROWS),
    ] = Field(default_factory=lambda: list(CONDITIONS), description="a list of `C0`, `Cm`")
    repeats: Annotated[int, RunOption(PACK_PANEL, "Independent repeats per probe", study=GROWS)] = (
        Field(default=1, ge=1, description="independent repeats per probe")
    )
    limit: Annotated[
        int | None,
        RunOption(
            PACK_PANEL,
            "Questions to use, as whole answerable/unanswerable pairs spread over the evidence "
            "objects; 0 = every question",
            min=0,
            given=Given.ZERO_FOR_NONE,
            study=GROWS,
        ),
    ] = Field(
        default=DEFAULT_LIMIT,
        ge=2,
        description="questions, as answerable/unanswerable pairs spread over the evidence "
        "objects; 0 (None) = every question",
    )
    summary_formats: Annotated[
        list[str],
        RunOption(
            COMPACTION_PANEL,
            "Compaction summary format (verbatim, free-form, per-fact-citations, "
            "template:FILE); repeat it or give a comma list: the trunk is built once and every "
            "format after the first adds the state S2@<format>, branched from the same state "
            "right before the first compaction (docs/compaction.md)  [default: verbatim]",
            param="summary_format",
            given=Given.REPEATED_OR_COMMAS,
            study=GROWS,
        ),
    ] = Field(
        default_factory=lambda: ["verbatim"],
        min_length=1,
        description="compaction summary formats: the first is the trunk's own (its S2 is S2), "
        "each other one adds the states `S2@<format>`, branched from the same pre-compaction "
        "state (docs/compaction.md)",
    )
    calibration: Annotated[
        bool | None,
        RunOption(
            COMPACTION_PANEL,
            "Also branch the compaction calibration arms from the pre-compaction state: summary "
            "formats written by reference summarizers with declared retention "
            "(S2@verbatim~reference-keep-charts, …; docs/references.md), probed by the "
            "reference agents only; default: on when the reference agents run",
            study=GROWS,
            resolved="calibration_formats",
        ),
    ] = Field(
        default=None,
        description="also branch the compaction calibration arms (reference summarizers with "
        "declared retention, probed by the reference agents only; docs/references.md); "
        "default: when the reference agents run",
    )
    memory_flush: Annotated[
        bool, RunOption(COMPACTION_PANEL, "Pre-compaction memory flush", study=KEPT)
    ] = Field(default=True, description="pre-compaction memory flush")
    seed: Annotated[int, RunOption(PACK_PANEL, "Filler sampling seed", study=KEPT)] = Field(
        default=0, description="filler sampling seed"
    )
    out: Annotated[
        Path, RunOption(OUTPUT_PANEL, "Output folder (re-run to resume)", short="-o")
    ] = Field(default=Path("mirage-runs/default"), description="output folder")
    concurrency: Annotated[int, RunOption(OUTPUT_PANEL, "Probes in flight at once")] = Field(
        default=1, ge=1, description="probes in flight at once"
    )
    trunk_max_output_tokens: Annotated[int | None, RunOption(study=KEPT)] = Field(
        default=None,
        ge=8,
        description="trunk reply budget; default 96 for local models, 512 otherwise",
    )
    probe_max_output_tokens: Annotated[int | None, RunOption(study=KEPT)] = Field(
        default=None,
        ge=8,
        description="probe reply budget; default 64 for local models, 2048 otherwise (room for "
        "reasoning models)",
    )
    adapters: Annotated[bool, RunOption(MODEL_PANEL, "Pseudo-tool adapters on", study=KEPT)] = (
        Field(default=False, description="pseudo-tool adapters on")
    )
    api_base: Annotated[
        str | None,
        RunOption(
            MODEL_PANEL,
            "Base URL for non-local models (OpenAI-compatible); checked to answer before the "
            "run starts",
        ),
    ] = Field(default=None, description="base URL for non-local models (OpenAI-compatible)")
    request_timeout_s: Annotated[
        float,
        RunOption(
            MODEL_PANEL,
            "Seconds one call to a litellm model's provider may take before it fails as a "
            "timeout (it is retried like other provider failures); the embedded model has no "
            "provider",
            param="request_timeout",
            min=0.1,
        ),
    ] = Field(
        default=DEFAULT_TIMEOUT_S,
        gt=0,
        description="seconds one call to a litellm model's provider may take before it fails as "
        "a timeout (retried like other provider failures; default 120); a resume may change it",
    )
    window: Annotated[int | None, RunOption(study=KEPT)] = Field(
        default=None,
        ge=1024,
        description="the trunk's window; default the trunk model's own (8192 for a scripted trunk)",
    )
    agent: Annotated[
        str | None,
        RunOption(
            AGENT_PANEL,
            "Evaluate an agent we did not write instead of --model: openai:http://HOST:PORT/v1 "
            "(an OpenAI-compatible endpoint), cmd:PATH (one JSON request on stdin, one JSON "
            "reply on stdout; docs/own_agent.md) or openclaw (the installed OpenClaw, answering "
            "with the first --model; docs/openclaw.md)",
            study=SHARED,
            resolved="agent_kind",
        ),
    ] = Field(
        default=None,
        description="an agent we did not write instead of a model: `openai:URL`, "
        "`cmd:COMMAND` (docs/own_agent.md) or `openclaw` (docs/openclaw.md)",
    )
    agent_model: Annotated[
        str | None,
        RunOption(
            AGENT_PANEL, "Model name sent to an openai: agent (also the folder)", study=SHARED
        ),
    ] = Field(default=None, description="model name sent to an `openai:` agent (also the folder)")
    agent_api_key: Annotated[
        str | None,
        RunOption(AGENT_PANEL, "Bearer key for an openai: agent", envvar="MIRAGE_AGENT_API_KEY"),
    ] = Field(default=None, exclude=True, description="bearer key for an `openai:` agent")
    agent_timeout_s: Annotated[
        float,
        RunOption(
            AGENT_PANEL, "Seconds an agent may take for one probe", param="agent_timeout", min=0.1
        ),
    ] = Field(default=120.0, gt=0, description="seconds an agent may take for one probe")
    memory_url: Annotated[
        str | None,
        RunOption(
            AGENT_PANEL,
            "Serve the memory server here for the agent (http://HOST:PORT/mcp); each probe also "
            "gets its own URL .../t/<tag>/mcp, sent as header X-Mirage-Memory-Url",
        ),
    ] = Field(
        default=None,
        description="where the memory server listens for the agent (`http://HOST:PORT/mcp`); "
        "default a free loopback port (agents then need the per-probe URL)",
    )
    memory_token: Annotated[
        str | None,
        RunOption(
            AGENT_PANEL,
            "Bearer token the memory server requires (needed off loopback)",
            envvar="MIRAGE_MEMORY_TOKEN",
        ),
    ] = Field(default=None, exclude=True, description="bearer token the memory server requires")
    openclaw_config: Annotated[
        Path | None,
        RunOption(
            AGENT_PANEL,
            "With --agent openclaw: your OpenClaw settings (JSON5, as openclaw.json), merged "
            "over the generated config and checked by `openclaw config validate`",
            existing_file=True,
        ),
    ] = Field(
        default=None,
        description='with `agent = "openclaw"`: your OpenClaw settings (JSON5), merged over '
        "the generated config",
    )
    shard: Annotated[
        Shard | None,
        RunOption(
            OUTPUT_PANEL,
            "Run only shard K of N (K/N) of the study's probes, e.g. on N machines with the same "
            "flags and their own --out; `mirage merge` joins them (docs/running.md)",
            given=Given.TEXT,
        ),
    ] = Field(
        default=None,
        description='`"K/N"`: run only shard K of N of the study\'s probes; `mirage merge` joins '
        "the shards (docs/running.md, 'Shards')",
    )
    retry_errors: Annotated[
        bool,
        RunOption(
            OUTPUT_PANEL,
            "Re-run exactly the probes recorded with a provider or agent error (same flags "
            "otherwise), replacing their records atomically; nothing else runs",
            written=False,
        ),
    ] = Field(
        default=False,
        description="re-run exactly the probes recorded with a provider or agent error, "
        "replacing their records (docs/running.md, 'Failed probes and --retry-errors')",
    )

    @field_validator("shard", mode="before")
    @classmethod
    def _shard_text(cls, value: object) -> object:
        return None if value is None else Shard.parse(value)

    @field_validator("summary_formats", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("summary_formats")
    @classmethod
    def _summary_formats_known(cls, value: list[str]) -> list[str]:
        from compaction.config import check_format

        slugs = [format_slug(check_format(name)) for name in value]  # a bad template fails now
        repeated = sorted({slug for slug in slugs if slugs.count(slug) > 1})
        if repeated:
            raise ValueError(f"--summary-format names {', '.join(repeated)} more than once")
        return value

    @property
    def answerers(self) -> list[str]:
        """The models to probe: ``models``, then the reference agents not among them when
        ``references`` is on (by default, when ``models`` was not given)."""
        from harness.mirage.references import REFERENCE_MODELS

        if not self._references_wanted or self.agent is not None:
            return list(self.models)
        return [*self.models, *(m for m in REFERENCE_MODELS if m not in self.models)]

    @property
    def primary_format(self) -> str:
        return self.summary_formats[0]

    def arm(self, summary_format: str) -> tuple[str, str]:
        """(summary format, summarizer) of a formats-axis entry: what its compaction states are
        made of (a plain format is written by the run's ``summarizer``)."""
        plain, own = split_format(summary_format)
        return plain, own or self.summarizer

    @property
    def calibration_formats(self) -> list[str]:
        """The calibration arms this run adds to its formats (none when off); an arm that one of
        ``summary_formats`` already is (same format, same summarizer) is not added twice."""
        wanted = self.calibration if self.calibration is not None else self._references_wanted
        if not wanted or self.agent is not None:
            return []
        given = {self.arm(entry) for entry in self.summary_formats}
        return [arm for arm in CALIBRATION_FORMATS if self.arm(arm) not in given]

    @model_validator(mode="after")
    def _arms_distinct(self) -> RunConfig:
        seen: dict[tuple[str, str], str] = {}
        for entry in self.summary_formats:
            first = seen.setdefault(self.arm(entry), entry)
            if first != entry:
                plain, summarizer = self.arm(entry)
                raise ValueError(
                    f"--summary-format {first} and {entry} are the same arm ({plain} written by "
                    f"{summarizer}): give it once"
                )
        return self

    @property
    def _references_wanted(self) -> bool:
        if self.references is not None:
            return self.references
        return "models" not in self.model_fields_set

    @model_validator(mode="after")
    def _reference_roles(self) -> RunConfig:
        """A ``reference/…`` name is a reference agent as an answerer and a reference
        summarizer as a summarizer; any other is refused now, before any work."""
        from compaction.references import REFERENCE_SUMMARIZERS, reference_spec
        from harness.mirage.references import REFERENCE_MODELS, is_reference

        for model in self.models:
            if is_reference(model) and model not in REFERENCE_MODELS:
                role = " is a summarizer (--summarizer)" if model in REFERENCE_SUMMARIZERS else ""
                raise ValueError(
                    f"--model {model}{role}: reference agents are {', '.join(REFERENCE_MODELS)}"
                )
        if self.summarizer_model is not None and is_reference(self.summarizer_model):
            reference_spec(self.summarizer_model)
        return self

    @model_validator(mode="after")
    def _agent_options(self) -> RunConfig:
        if self.calibration and (self.agent is not None or not self._references_wanted):
            raise ValueError(
                "--calibration needs the reference agents (its arms are probed by them only): "
                "add --references, or leave --calibration out"
            )
        if self.agent is not None:
            agent_spec(self.agent, named=NAMED_AGENTS)
        elif self.memory_url or self.agent_model:
            raise ValueError("--memory-url and --agent-model apply only with --agent")
        check_openclaw_options(self)  # each named agent's options agree with --agent
        if self.memory_url is not None:
            memory_binding(self.memory_url, self.memory_token)
        elif self.memory_token is not None:  # a loopback server, but never a blank key
            check_binding("127.0.0.1", self.memory_token, token_option="--memory-token")
        return self

    @property
    def trunk_output_tokens(self) -> int:
        local = (
            self.trunk_model.startswith(LOCAL_PREFIX) or self.trunk_model == SCRIPTED_TRUNK_MODEL
        )
        return self.trunk_max_output_tokens or (96 if local else 512)

    def probe_output_tokens(self, model: str) -> int:
        return self.probe_max_output_tokens or (64 if model.startswith(LOCAL_PREFIX) else 2048)

    @property
    def summarizer(self) -> str:
        """``--summarizer``, else the trunk model, else (a scripted trunk) the reference
        summarizer ``SCRIPTED_TRUNK_SUMMARIZER``."""
        if self.summarizer_model:
            return self.summarizer_model
        if self.trunk_model == SCRIPTED_TRUNK_MODEL:
            return SCRIPTED_TRUNK_SUMMARIZER
        return self.trunk_model


RUN_OPTIONS: dict[str, DeclaredOption] = declared_options(RunConfig)
"""Every field of ``RunConfig`` with its declaration, in the model's order."""
STUDY_FILE_ONLY = frozenset(name for name, option in RUN_OPTIONS.items() if option.flag is None)
"""``RunConfig`` fields a study file sets but ``mirage run`` has no flag for."""
