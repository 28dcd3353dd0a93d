"""``RunConfig``: every option of ``mirage run``, checked before any work, and the one source
of its defaults (``mirage run`` reads each option's default from here, so the API and the
command cannot disagree).

Above: ``MirageRun`` and the ``mirage run`` command. Below: the kit's agent factory
(``agent_spec``) and memory binding, each named agent's options (``harness.mirage.openclaw.
options``), the checkpoints' format slugs and the scoring profiles' names.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from compaction.config import split_format
from harness.kit.agents.factory import agent_spec
from harness.kit.memory import memory_binding
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
FIELD_OF = {
    "model": "models",
    "summarizer": "summarizer_model",
    "summary_format": "summary_formats",
    "agent_timeout": "agent_timeout_s",
    "request_timeout": "request_timeout_s",
}
"""Command-line parameters of ``mirage run`` whose ``RunConfig`` field (or study key) is named
otherwise."""


STUDY_FILE_ONLY = frozenset({"window", "trunk_max_output_tokens", "probe_max_output_tokens"})
"""``RunConfig`` fields a study file sets but ``mirage run`` has no flag for."""


def flag_of(field: str) -> str:
    """The command-line flag of a ``RunConfig`` field or study key (``summary_formats`` →
    --summary-format, ``summarizer`` → --summarizer)."""
    param = next((p for p, f in FIELD_OF.items() if f == field), field)
    return "--agent" if field == "agent_kind" else "--" + param.replace("_", "-")


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
    model_config = ConfigDict(extra="forbid")

    pack: str = "mirage-core"
    models: list[str] = Field(default_factory=lambda: [DEFAULT_MODEL])
    references: bool | None = Field(
        default=None,
        description="Also run the reference agents (reference/retriever, context-reader, "
        "confabulator; docs/references.md); default: when no model is given",
    )
    trunk_model: str = DEFAULT_MODEL
    summarizer_model: str | None = None
    profile: str = "scaled"
    scoring: ProfileName = Field(
        default=DEFAULT_PROFILE,
        description="Probe wording and scoring rules: paper (the released scorer) or lenient",
    )
    conditions: list[Condition] = Field(default_factory=lambda: list(CONDITIONS))
    repeats: int = Field(default=1, ge=1)
    limit: int | None = Field(
        default=DEFAULT_LIMIT,
        ge=2,
        description="Questions to use, as whole answerable/unanswerable pairs spread over the "
        "evidence objects; None uses every question.",
    )
    summary_formats: list[str] = Field(
        default_factory=lambda: ["verbatim"],
        min_length=1,
        description="Compaction summary formats; the first is the trunk's own (its S2 is S2), "
        "each other one adds the states S2@<format>, branched from the same pre-compaction state",
    )
    calibration: bool | None = Field(
        default=None,
        description="Also branch the compaction calibration arms (CALIBRATION_FORMATS: "
        "reference summarizers with declared retention), probed by the reference agents only; "
        "default: on when the reference agents run",
    )
    memory_flush: bool = True
    seed: int = 0
    out: Path = Path("mirage-runs/default")
    concurrency: int = Field(default=1, ge=1)
    trunk_max_output_tokens: int | None = Field(
        default=None, ge=8, description="Trunk reply budget; default 96 local, 512 otherwise."
    )
    probe_max_output_tokens: int | None = Field(
        default=None,
        ge=8,
        description="Probe reply budget; default 64 for local models, 2048 otherwise (room for "
        "reasoning models).",
    )
    adapters: bool = False
    api_base: str | None = None
    request_timeout_s: float = Field(
        default=DEFAULT_TIMEOUT_S,
        gt=0,
        description="Seconds one call to a litellm model's provider may take before it fails as "
        "a timeout (retried like other provider failures); defines no record, so a resume may "
        "change it",
    )
    window: int | None = Field(
        default=None,
        ge=1024,
        description="Trunk window; default the trunk model's own (8192 for a scripted trunk).",
    )
    agent: str | None = Field(
        default=None,
        description="An agent we did not write instead of --model: openai:URL or cmd:COMMAND",
    )
    agent_model: str | None = Field(default=None, description="model name sent to openai: agents")
    agent_api_key: str | None = Field(default=None, exclude=True)
    agent_timeout_s: float = Field(default=120.0, gt=0)
    memory_url: str | None = Field(
        default=None,
        description="Where the memory server listens for the agent (http://HOST:PORT/mcp); "
        "default a free loopback port (agents then need the per-probe URL)",
    )
    memory_token: str | None = Field(default=None, exclude=True)
    openclaw_config: Path | None = Field(
        default=None,
        description="With --agent openclaw: the user's OpenClaw settings (JSON5), merged over "
        "the generated config",
    )
    shard: Shard | None = Field(
        default=None,
        description="Run only shard K of N of the study's probes (K/N); `mirage merge` joins "
        "the shards (harness.mirage.run.shards)",
    )
    retry_errors: bool = Field(
        default=False,
        description="Re-run exactly the probes recorded with a provider or agent error, "
        "replacing their records (harness.mirage.probing.retry)",
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
