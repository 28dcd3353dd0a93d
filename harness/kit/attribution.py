"""Attribution of memory-server calls to probes, without trusting the agent under test.

Above: the probe loop, through ``AttributedAgent`` (an ``AgentUnderTest`` wrapping an agent we
did not write). Below: the memory server's call log (``memory_server.calllog``), which records
every tool call with the tag of the URL or header it arrived on.

Rules (docs/own_agent.md):

- Every probe has its own tag and its own MCP URL ``/t/<tag>/mcp``, handed to the agent with the
  request. A call logged with a probe's tag belongs to that probe, however many probes run at
  once.
- A call on the untagged endpoint (an agent configured with one fixed URL) is attributed by time
  window: it belongs to the probe in flight when it was logged — valid only when exactly one
  probe was in flight during that probe's whole window. If an untagged call lands while probes
  overlap, it cannot be attributed: the run stops with ``AttributionError`` (resume with
  ``--concurrency 1``) instead of writing records with a wrong retrieval path.
- The probe's memory calls are the ones the server saw (each with the artifact ids it returned);
  a protocol decides the retrieval path from them (MIRAGE: R_tool when one is a retrieval call
  or returned the artifact). The calls the agent itself reports are compared with the server's
  and disagreements recorded.

Calls are read from the byte offset the log had when the probe started, so calls of an earlier
(killed) run with the same tag never count.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, Field

from harness.kit.agents.base import (
    AgentUnderTest,
    MemoryURL,
    ProbeReply,
    RestorePoint,
    ToolCallRecord,
)
from memory_server.calllog import CallRecord

log = structlog.get_logger(__name__)

MEMORY_TOOLS: frozenset[str] = frozenset({"artifact_recall", "artifact_get", "memory_append"})
RETRIEVAL_TOOLS: frozenset[str] = frozenset(
    {"artifact_recall", "artifact_get", "memory_search", "memory_get", "memory_recall"}
)
"""The memory server's retrieval tools (``artifact_recall``, ``artifact_get``) and the released
classifier's list (OpenClaw's ``memory_search`` / ``memory_get``, and ``memory_recall``)."""


class AttributionError(RuntimeError):
    """Untagged memory calls arrived while several probes were in flight."""


class ToolCallDisagreement(BaseModel):
    """Where the agent's own account of its memory calls differs from the server's log."""

    reported_not_seen: dict[str, int] = Field(default_factory=dict)
    seen_not_reported: dict[str, int] = Field(default_factory=dict)
    path_differs: bool = Field(
        description="the agent's report and the server disagree on whether a retrieval call ran"
    )


class ProbeAttribution(BaseModel):
    """What the memory server saw for one probe (``trace.attribution`` of its record)."""

    tag: str
    tagged_calls: int = 0
    window_calls: int = 0
    agent_reported: bool = False
    disagreement: ToolCallDisagreement | None = None


def read_calls_from(path: Path, offset: int) -> tuple[list[CallRecord], int]:
    """Complete call-log lines from byte ``offset``; returns them and the offset after them."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return [], offset
    complete = data[: data.rfind(b"\n") + 1]
    calls = []
    for line in complete.splitlines():
        if line.strip():
            try:
                calls.append(CallRecord.model_validate_json(line))
            except ValueError:
                log.warning("attribution.unreadable_call_line", path=str(path))
    return calls, offset + len(complete)


def log_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


@dataclass
class _Window:
    start: int
    overlapped: bool = False
    others: set[str] = field(default_factory=set)


