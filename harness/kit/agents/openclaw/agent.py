"""OpenClaw as the agent under test: every probe on a fresh fork of its checkpoint's session.

Above: the probe runner, through ``OpenClawAttributedAgent`` (R_tool from the memory server's
log, as for any agent we did not write, plus OpenClaw's own memory reads). Below:
``OpenClawHarness``. A probe: copy the checkpoint's memory files back into OpenClaw's
workspace (hash checked), fork ``ckpt-<state>`` into a new session, send the probe with model
``answer``, and read what the model endpoint saw: the first request's EIT and history (its hash
is the probe's ``restored_sha256``: equal for every probe of one state, so none saw another's
turn), the model's tool calls. Probes run one at a time (the memory files are shared). The
model endpoint rewrites each probe's ``Runtime:`` line to the trunk session's key and id
(``endpoint.TrunkRuntimeLine``), so consecutive probes of a state share the whole history
prefix in the answering model's cache.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from pathlib import Path
from typing import Any

import structlog

from harness.kit.agents.base import (
    AgentUnderTest,
    MemoryURL,
    ProbeReply,
    ProbeUsage,
    RestorePoint,
    ToolCallRecord,
)
from harness.kit.agents.context import ProbeContext, chat_text, context_from_chat
from harness.kit.agents.openclaw.config import ANSWER_MODEL, MCP_SERVER
from harness.kit.agents.openclaw.endpoint import SessionIdentity
from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.agents.openclaw.gateway import TurnError, session_key
from harness.kit.agents.openclaw.harness import OpenClawHarness
from harness.kit.agents.openclaw.state import (
    MEMORY_COPY,
    TRUNK_SESSION,
    OpenClawCheckpoint,
    copy_memory,
    history_digest,
    is_memory_path,
    openclaw_boot,
    read_openclaw_checkpoint,
)
from harness.kit.attribution import AttributedAgent
from runtime.serve import RequestRecord

log = structlog.get_logger(__name__)

MCP_PREFIX = f"{MCP_SERVER}__"
OWN_MEMORY_READS = "openclaw_memory_reads"


def probe_session(tag: str) -> str:
    """A new session per probe attempt (a re-run after a failure never reuses one)."""
    return f"p-{tag.lower()}-{uuid.uuid4().hex[:8]}"


def tool_results(request: RequestRecord | None) -> list[str | None]:
    """The tool results a request hands back to the model (its trailing ``tool`` messages),
    in order; empty when the request or its messages are unknown."""
    if request is None or not request.request_messages:
        return []
    trailing: list[str | None] = []
    for message in reversed(request.request_messages):
        if message.get("role") != "tool":
            break
        trailing.append(chat_text(message.get("content")))
    return trailing[::-1]


def reported_calls(requests: list[RequestRecord]) -> list[ToolCallRecord]:
    """The answering model's tool calls, MCP names without OpenClaw's ``mirage__`` prefix; a
    call counts as executed when OpenClaw went back to the model after it, and its result is
    what that next request handed back (in order)."""
    calls = []
    for position, request in enumerate(requests):
        following = requests[position + 1] if position + 1 < len(requests) else None
        results = tool_results(following)
        for index, call in enumerate(request.tool_calls):
            calls.append(
                ToolCallRecord(
                    name=call.name.removeprefix(MCP_PREFIX),
                    arguments=dict(call.arguments),
                    label="ok",
                    executed=following is not None,
                    result_text=results[index] if index < len(results) else None,
                )
            )
    return calls


def probe_context(requests: list[RequestRecord]) -> ProbeContext:
    """What OpenClaw's first model request of the probe carried before the probe message: its
    restored history (the active context) and its system prompt, split into the bootstrap
    files OpenClaw injected (``openclaw_boot``). Unavailable when no request was seen."""
    messages = requests[0].request_messages if requests else None
    if not messages:
        return ProbeContext.missing("OpenClaw sent no model request for the probe")
    history = messages[:-1] if messages[-1].get("role") == "user" else messages
    boot = [
        item
        for message in history
        if message.get("role") == "system"
        for item in openclaw_boot(chat_text(message.get("content")))
    ]
    return ProbeContext(
        source="openclaw_session",
        messages=tuple(context_from_chat(history)),
        boot=tuple(boot),
    )


def own_memory_reads(calls: list[ToolCallRecord]) -> list[ToolCallRecord]:
    """OpenClaw's ``memory_search`` (its index holds memory files only) and ``memory_get`` or
    ``read`` of a memory path: what the paper counts as tool retrieval besides the memory
    server."""
    return [
        c
        for c in calls
        if c.name == "memory_search"
        or (c.name in {"memory_get", "read"} and is_memory_path(c.arguments.get("path")))
    ]


def probe_usage(requests: list[RequestRecord]) -> ProbeUsage:
    if not requests:
        return ProbeUsage()
    return ProbeUsage(
        eit=requests[0].eit,
        cached_tokens=sum(r.cached_tokens or 0 for r in requests),
        output_tokens=sum(r.output_tokens or 0 for r in requests),
    )


def restored_digest(memory_sha256: str, requests: list[RequestRecord]) -> str | None:
    history = history_digest(requests[0].request_messages) if requests else None
    if history is None:
        return None
    return hashlib.sha256(f"{memory_sha256}:{history}".encode()).hexdigest()


class OpenClawAgent(AgentUnderTest):
    def __init__(self, claw: OpenClawHarness, name: str) -> None:
        self.claw = claw
        self.name = name
        self._states: dict[Path, OpenClawCheckpoint] = {}

    def bind_memory(self, memory_url: MemoryURL | None) -> None:
        """Nothing to bind per probe: OpenClaw's MCP URL is fixed in its generated config."""

    def restore_memory(self, checkpoint: RestorePoint) -> OpenClawCheckpoint:
        state = self._states.get(checkpoint.directory)
        if state is None:
            state = read_openclaw_checkpoint(checkpoint.snapshot_path)
            self._states[checkpoint.directory] = state
        copied = copy_memory(checkpoint.directory / MEMORY_COPY, self.claw.paths.workspace)
        if copied != state.memory_sha256:
            raise OpenClawError(
                f"{checkpoint.directory / MEMORY_COPY}: OpenClaw's memory files differ from the "
                f"checkpoint's hash; delete {checkpoint.directory.parent} to rebuild the trunk"
            )
        return state

    def use_trunk_runtime_line(self) -> None:
        """From now on the endpoint gives probe requests the trunk session's ``Runtime:``
        fields (read once from OpenClaw's store; without a session id nothing is rewritten)."""
        rewrite = self.claw.endpoint.runtime_line
        if rewrite.trunk is not None:
            return
        node = self.claw.node(TRUNK_SESSION)
        if node is None or node.session_id is None:
            log.warning("openclaw.trunk_session_id_missing", session=TRUNK_SESSION)
            return
        rewrite.trunk = SessionIdentity(session_key(TRUNK_SESSION), node.session_id)

    async def probe(self, checkpoint: RestorePoint, message: str, *, tag: str) -> ProbeReply:
        state = self.restore_memory(checkpoint)
        self.use_trunk_runtime_line()
        session = probe_session(tag)
        await self.claw.fork(state.session, session)
        mark = self.claw.endpoint.requests.mark()
        started = time.perf_counter()
        error: str | None = None
        text: str | None = None
        try:
            text = (await self.claw.chat.turn(session, message, model=ANSWER_MODEL)).text
        except TurnError as exc:
            error = f"agent_error: {exc}"
        latency = time.perf_counter() - started
        requests = self.claw.endpoint.requests.since(mark, ANSWER_MODEL)
        calls = reported_calls(requests)
        trace: dict[str, Any] = {
            "tool_calls_reported": True,
            "session": session,
            "model_requests": len(requests),
            OWN_MEMORY_READS: [c.model_dump() for c in own_memory_reads(calls)],
        }
        return ProbeReply(
            text=text,
            tool_calls=calls,
            usage=probe_usage(requests),
            latency_s=latency,
            error=error,
            restored_sha256=restored_digest(state.memory_sha256, requests),
            context=probe_context(requests),
            finish_reason=requests[-1].finish_reason if requests else None,
            trace=trace,
        )


class OpenClawAttributedAgent(AttributedAgent):
    """R_tool from the memory server's log (time window: OpenClaw's MCP URL is fixed in its
    config) plus OpenClaw's own reads of its memory files."""

    async def probe(self, checkpoint: RestorePoint, message: str, *, tag: str) -> ProbeReply:
        reply = await super().probe(checkpoint, message, tag=tag)
        own = [ToolCallRecord.model_validate(c) for c in reply.trace.get(OWN_MEMORY_READS, [])]
        return reply.model_copy(update={"tool_calls": [*reply.tool_calls, *own]})
