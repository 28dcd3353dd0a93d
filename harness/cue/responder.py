"""What a CUE memory system answers with for one question, and the profile it answers over.

Above: the memory systems (``systems``: full context, naive RAG, the mirage memory server;
``agent``: an agent we did not write) and the runner, which records each ``Response``. Below:
the pack's questions and textualized rounds (``schema``, ``textualize``) and the usage record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from harness.cue.records import CueUsage
from harness.cue.schema import Question
from harness.cue.textualize import MemoryUnit


class ProfileRun(BaseModel):
    """One profile under one condition: its history as text and all its questions (full
    context is cut to fit the longest, so a resumed run cuts it the same way)."""

    model_config = ConfigDict(frozen=True)

    profile_id: str
    name: str
    label: str
    units: tuple[MemoryUnit, ...]
    questions: tuple[Question, ...]


class Response(BaseModel):
    """One answered question: the reply (or the failure) and what the answerer was shown."""

    text: str | None = None
    error: str | None = None
    ranked: tuple[str, ...] = ()
    in_context: tuple[str, ...] = ()
    memory_tokens: int = 0
    usage: CueUsage = CueUsage()
    latency_s: float = 0.0


class Responder(Protocol):
    """A system's memory of one profile, able to answer a question."""

    async def respond(self, question: Question, tag: str) -> Response: ...


def ranked_rounds(hit_ids: Sequence[str], rounds: dict[str, str]) -> tuple[str, ...]:
    """The rounds of memory-server hits (artifact id -> round id in ``rounds``), best first,
    each once."""
    return tuple(dict.fromkeys(rounds[h] for h in hit_ids if h in rounds))
