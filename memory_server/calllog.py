"""The call log: one JSON line per MCP tool call the memory server handled.

Above: the harness, which labels a probe R_tool when the log holds a call with that probe's tag
(also for agents we did not write), and the note write path (``memory_server.appends``), which
logs every ``memory_append`` durably before its note is written and finds earlier appends
(idempotency keys, crash recovery) by reading the log back. Below: an append-only JSONL file,
by default ``<workspace>/.mirage/calls.jsonl``. Each line is written with a single ``write`` on a
file opened in append mode, under a lock, so concurrent calls never interleave; a durable
append is also fsynced before ``append`` returns.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
import uuid
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
    call_id: str | None = Field(default=None, description="unique id of the call")
    result: dict[str, Any] | None = Field(
        default=None,
        description="what a write returned, logged before it was acknowledged (memory_append: "
        "path, start_line, end_line, citation, text_sha256; replay_of for a retried key)",
    )


class CallLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, record: CallRecord, *, durable: bool = False) -> None:
        """Append one line; ``durable``: fsync it before returning (the lock is not held
        during the fsync, which flushes every line written so far)."""
        line = record.model_dump_json() + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            with self._lock:
                os.write(fd, line.encode("utf-8"))
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    def seal(self) -> None:
        """End a torn last line (a writer killed mid-line), so the next record starts a line
        of its own instead of being glued to the torn one."""
        with self._lock:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
            except FileNotFoundError:
                return
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    os.write(fd, b"\n")
                    os.fsync(fd)
            finally:
                os.close(fd)

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def records_from(self, offset: int) -> tuple[list[CallRecord], int]:
        """The complete lines from byte ``offset`` on, and the offset after them (a torn or
        unreadable line is skipped)."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return [], offset
        complete = data[: data.rfind(b"\n") + 1]
        records = []
        for line in complete.split(b"\n"):
            if line.strip():
                try:
                    records.append(CallRecord.model_validate_json(line))
                except ValueError:
                    continue
        return records, offset + len(complete)


class CallDraft:
    """One call in progress: its id, its caller and when it started. Its record is logged once:
    by the service when the call ends, or earlier by a write, durably, before the write is done
    (``memory_server.appends``); a write that then fails logs a second record for the same
    ``call_id`` saying so."""

    def __init__(
        self,
        log: CallLog | None,
        tool: str,
        arguments: dict[str, Any],
        *,
        tag: str | None,
        session: str | None,
        transport: str,
    ) -> None:
        self.call_log = log
        self.call_id = uuid.uuid4().hex
        self.logged = False
        self._fields: dict[str, Any] = {
            "tool": tool,
            "arguments": arguments,
            "tag": tag,
            "session": session,
            "transport": transport,
        }
        self._started = time.perf_counter()

    def record(
        self,
        *,
        hits: list[str] | None = None,
        error: str | None = None,
        result: dict[str, Any] | None = None,
    ) -> CallRecord:
        return CallRecord(
            time=now_iso(),
            hits=hits or [],
            latency_ms=round((time.perf_counter() - self._started) * 1000, 3),
            error=error,
            call_id=self.call_id,
            result=result,
            **self._fields,
        )

    def log(self, record: CallRecord, *, durable: bool = False) -> None:
        """Append ``record`` to the call log (none: calls are not logged)."""
        if self.call_log is not None:
            self.call_log.append(record, durable=durable)
        self.logged = True


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def read_calls(path: str | os.PathLike[str], tag: str | None = None) -> list[CallRecord]:
    """The calls in a call log, oldest first; only those with ``tag`` when given. A missing log
    means no calls. A torn last line (a server killed mid-write) is skipped. A call logged
    twice (an append logged before it was written, whose write then failed) is listed once, in
    its first place, as its last record says."""
    log_path = Path(path)
    if not log_path.is_file():
        return []
    records: list[CallRecord] = []
    places: dict[str, int] = {}
    for line in split_lines(log_path.read_text(encoding="utf-8")):
        if not line.strip():
            continue
        try:
            record = CallRecord.model_validate_json(line)
        except ValueError:
            continue
        if tag is not None and record.tag != tag:
            continue
        if record.call_id is not None and record.call_id in places:
            records[places[record.call_id]] = record
            continue
        if record.call_id is not None:
            places[record.call_id] = len(records)
        records.append(record)
    return records
