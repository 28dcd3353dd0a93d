"""The built-in runtime as the agent under test (what ``mirage run`` uses by default).

Each probe restores a fresh session from the checkpoint (verified once, then parsed from memory),
switches it to the answerer model, borrows a connection to the memory server and runs one agent
turn. R_tool evidence comes from the executed calls of that turn.

Connections are pooled (``harness.kit.agents.memory_connections``): a probe's tagged URL is
the plain endpoint plus the probe's tag header on a connection lent to that probe alone.
``aclose()`` closes them.
"""

from __future__ import annotations

import time

from harness.kit.agents.base import (
    AgentUnderTest,
    MemoryURL,
    ProbeReply,
    ProbeUsage,
    RestorePoint,
    ToolCallRecord,
)
from harness.kit.agents.context import (
    INSTRUCTIONS_SOURCE,
    BootItem,
    ProbeContext,
    context_from_messages,
)
from harness.kit.agents.memory_connections import MemoryConnections
from harness.kit.agents.transcript import system_text
from runtime.agent import Agent, TurnRecord
from runtime.backbones.base import Backbone, ProviderError
from runtime.session import Session
from runtime.snapshot import SnapshotCache


def turn_usage(record: TurnRecord) -> ProbeUsage:
    """EIT of the probe's first backbone call (the state's depth plus the question), and the
    probe's tokens summed over its calls."""
    if not record.usage:
        return ProbeUsage()
    return ProbeUsage(
        eit=record.usage[0].input_tokens,
        input_tokens=sum(u.input_tokens for u in record.usage),
        cached_tokens=sum(u.cached_tokens for u in record.usage),
        cache_write_tokens=sum(u.cache_write_tokens for u in record.usage),
        output_tokens=sum(u.output_tokens for u in record.usage),
        calls=len(record.usage),
    )


def turn_tool_calls(record: TurnRecord) -> list[ToolCallRecord]:
    return [
        ToolCallRecord(
            name=c.name,
            arguments=dict(c.arguments),
            label=c.label,
            executed=c.executed,
            error=c.error,
            result_text=c.result,
            error_returned=c.error_returned,
        )
        for c in record.tool_calls
    ]


def session_context(session: Session) -> ProbeContext:
    """What a restored session holds before the probe message: its messages (what the probe's
    first backbone call sends after the system prompt) and its system prompt, the built-in
    runtime's only start-of-session material."""
    return ProbeContext(
        source="restored_session",
        messages=tuple(context_from_messages(session.messages)),
        boot=(BootItem(source=INSTRUCTIONS_SOURCE, text=system_text(session)),),
    )


def as_answerer(session: Session, model: str, max_output_tokens: int, adapters: bool) -> None:
    """Switch a restored trunk session to the answerer: its model, reply budget and parser."""
    session.config = session.config.model_copy(
        update={
            "model": model,
            "max_output_tokens": max_output_tokens,
            "adapters": adapters,
            "parser": None,
        }
    )


class BuiltinAgent(AgentUnderTest):
    def __init__(
        self,
        backbone: Backbone,
        *,
        memory_url: MemoryURL | None,
        max_output_tokens: int = 96,
        adapters: bool = False,
    ) -> None:
        self.backbone = backbone
        self.name = backbone.model
        self.probe_group_size = backbone.batch_width
        self.memory_url = memory_url
        self.max_output_tokens = max_output_tokens
        self.adapters = adapters
        self._snapshots = SnapshotCache()
        self._contexts: dict[str, ProbeContext] = {}  # by checkpoint: the same for every probe
        self._connections = MemoryConnections()

    def restore(self, checkpoint: RestorePoint) -> tuple[Session, str]:
        """A fresh session of ``checkpoint`` as the answerer, and its name."""
        session = self._snapshots.restore(checkpoint.snapshot_path)
        as_answerer(session, self.backbone.model, self.max_output_tokens, self.adapters)
        return session, self._snapshots.name(checkpoint.snapshot_path)

    def _context(self, checkpoint: RestorePoint, session: Session) -> ProbeContext:
        context = self._contexts.get(checkpoint.snapshot_sha256)
        if context is None:
            context = self._contexts[checkpoint.snapshot_sha256] = session_context(session)
        return context

    async def probe(self, checkpoint: RestorePoint, message: str, *, tag: str) -> ProbeReply:
        session, restored = self.restore(checkpoint)
        context = self._context(checkpoint, session)
        started = time.perf_counter()
        try:
            record = await self._turn(session, message, tag)
        except ProviderError as error:
            return ProbeReply(
                error=f"provider_error: {error}",
                finish_reason=error.finish_reason,
                restored_sha256=restored,
                latency_s=time.perf_counter() - started,
                context=context,
            )
        return ProbeReply(
            text=record.reply,
            tool_calls=turn_tool_calls(record),
            usage=turn_usage(record),
            latency_s=time.perf_counter() - started,
            restored_sha256=restored,
            context=context,
            finish_reason=record.finish_reason,
            trace={"rounds": record.rounds, "parse_outcomes": list(record.parse_outcomes)},
        )

    async def _turn(self, session: Session, message: str, tag: str) -> TurnRecord:
        if self.memory_url is None:
            return await Agent(session, self.backbone).turn(message, purpose="probe")
        async with self._connections.lease(self.memory_url(tag)) as tools:
            return await Agent(session, self.backbone, tools).turn(message, purpose="probe")

    async def aclose(self) -> None:
        """Close the pooled memory-server connections (before the server stops) and the
        backbone's own."""
        await self._connections.aclose()
        await self.backbone.aclose()
