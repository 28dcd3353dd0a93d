"""The CUE run configuration: memory systems as named configurations, the conditions to run
(system × image-caption level × audio-caption level), the contrasts to test, the bootstrap.

Above: ``mirage cue run`` (options, ``--config FILE`` in YAML, or ``--study FILE`` in TOML,
read strictly) and the runner, which writes the resolved study into the result folder. Below:
pydantic and the kit's study-file reader (``harness.kit.studyfile``). The default configuration
is ``harness/cue/data/default-run.yaml``; docs/cue.md documents every field.

A condition is written ``SYSTEM@IMAGE/AUDIO`` (``naive-rag@detailed/split``). A contrast is one
of ``explicit_vs_implicit`` (within one condition), ``image_level``, ``audio_level`` or
``system`` (two conditions that differ in exactly that factor), over a metric: ``memory_avg``,
``accuracy`` (with ``task``) or ``ei_gap``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.cue.metrics import MetricName
from harness.cue.pack import DEFAULT_PACK
from harness.cue.schema import AUDIO_LEVELS, IMAGE_LEVELS, AudioLevel, ImageLevel, Setting, Task
from harness.cue.stats import Difference
from harness.kit.packfiles import format_validation_error
from harness.kit.studyfile import StudyFileError
from runtime.backbones.base import LOCAL_PREFIX

DEFAULT_MODEL = "local/smollm2-135m"
DEFAULT_RUN_CONFIG = Path(__file__).resolve().parent / "data" / "default-run.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FullContextSpec(_Strict):
    """The whole history in the prompt, oldest first, truncated to the model's window (the
    newest rounds kept)."""

    kind: Literal["full_context"] = "full_context"
    context_tokens: int | None = Field(
        default=None, ge=256, description="history budget; default the window minus the rest"
    )


class NaiveRagSpec(_Strict):
    """Cosine top-k over round embeddings (MiniLM in a chroma collection)."""

    kind: Literal["naive_rag"] = "naive_rag"
    k: int = Field(default=10, ge=1, le=50)


class MirageMemorySpec(_Strict):
    """mirage's memory server: the rounds as a workspace, hybrid index (dense + BM25, RRF
    1/(60+r), pool max(20, 4k)), queried over MCP with ``artifact_recall``; the top k."""

    kind: Literal["mirage_memory"] = "mirage_memory"
    k: int = Field(default=5, ge=1, le=50)


class AgentSpec(_Strict):
    """An agent we did not write, through the agent adapters (``openai:URL`` or ``cmd:PATH``);
    the history reaches it only through the memory server's ``artifact_recall``."""

    kind: Literal["agent"] = "agent"
    agent: str = Field(description="openai:http://HOST:PORT/v1 or cmd:PATH")
    agent_model: str | None = None
    timeout_s: float = Field(default=120.0, gt=0)

    @field_validator("agent")
    @classmethod
    def _agent(cls, value: str) -> str:
        from harness.kit.agents.factory import agent_spec

        agent_spec(value)
        return value


SystemSpec = Annotated[
    FullContextSpec | NaiveRagSpec | MirageMemorySpec | AgentSpec, Field(discriminator="kind")
]

BUILTIN_SYSTEMS: dict[str, SystemSpec] = {
    "full-context": FullContextSpec(),
    "naive-rag": NaiveRagSpec(),
    "mirage-memory": MirageMemorySpec(),
}


class Condition(_Strict):
    system: str
    image_level: ImageLevel = "detailed"
    audio_level: AudioLevel = "split"

    @property
    def label(self) -> str:
        return f"{self.system}@{self.image_level}/{self.audio_level}"

    @classmethod
    def parse(cls, text: str) -> Condition:
        system, _, levels = text.partition("@")
        if not levels:
            return cls(system=system.strip())
        image, _, audio = levels.partition("/")
        try:
            return cls(system=system.strip(), image_level=image.strip(), audio_level=audio.strip())  # type: ignore[arg-type]
        except ValidationError as exc:
            raise ValueError(
                f"condition {text!r} must be SYSTEM@IMAGE/AUDIO with IMAGE in "
                f"{list(IMAGE_LEVELS)} and AUDIO in {list(AUDIO_LEVELS)}"
            ) from exc


ContrastKind = Literal["explicit_vs_implicit", "image_level", "audio_level", "system"]
_FACTOR = {"image_level": "image_level", "audio_level": "audio_level", "system": "system"}


