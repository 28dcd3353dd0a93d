"""The endpoint's request log: one JSON line per chat-completions call.

Each line records when, which model was asked for and which backbone answered, the effective
input tokens (EIT), the cached part, output tokens, latency, the parse outcome label of
mirage's per-model parser, the output constraint applied and the call options passed on, the
tool calls returned, or the error, and what the endpoint rewrote in the request, if anything.
Prompt and reply text are left out unless the log was opened with ``with_content=True``.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from runtime.backbones.base import Constraint
from runtime.parsers import OutcomeLabel


class LoggedCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class RequestRecord(BaseModel):
    time: datetime = Field(default_factory=lambda: datetime.now(UTC))
    request_id: str
    model: str
    """The model name the client asked for."""
    backbone: str | None = None
    """The model string of the backbone that answered."""
    stream: bool = False
    status: int = 200
    messages: int = 0
    tools: int = 0
    eit: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    usage_source: str | None = None
    latency_s: float = 0.0
    parse_outcome: OutcomeLabel | None = None
    constraint: Constraint | None = None
    """The output constraint the backbone applied: ``none``, ``tool_call`` (a call of any
    offered tool), ``named_tool``, ``json_object`` or ``json_schema``."""
    options: list[str] = Field(default_factory=list)
    """The request fields passed to the backbone as call options (``temperature``, ...)."""
    finish_reason: str | None = None
    tool_calls: list[LoggedCall] = Field(default_factory=list)
    error: str | None = None
    rewrite: str | None = None
    """What the endpoint changed in the request before serving it (``RequestRewrite``)."""
    request_messages: list[dict[str, Any]] | None = None
    reply_text: str | None = None


class RequestLog:
    """Appends ``RequestRecord`` lines to ``path`` (created with its folder); thread-safe."""

    def __init__(self, path: Path, *, with_content: bool = False) -> None:
        self.path = path
        self.with_content = with_content
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("a", encoding="utf-8")

    def write(self, record: RequestRecord) -> None:
        if not self.with_content:
            record = record.model_copy(update={"request_messages": None, "reply_text": None})
        line = record.model_dump_json(exclude_none=True) + "\n"
        with self._lock:
            self._handle.write(line)
            self._handle.flush()

    def close(self) -> None:
        with self._lock:
            self._handle.close()


def read_request_log(path: Path) -> list[RequestRecord]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [RequestRecord.model_validate_json(line) for line in lines if line.strip()]