class CallAttributor:
    """Tracks probes in flight and, when one ends, the calls that belong to it."""

    def __init__(self, call_log: Path) -> None:
        self.call_log = call_log
        self._open: dict[str, _Window] = {}
        self._lock = threading.Lock()

    def begin(self, tag: str) -> None:
        with self._lock:
            if tag in self._open:
                raise ValueError(f"probe {tag} is already in flight")
            window = _Window(start=log_size(self.call_log))
            for other in self._open.values():
                other.overlapped = True
            window.overlapped = bool(self._open)
            self._open[tag] = window

    def end(self, tag: str) -> tuple[list[CallRecord], list[CallRecord]]:
        """The probe's tagged calls and the untagged calls of its window."""
        with self._lock:
            window = self._open.pop(tag)
        calls, _ = read_calls_from(self.call_log, window.start)
        tagged = [c for c in calls if c.tag == tag]
        untagged = [c for c in calls if c.tag is None]
        if untagged and window.overlapped:
            raise AttributionError(
                f"{len(untagged)} memory call(s) arrived on the untagged endpoint while several "
                f"probes were in flight (probe {tag}); they cannot be attributed. Give the agent "
                "the per-probe URL (header X-Mirage-Memory-Url) or rerun with --concurrency 1 "
                "(the run resumes where it stopped)"
            )
        return tagged, untagged


def compare_reports(
    reported: list[ToolCallRecord] | None, seen: list[CallRecord]
) -> ToolCallDisagreement | None:
    """None when the agent reported nothing or its memory calls match the server's."""
    if reported is None:
        return None
    said = Counter(c.name for c in reported if c.name in MEMORY_TOOLS)
    saw = Counter(c.tool for c in seen if c.tool in MEMORY_TOOLS)
    if said == saw:
        return None
    said_tool = any(name in RETRIEVAL_TOOLS for name in said)
    saw_tool = any(name in RETRIEVAL_TOOLS for name in saw)
    return ToolCallDisagreement(
        reported_not_seen={k: v for k, v in (said - saw).items() if k},
        seen_not_reported=dict(saw - said),
        path_differs=said_tool != saw_tool,
    )


def hits_text(call: CallRecord) -> str | None:
    """What the server's log says a call returned: the artifact ids, in rank order (the log
    keeps no result text); None when it returned none."""
    return f"artifact ids returned: {', '.join(call.hits)}" if call.hits else None


def server_calls(calls: list[CallRecord]) -> list[ToolCallRecord]:
    """The server's calls as the record's ``tool_calls`` (executed: the server ran them), each
    with the artifact ids it returned as its ``result_text``."""
    return [
        ToolCallRecord(
            name=c.tool,
            arguments=dict(c.arguments),
            label="ok",
            executed=True,
            error=c.error,
            result_text=hits_text(c),
        )
        for c in calls
    ]


class AttributedAgent(AgentUnderTest):
    """An ``AgentUnderTest`` whose R_tool evidence is the memory server's call log; it wraps an
    agent we did not write (``inner``) and passes the memory binding and ``aclose`` through."""

    def __init__(self, inner: AgentUnderTest, call_log: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.attributor = CallAttributor(call_log)

    def bind_memory(self, memory_url: MemoryURL | None) -> None:
        super().bind_memory(memory_url)
        self.inner.bind_memory(memory_url)

    async def probe(self, checkpoint: RestorePoint, message: str, *, tag: str) -> ProbeReply:
        self.attributor.begin(tag)
        try:
            reply = await self.inner.probe(checkpoint, message, tag=tag)
        finally:
            tagged, untagged = self.attributor.end(tag)
        return attributed_reply(reply, tag, tagged, untagged)

    async def aclose(self) -> None:
        await self.inner.aclose()


def attributed_reply(
    reply: ProbeReply, tag: str, tagged: list[CallRecord], untagged: list[CallRecord]
) -> ProbeReply:
    reported_flag = bool(reply.trace.get("tool_calls_reported"))
    reported = list(reply.tool_calls) if reported_flag else None
    seen = tagged + untagged
    attribution = ProbeAttribution(
        tag=tag,
        tagged_calls=len(tagged),
        window_calls=len(untagged),
        agent_reported=reported_flag,
        disagreement=compare_reports(reported, seen),
    )
    trace: dict[str, Any] = {
        **reply.trace,
        "attribution": attribution.model_dump(),
        "agent_tool_calls": [c.model_dump() for c in reply.tool_calls],
    }
    return reply.model_copy(update={"tool_calls": server_calls(seen), "trace": trace})
