"""The ``AgentUnderTest`` seam.

Above: the probe runner, which hands one checkpoint and one probe message per call and an
attribution tag unique to the probe. Below: the built-in runtime, an OpenAI-compatible agent
endpoint, or a user command. Every call starts from a fresh restore of the checkpoint, so no
probe sees another's question or answer. Agent failures (provider errors, timeouts, HTTP
errors, garbage) come back as ``ProbeReply.error``, never as an exception or a parse failure.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from harness.mirage.checkpoints import Checkpoint
from harness.mirage.records import ProbeUsage, ToolCallRecord

MemoryURL = Callable[[str], str]
"""Maps a probe's attribution tag to the memory-server URL the agent uses for that probe."""


class ProbeReply(BaseModel):
    """One probe's outcome. ``trace["tool_calls_reported"]`` is true when the agent gave its own
    account of the probe's tool calls (``tool_calls``), false when its reply said nothing."""

    text: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    usage: ProbeUsage = Field(default_factory=ProbeUsage)
    latency_s: float = 0.0
    error: str | None = None
    restored_sha256: str | None = None
    trace: dict[str, Any] = Field(default_factory=dict)


class AgentUnderTest(ABC):
    """The whole contract of an agent the harness probes: a ``name`` (its results folder and
    report label), ``probe`` (required), the memory-server binding and ``aclose``."""

    name: str
    memory_url: MemoryURL | None = None

    @abstractmethod
    async def probe(self, checkpoint: Checkpoint, message: str, *, tag: str) -> ProbeReply:
        """Restore ``checkpoint`` afresh, send ``message`` and return the reply; ``tag`` is the
        probe's attribution tag. Agent failures come back as ``ProbeReply.error``."""

    def bind_memory(self, memory_url: MemoryURL | None) -> None:
        """Use ``memory_url(tag)`` as the memory server of each probe (``None``: no memory)."""
        self.memory_url = memory_url

    async def aclose(self) -> None:  # noqa: B027  (optional: most agents hold nothing open)
        """Release what the agent holds open (HTTP clients, processes); nothing by default."""
