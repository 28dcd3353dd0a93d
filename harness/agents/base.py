"""The ``AgentUnderTest`` seam.

Above: the probe runner, which hands one checkpoint and one probe message per call and an
attribution tag unique to the probe. Below: the built-in runtime, an OpenAI-compatible agent
endpoint, or a user command. Every call starts from a fresh restore of the checkpoint, so no
probe sees another's question or answer. Agent failures (provider errors, timeouts, HTTP
errors, garbage) come back as ``ProbeReply.error``, never as an exception or a parse failure.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from harness.checkpoints import Checkpoint
from harness.records import ProbeUsage, ToolCallRecord


class ProbeReply(BaseModel):
    text: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    usage: ProbeUsage = Field(default_factory=ProbeUsage)
    latency_s: float = 0.0
    error: str | None = None
    restored_sha256: str | None = None
    trace: dict[str, Any] = Field(default_factory=dict)


class AgentUnderTest(Protocol):
    name: str

    async def probe(self, checkpoint: Checkpoint, message: str, *, tag: str) -> ProbeReply: ...