class Contrast(_Strict):
    name: str = Field(min_length=1)
    kind: ContrastKind
    metric: MetricName = "memory_avg"
    task: Task | None = None
    setting: Setting | None = Field(default=None, description="for two-condition contrasts")
    condition: str | None = Field(default=None, description="explicit_vs_implicit: the one")
    a: str | None = None
    b: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> Contrast:
        if (self.metric == "accuracy") != (self.task is not None):
            raise ValueError("metric accuracy needs a task, and only it takes one")
        if self.kind == "explicit_vs_implicit":
            if (
                self.condition is None
                or self.a
                or self.b
                or self.setting
                or self.metric == "ei_gap"
            ):
                raise ValueError(
                    "explicit_vs_implicit takes `condition` (not a/b/setting) and metric "
                    "memory_avg or accuracy"
                )
            return self
        if self.a is None or self.b is None or self.condition is not None:
            raise ValueError(f"a {self.kind} contrast takes `a` and `b` conditions")
        if (self.metric == "ei_gap") == (self.setting is not None):
            raise ValueError("give `setting` for memory_avg/accuracy contrasts, none for ei_gap")
        first, second = Condition.parse(self.a), Condition.parse(self.b)
        differing = [f for f in _FACTOR.values() if getattr(first, f) != getattr(second, f)]
        if differing != [_FACTOR[self.kind]]:
            raise ValueError(
                f"a {self.kind} contrast compares conditions that differ only in "
                f"{_FACTOR[self.kind]}; {self.a} and {self.b} differ in {differing or 'nothing'}"
            )
        return self

    @property
    def conditions(self) -> list[str]:
        raw = [self.condition] if self.kind == "explicit_vs_implicit" else [self.a, self.b]
        return [Condition.parse(c).label for c in raw if c is not None]

    @property
    def difference(self) -> Difference:
        return Difference(
            metric=self.metric,
            task=self.task,
            setting=self.setting,
            within_settings=self.kind == "explicit_vs_implicit",
        )

    def describe(self) -> str:
        target = self.metric if self.task is None else f"{self.task} accuracy"
        if self.kind == "explicit_vs_implicit":
            return f"{target}: explicit − implicit, {self.conditions[0]}"
        where = f" ({self.setting})" if self.setting else ""
        return f"{target}{where}: {self.conditions[0]} − {self.conditions[1]}"


class BootstrapConfig(_Strict):
    replicates: int = Field(default=10_000, ge=100)
    seed: int = 0


class CueRunConfig(_Strict):
    pack: str = DEFAULT_PACK
    model: str = DEFAULT_MODEL
    api_base: str | None = None
    systems: dict[str, SystemSpec] = Field(
        default_factory=dict, description="named configurations beside the built-in ones"
    )
    conditions: tuple[str, ...] = Field(min_length=1)
    contrasts: tuple[Contrast, ...] = ()
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    max_output_tokens: int | None = Field(
        default=None, ge=1, description="reply budget; default 8 for local models, 1024 else"
    )
    concurrency: int = Field(default=1, ge=1)
    out: Path = Path("mirage-runs/cue")

    @field_validator("conditions")
    @classmethod
    def _labels(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        labels = tuple(Condition.parse(value).label for value in values)
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"conditions listed twice: {duplicates}")
        return labels

    @model_validator(mode="after")
    def _references(self) -> CueRunConfig:
        known = {**BUILTIN_SYSTEMS, **self.systems}
        unknown = sorted({c.system for c in self.parsed_conditions} - set(known))
        if unknown:
            raise ValueError(f"unknown system(s) {unknown}; known: {sorted(known)}")
        names = [c.name for c in self.contrasts]
        if len(set(names)) != len(names):
            raise ValueError("contrast names must be unique")
        for contrast in self.contrasts:
            missing = [c for c in contrast.conditions if c not in self.conditions]
            if missing:
                raise ValueError(f"contrast {contrast.name!r} uses conditions not run: {missing}")
        return self

    @property
    def parsed_conditions(self) -> list[Condition]:
        return [Condition.parse(value) for value in self.conditions]

    def system(self, name: str) -> SystemSpec:
        return {**BUILTIN_SYSTEMS, **self.systems}[name]

    @property
    def output_tokens(self) -> int:
        return self.max_output_tokens or (8 if self.model.startswith(LOCAL_PREFIX) else 1024)


