"""The evidence-pack format: pydantic models for ``pack.yaml``, ``questions.yaml`` and
``filler.yaml``, and the confinement of every path a pack names to the pack folder.

Above this module sit ``Pack`` (loading, workspace materialisation, turns), the validator and
the CLI; below it the kit's pack-file helpers (``harness.kit.packfiles``: ``load_model`` turns
any schema problem into an error naming file and field) and YAML on disk. ``docs/packs.md``
documents every field.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.kit.packfiles import PACK_ROOT

NONE = "NONE"
ARTIFACT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$"
QUESTION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$"


class PackPathError(ValueError):
    """A path named by a pack that would leave the pack folder."""


def check_relative_path(relative: str) -> None:
    """Refuse a path that leaves its base folder by its spelling alone: empty, absolute, a
    ``..`` component, a NUL byte."""
    path = PurePosixPath(relative)
    if not relative.strip() or "\0" in relative:
        raise PackPathError(f"path {relative!r} is empty or contains a NUL byte")
    if path.is_absolute():
        raise PackPathError(f"path {relative!r} is absolute; name a file inside the pack folder")
    if ".." in path.parts:
        raise PackPathError(f"path {relative!r} leaves the pack folder ('..' is not allowed)")


def confined_path(base: Path, relative: str) -> Path:
    """``base / relative``, refused unless it stays inside ``base`` once symlinks are resolved.

    Used when a pack is loaded (``PACK_ROOT`` in the validation context) and again right before
    every read or write of a pack-named file, so a symlink swapped in later cannot escape."""
    check_relative_path(relative)
    root = base.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise PackPathError(
            f"path {relative!r} resolves to {target}, outside {root} (a symlink leaves the folder)"
        )
    return base / relative


def _pack_path(value: str, info: ValidationInfo) -> str:
    root = (info.context or {}).get(PACK_ROOT)
    if root is None:
        check_relative_path(value)
    else:
        confined_path(Path(root), value)
    return value


PackPath = Annotated[str, AfterValidator(_pack_path)]
"""A file path inside the pack folder (relative, no ``..``, no symlink out of the folder)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Modality(StrEnum):
    chart = "chart"
    screenshot = "screenshot"
    photo = "photo"
    infographic = "infographic"
    code = "code"
    email = "email"
    document = "document"


class DerivedKind(StrEnum):
    table_csv = "table_csv"
    summary = "summary"
    json = "json"
    text = "text"
    description = "description"


class DerivedFile(_Strict):
    """A workspace representation derived from the original (chart -> table, PDF -> text)."""

    path: PackPath
    kind: DerivedKind


class Artifact(_Strict):
    id: str = Field(pattern=ARTIFACT_ID_PATTERN)
    modality: Modality
    title: str = Field(min_length=1)
    originals: list[PackPath] = Field(min_length=1)
    derived: list[DerivedFile] = Field(default_factory=list)
    aliases: list[str] = Field(default_factory=list)
    text_representation: PackPath | None = Field(
        default=None, description="derived path whose text stands in for the original"
    )
    data: PackPath | None = Field(default=None, description="JSON file holding the generating data")
    keywords: list[str] = Field(
        default_factory=list,
        description="content keywords: tokens of the text representation that show the "
        "artifact's content is present (docs/packs.md)",
    )

    @model_validator(mode="after")
    def _text_representation_is_derived(self) -> Artifact:
        derived_paths = {item.path for item in self.derived}
        if self.text_representation is not None and self.text_representation not in derived_paths:
            raise ValueError(
                f"text_representation {self.text_representation!r} is not one of the "
                f"artifact's derived files {sorted(derived_paths)}"
            )
        return self

    @property
    def files(self) -> list[str]:
        return [*self.originals, *(item.path for item in self.derived)]

    @property
    def content_path(self) -> str:
        """The file whose text stands in for the artifact: ``text_representation``, else the
        first original (a code file is its own text)."""
        return self.text_representation or self.originals[0]


class Attachment(_Strict):
    artifact: str
    file: PackPath


class PlantingTurn(_Strict):
    """One user turn of the planting conversation and the assistant turn that follows it.

    ``assistant`` is scripted text, or ``None`` when the trunk model writes the reply."""

    user: str = Field(min_length=1)
    attachments: list[Attachment] = Field(default_factory=list)
    workspace_writes: list[PackPath] = Field(default_factory=list)
    assistant: str | None = None


