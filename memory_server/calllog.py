"""The call log: one JSON line per MCP tool call the memory server handled.

Above: the harness, which labels a probe R_tool when the log holds a call with that probe's tag
(also for agents we did not write). Below: an append-only JSONL file, by default
``<workspace>/.mirage/calls.jsonl``. Each line is written with a single ``write`` on a file
opened in append mode, under a lock, so concurrent calls never interleave.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memory_server.lines import split_lines


class CallRecord(BaseModel):
    """One tool call as the server saw it."""

    model_config = ConfigDict(frozen=True)

    time: str = Field(description="UTC time the call finished, ISO 8601")
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    hits: list[str] = Field(
        default_factory=list, description="artifact ids returned, in rank order"
    )
    tag: str | None = Field(default=None, description="caller/session attribution tag")
    session: str | None = Field(
        default=None, description="MCP session id when the transport has one"
    )
    transport: str = "unknown"
    latency_ms: float = 0.0
    error: str | None = None


class CallLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, record: CallRecord) -> None:
        line = record.model_dump_json() + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def read_calls(path: str | os.PathLike[str], tag: str | None = None) -> list[CallRecord]:
    """The calls in a call log, oldest first; only those with ``tag`` when given. A missing log
    means no calls. A torn last line (a server killed mid-write) is skipped."""
    log_path = Path(path)
    if not log_path.is_file():
        return []
    records = []
    for line in split_lines(log_path.read_text(encoding="utf-8")):
        if not line.strip():
            continue
        try:
            record = CallRecord.model_validate_json(line)
        except ValueError:
            continue
        if tag is None or record.tag == tag:
            records.append(record)
    return records