def default_contrasts(conditions: list[Condition]) -> list[Contrast]:
    """One explicit-vs-implicit contrast per condition, and, for each pair of neighbouring
    conditions that differ in exactly one factor (system, image level or audio level), the
    contrast of their implicit Memory Avg (later minus earlier)."""
    contrasts = [
        Contrast(name=f"EI {c.label}", kind="explicit_vs_implicit", condition=c.label)
        for c in conditions
    ]
    for first, second in itertools.pairwise(conditions):
        differing = [f for f in _FACTOR.values() if getattr(first, f) != getattr(second, f)]
        if len(differing) == 1:
            contrasts.append(
                Contrast(
                    name=f"{second.label} vs {first.label} (implicit)",
                    kind=differing[0],  # type: ignore[arg-type]
                    a=second.label,
                    b=first.label,
                    setting=Setting.implicit,
                )
            )
    return contrasts


class RunConfigError(ValueError):
    """A run configuration (file plus command-line options) that cannot be used."""

    def __init__(self, source: Path, problems: list[str], overridden: bool) -> None:
        where = f"{source} with the command-line options" if overridden else str(source)
        listed = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"{where}: invalid run config\n{listed}")


def load_run_config(path: Path | None, **overrides: object) -> CueRunConfig:
    """The config file (default: the bundled default run) with CLI overrides applied; a problem
    raises ``RunConfigError`` naming the file and the field."""
    source = path or DEFAULT_RUN_CONFIG
    return _with_overrides(_read_yaml(source), source, overrides)


def _read_yaml(source: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise RunConfigError(source, [f"cannot read it: {exc}"], False) from exc
    if not isinstance(raw, dict):
        raise RunConfigError(source, ["expected a mapping at the top level"], False)
    return raw


def _with_default_contrasts(raw: dict[str, Any]) -> None:
    """Conditions given without contrasts: the default contrasts of those conditions."""
    conditions = [Condition.parse(str(c)) for c in raw["conditions"]]
    raw["contrasts"] = [c.model_dump(exclude_none=True) for c in default_contrasts(conditions)]


def _with_overrides(raw: dict[str, Any], source: Path, overrides: dict[str, Any]) -> CueRunConfig:
    given = {key: value for key, value in overrides.items() if value is not None}
    raw.update(given)
    try:
        if "conditions" in given and "contrasts" not in given:
            _with_default_contrasts(raw)
        return CueRunConfig.model_validate(raw)
    except ValidationError as exc:
        raise RunConfigError(source, format_validation_error(exc, raw), bool(given)) from exc
    except ValueError as exc:
        raise RunConfigError(source, [f"conditions: {exc}"], bool(given)) from exc


def load_study(path: Path, **overrides: object) -> CueRunConfig:
    """The study file ``path`` (TOML, the keys of ``CueRunConfig``; what it leaves out comes
    from the bundled default run) with CLI overrides applied. The file is read strictly: an
    unknown key (named with the nearest valid one), a value of the wrong type (no coercion) or
    a contrast naming a condition not run raise ``StudyFileError``, one line naming the key."""
    from harness.kit.studyfile import check_keys, first_problem, read_toml

    study = read_toml(path)
    check_keys(path, study, CueRunConfig.model_fields, "docs/cue.md", {})
    raw = {**_read_yaml(DEFAULT_RUN_CONFIG), **study}
    try:
        if "conditions" in study and "contrasts" not in study:
            _with_default_contrasts(raw)
        CueRunConfig.model_validate_json(json.dumps(raw), strict=True)
    except ValidationError as exc:
        raise first_problem(path, exc) from exc
    except (ValueError, TypeError) as exc:
        raise StudyFileError(f"{path}: conditions: {exc}") from exc
    if "pack" in study:
        _checked_pack(path, study["pack"])
    return _with_overrides(raw, path, overrides)


def _checked_pack(path: Path, pack: str) -> None:
    from harness.cue.pack import resolve_pack_path
    from harness.kit.packfiles import PackFormatError

    try:
        resolve_pack_path(pack)
    except PackFormatError as exc:
        problems = "; ".join(exc.problems)
        raise StudyFileError(f"{path}: pack: {pack!r} is not a pack ({problems})") from exc


def study_data(config: CueRunConfig) -> dict[str, Any]:
    """``config`` as the keys of a study file: the output folder, and a pack given as a
    folder, as absolute paths."""
    data = config.model_dump(mode="json")
    data["out"] = str(config.out.resolve())
    if Path(config.pack).is_dir():
        data["pack"] = str(Path(config.pack).resolve())
    return data
