"""The ``AgentUnderTest`` seam.

Above: a protocol's probe runner (MIRAGE's probes, CUE's ``agent`` memory system), which hands
one restore point and one probe message per call and an attribution tag unique to the probe.
Below: the built-in runtime, an OpenAI-compatible agent endpoint, a user command, or OpenClaw.
Every call starts from a fresh restore of its ``RestorePoint``, so no probe sees another's
question or answer. Agent failures (provider errors and refusals, timeouts, HTTP errors, garbage)
come back as ``ProbeReply.error``, never as an exception or a parse failure. Nothing here knows a
protocol: MIRAGE's checkpoints and CUE's empty sessions both satisfy ``RestorePoint``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from harness.kit.agents.context import ProbeContext

MemoryURL = Callable[[str], str]
"""Maps a probe's attribution tag to the memory-server URL the agent uses for that probe."""


class AgentFailure(RuntimeError):
    """An agent under test could not be installed, configured, started or driven; the message is
    one line naming what to do, and the probes already finished are kept."""


class RestorePoint(Protocol):
    """What a probe starts from: a saved session (``snapshot_path``, a ``runtime.snapshot``
    file) in a folder of its own, and the facts about it an adapter may pass on (the command
    adapter sends them all). MIRAGE's ``Checkpoint`` is one; ``harness.kit.agents.restore``
    writes one for a session built in code."""

    @property
    def directory(self) -> Path: ...

    @property
    def state(self) -> str: ...

    @property
    def snapshot_path(self) -> Path: ...

    @property
    def snapshot_sha256(self) -> str: ...

    @property
    def workspace_version(self) -> str | None:
        """The memory workspace version the session saw (None: unversioned)."""

    @property
    def eit(self) -> int:
        """The session's effective input tokens."""

    @property
    def compaction_count(self) -> int: ...


class ToolCallRecord(BaseModel):
    """One tool call attempted in the probe turn, with its parse/compliance outcome. A call the
    agent did not run but answered with a tool error (its body did not decode, or its arguments
    failed the tool's schema) has ``executed`` false, ``error_returned`` true and the error the
    model saw as ``result_text``."""

    name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    label: str = "ok"
    executed: bool = False
    error: str | None = None
    result_text: str | None = Field(
        default=None, description="what the tool returned to the agent (None: not known)"
    )
    error_returned: bool = Field(
        default=False,
        description="not run: the agent answered the call with a tool error (in result_text)",
    )


class ProbeUsage(BaseModel):
    """Tokens of one probe: ``eit`` is the input of its first backbone call (the state's depth
    plus the question); the other fields sum over every call of the probe turn (tool rounds
    included): all input, the parts read from and written to a prompt cache, output."""

    eit: int | None = None
    input_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    calls: int | None = None


class ProbeReply(BaseModel):
    """One probe's outcome. ``trace["tool_calls_reported"]`` is true when the agent gave its own
    account of the probe's tool calls (``tool_calls``), false when its reply said nothing.
    ``context`` is what the probe had before its question (None: the adapter did not say).
    ``finish_reason`` is the provider's for the probe turn's last model call, also when that
    call failed (a ``content_filter`` refusal comes back as ``error``; None: not known)."""

    text: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    usage: ProbeUsage = Field(default_factory=ProbeUsage)
    latency_s: float = 0.0
    error: str | None = None
    finish_reason: str | None = None
    restored_sha256: str | None = None
    context: ProbeContext | None = None
    trace: dict[str, Any] = Field(default_factory=dict)


class AgentUnderTest(ABC):
    """The whole contract of an agent the harness probes: a ``name`` (its results folder and
    report label), ``probe`` (required), the memory-server binding and ``aclose``."""

    name: str
    memory_url: MemoryURL | None = None
    probe_group_size: int | None = None
    """Probes it answers as one batch when they run as one lockstep group (the built-in agent
    over a batching backbone); None: probes are independent."""

    @abstractmethod
    async def probe(self, checkpoint: RestorePoint, message: str, *, tag: str) -> ProbeReply:
        """Restore ``checkpoint`` afresh, send ``message`` and return the reply; ``tag`` is the
        probe's attribution tag. Agent failures come back as ``ProbeReply.error``."""

    def bind_memory(self, memory_url: MemoryURL | None) -> None:
        """Use ``memory_url(tag)`` as the memory server of each probe (``None``: no memory)."""
        self.memory_url = memory_url

    async def aclose(self) -> None:  # noqa: B027  (optional: most agents hold nothing open)
        """Release what the agent holds open (HTTP clients, processes); nothing by default."""
