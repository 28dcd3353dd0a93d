"""One answered CUE question: the line ``results.jsonl`` holds per (condition, question, repeat).

Above: the runner appends records; metrics, statistics and the report read them. Below: the
kit's append-only, keyed, resumable log (``harness.kit.results.ResultsLog``), which CUE shares
with ``mirage run``: a killed run resumes without losing or duplicating a record.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from harness.cue.answer import ParseRule
from harness.cue.schema import Letter, Setting, Task

RESULTS_FILE = "results.jsonl"


class CueKey(NamedTuple):
    condition: str
    question_id: str
    repeat: int


class CueUsage(BaseModel):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None


class CueRecord(BaseModel):
    """docs/cue.md describes every field."""

    model_config = ConfigDict(extra="forbid")

    condition: str = Field(min_length=1)
    question_id: str = Field(min_length=1)
    repeat: int = Field(default=0, ge=0)
    profile: str
    task: Task
    setting: Setting
    answer: Letter
    model: str
    raw_output: str | None = None
    choice: Letter | None = None
    parse_rule: ParseRule = "none"
    correct: bool | None = Field(default=None, description="None when the call failed")
    retrieved: list[str] = Field(
        default_factory=list, description="round ids the system ranked, best first"
    )
    in_context: list[str] = Field(
        default_factory=list, description="round ids placed in the prompt, in prompt order"
    )
    clue_rounds: list[str] = Field(default_factory=list)
    memory_tokens: int = Field(default=0, ge=0, description="retrieved input tokens (cl100k)")
    usage: CueUsage = Field(default_factory=CueUsage)
    latency_s: float | None = Field(default=None, ge=0)
    error: str | None = None

    @property
    def key(self) -> CueKey:
        return CueKey(self.condition, self.question_id, self.repeat)

    @property
    def scored(self) -> bool:
        """A recorded answer that enters the metrics (failed calls do not)."""
        return self.error is None and self.correct is not None