class PackFile(_Strict):
    """``pack.yaml``: identity, artifacts, the planting script, and the companion files."""

    format: Literal["mirage-pack/1"] = "mirage-pack/1"
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$")
    version: int = Field(ge=1)
    description: str = ""
    artifacts: list[Artifact] = Field(min_length=1)
    planting: list[PlantingTurn] = Field(min_length=1)
    questions: PackPath = "questions.yaml"
    filler: PackPath = "filler.yaml"


class Answerability(StrEnum):
    YES = "YES"
    NO = "NO"


class AnswerType(StrEnum):
    numeric = "numeric"
    year = "year"
    date = "date"
    string = "string"
    enum = "enum"


class Difficulty(StrEnum):
    lookup = "lookup"
    comparison = "comparison"
    layout = "layout"


class ShortcutRisk(StrEnum):
    priors = "priors"
    filename = "filename"
    template = "template"
    lexical_cue = "lexical_cue"


SLOT_PATTERN = re.compile(r"\{\{(\w+)\}\}")
_YEAR = re.compile(r"^\d{4}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class Question(_Strict):
    id: str = Field(pattern=QUESTION_ID_PATTERN)
    question: str = Field(min_length=1)
    artifact: str = Field(description="artifact the question is about (also for NO questions)")
    gold_answerable: Answerability
    gold_source: str
    gold_answer: str
    answer_type: AnswerType
    tolerance: float | None = Field(default=None, ge=0)
    unit: str | None = None
    choices: list[str] | None = None
    difficulty: Difficulty
    query_type: str = Field(min_length=1)
    shortcut_risk: list[ShortcutRisk] = Field(default_factory=list)
    pair_id: str | None = None
    derivation: dict[str, Any] | None = None

    @field_validator("gold_answerable", mode="before")
    @classmethod
    def _upper_answerable(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _gold_is_consistent(self) -> Question:
        if self.gold_answerable is Answerability.NO:
            if self.gold_source != NONE or self.gold_answer != NONE:
                raise ValueError("an unanswerable question needs gold_source and gold_answer NONE")
            return self
        if NONE in (self.gold_source, self.gold_answer):
            raise ValueError("an answerable question needs a gold_source and a gold_answer")
        if self.gold_source != self.artifact:
            raise ValueError(f"gold_source {self.gold_source!r} differs from artifact")
        _check_answer_format(self)
        return self


def _check_answer_format(question: Question) -> None:
    answer, kind = question.gold_answer, question.answer_type
    if kind is AnswerType.numeric:
        try:
            float(answer.replace(",", ""))
        except ValueError:
            raise ValueError(f"numeric gold_answer {answer!r} is not a number") from None
    elif kind is AnswerType.year and not _YEAR.match(answer):
        raise ValueError(f"year gold_answer {answer!r} is not a four-digit year")
    elif kind is AnswerType.date and not _DATE.match(answer):
        raise ValueError(f"date gold_answer {answer!r} is not an ISO date YYYY-MM-DD")
    elif kind is AnswerType.enum and (not question.choices or answer not in question.choices):
        raise ValueError(f"enum gold_answer {answer!r} is not one of choices {question.choices}")
    if question.tolerance is not None and kind is not AnswerType.numeric:
        raise ValueError("tolerance is only meaningful for numeric answers")


class QuestionBank(_Strict):
    questions: list[Question] = Field(min_length=1)


class FillerTask(_Strict):
    """A multi-turn software-engineering or ML task. Each stage is a list of alternative
    templates; ``{{slot}}`` placeholders are filled from ``slots`` once per episode."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    title: str
    slots: dict[str, list[str]] = Field(default_factory=dict)
    stages: list[list[str]] = Field(min_length=1)

    @model_validator(mode="after")
    def _slots_cover_placeholders(self) -> FillerTask:
        for stage_index, stage in enumerate(self.stages):
            if not stage:
                raise ValueError(f"stage {stage_index} has no templates")
            for template in stage:
                missing = set(SLOT_PATTERN.findall(template)) - set(self.slots)
                if missing:
                    raise ValueError(f"stage {stage_index} uses undefined slots {sorted(missing)}")
        for name, values in self.slots.items():
            if not values:
                raise ValueError(f"slot {name!r} has no values")
        return self


class FillerLibrary(_Strict):
    """Tasks plus optional persona-consistent openers and closers, one of each drawn per turn
    (an empty string among them means "none")."""

    persona: str
    openers: list[str] = Field(default_factory=list)
    closers: list[str] = Field(default_factory=list)
    tasks: list[FillerTask] = Field(min_length=1)
