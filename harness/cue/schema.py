"""The CUE pack format (``cue-pack/1``): profiles with multi-session histories, and questions.

Above: the pack loader, the importer, the builder, validation and the runner. Below: YAML/JSON
files read with the kit's pack-file helpers (``harness.kit.packfiles``), so every problem names
the file, the dotted field path and the id of the record it sits in.

A history file (``profiles/<id>.yaml``) holds only what a user and an assistant exchanged — text,
image captions and voice captions at each caption level — never a statement of the answers (the
release's ``explicit_preferences`` / ``implicit_preferences`` / ``scene_description`` are not part
of the format). Questions and their answer keys live in ``questions.yaml``, which no memory system
reads. docs/cue.md documents every field.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Letter = Literal["A", "B", "C", "D"]
LETTERS: tuple[Letter, ...] = ("A", "B", "C", "D")
REFUSAL_OPTION = "Not stated in the conversation history"

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9:._-]*$"


ImageLevel = Literal["brief", "medium", "detailed"]
"""Image-caption levels: dominant subjects; plus relations and scene; plus every peripheral
object (paper C.3)."""
IMAGE_LEVELS: tuple[ImageLevel, ...] = ("brief", "medium", "detailed")

AudioLevel = Literal["asr", "hint", "split"]
"""Audio-caption levels: speech only; speech and background in one description; speech and a
separately captioned background track (paper C.3)."""
AUDIO_LEVELS: tuple[AudioLevel, ...] = ("asr", "hint", "split")


class Task(StrEnum):
    entity_recall = "entity_recall"
    long_pattern = "long_pattern"
    recommendation = "recommendation"
    refusal = "refusal"


MEMORY_TASKS: tuple[Task, ...] = (Task.entity_recall, Task.long_pattern, Task.recommendation)
"""The tasks Memory Avg averages; Answer Refusal is reported apart (paper 5.1)."""

TASK_LABELS = {
    Task.entity_recall: "Entity Recall",
    Task.long_pattern: "Long Pattern",
    Task.recommendation: "Personalized Recommendation",
    Task.refusal: "Answer Refusal",
}


class Setting(StrEnum):
    explicit = "explicit"
    implicit = "implicit"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Media(_Strict):
    """An image or a voice message attached to a round, with its caption at each level the pack
    provides (image levels for images, audio levels for voice messages)."""

    id: str = Field(pattern=ID_PATTERN)
    file: str | None = Field(default=None, description="the media file inside the pack")
    source_file: str | None = Field(default=None, description="the path the release gave")
    captions: dict[str, str] = Field(min_length=1)


class Round(_Strict):
    round: str = Field(pattern=ID_PATTERN, description='round id, e.g. "D03:01"')
    user: str | None = None
    user_voice: dict[str, str] | None = Field(
        default=None,
        description="the user's turn as a voice message, captioned at each audio level "
        "(the release's user_voice_message_caption)",
    )
    assistant: str | None = None
    images: tuple[Media, ...] = ()
    voices: tuple[Media, ...] = ()

    @model_validator(mode="after")
    def _has_content(self) -> Round:
        if not (self.user or self.user_voice or self.assistant or self.images or self.voices):
            raise ValueError("a round needs user text, a voice message, an image or a reply")
        _check_levels("image", [m.captions for m in self.images], IMAGE_LEVELS)
        voice_captions = [m.captions for m in self.voices]
        user_voice = [self.user_voice] if self.user_voice else []
        _check_levels("audio", [*voice_captions, *user_voice], AUDIO_LEVELS)
        return self

    @property
    def evidence_ids(self) -> tuple[str, ...]:
        """Every id a clue may name to point at this round."""
        return (self.round, *(m.id for m in self.images), *(m.id for m in self.voices))


def _check_levels(kind: str, captions: list[dict[str, str]], levels: tuple[str, ...]) -> None:
    known = set(levels)
    for mapping in captions:
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise ValueError(f"unknown {kind} caption level(s) {unknown}; known: {sorted(known)}")


class Session(_Strict):
    session_id: str = Field(pattern=ID_PATTERN)
    date: str = Field(min_length=1, description="as the source wrote it; sessions are in order")
    rounds: tuple[Round, ...] = Field(min_length=1)


class ProfileHistory(_Strict):
    """``profiles/<id>.yaml``: one synthetic user and everything they exchanged."""

    id: str = Field(pattern=ID_PATTERN)
    name: str = Field(min_length=1)
    description: str = ""
    sessions: tuple[Session, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> ProfileHistory:
        seen: set[str] = set()
        for session in self.sessions:
            for round_ in session.rounds:
                for evidence_id in round_.evidence_ids:
                    if evidence_id in seen:
                        raise ValueError(f"id {evidence_id!r} is used twice in this history")
                    seen.add(evidence_id)
        return self


class Evidence(_Strict):
    """Machine-checkable support for a question (bundled packs; optional for imports).

    ``answer_terms``: any of them marks a clue item as supporting the answer (whole words,
    case-insensitive). ``absent_terms``: words no text of the profile's history may contain at
    any caption level (the distractors' and lures' key words).
    """

    answer_terms: tuple[str, ...] = ()
    absent_terms: tuple[str, ...] = ()


class Provenance(_Strict):
    """Where an imported question came from (never an answer-stating field)."""

    file: str
    qa_id: str
    point: str
    qa_type: str | None = None
    category: str | None = None


class Question(_Strict):
    id: str = Field(pattern=ID_PATTERN)
    profile: str
    task: Task
    setting: Setting
    question: str = Field(min_length=1, description="the stem, without the options")
    options: dict[Letter, str]
    answer: Letter
    clues: tuple[str, ...] = Field(description="round, image and voice ids of the supporting turns")
    evidence: Evidence | None = None
    source: Provenance | None = None

    @field_validator("options")
    @classmethod
    def _four_options(cls, options: dict[str, str]) -> dict[str, str]:
        missing = [letter for letter in LETTERS if not (options.get(letter) or "").strip()]
        if missing:
            raise ValueError(f"options need non-empty A, B, C and D; missing {missing}")
        return options

    @model_validator(mode="after")
    def _refusal_shape(self) -> Question:
        if self.task is not Task.refusal and not self.clues:
            raise ValueError("a non-refusal question needs at least one clue id")
        return self

    def prompt_block(self) -> str:
        """The stem followed by the four options, one per line."""
        lines = [
            self.question.strip(),
            *(f"{letter}. {self.options[letter]}" for letter in LETTERS),
        ]
        return "\n".join(lines)


class QuestionBank(_Strict):
    questions: tuple[Question, ...]

    @model_validator(mode="after")
    def _unique(self) -> QuestionBank:
        ids = [q.id for q in self.questions]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"question ids used twice: {duplicates}")
        return self


class SkippedItem(_Strict):
    """An imported record left out, with the reason (``skipped.yaml``)."""

    file: str
    record: str
    reason: str


class CuePackFile(_Strict):
    """``pack.yaml``."""

    format: Literal["cue-pack/1"] = "cue-pack/1"
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: int = Field(default=1, ge=1)
    description: str = ""
    language: str = "en"
    profiles: tuple[str, ...] = Field(min_length=1)
    image_levels: tuple[ImageLevel, ...] = Field(description="levels every image has")
    audio_levels: tuple[AudioLevel, ...] = Field(description="levels every voice message has")
    questions: str = "questions.yaml"


def profile_file(profile_id: str) -> str:
    return f"profiles/{profile_id}.yaml"


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


def contains_term(text: str, term: str) -> bool:
    """Whether ``term`` occurs in ``text`` as whole words, case-insensitively."""
    pattern = r"(?<![\w])" + re.escape(term.strip()) + r"(?![\w])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def content_words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}
