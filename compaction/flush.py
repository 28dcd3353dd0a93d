"""The pre-compaction memory flush: one silent agent turn that appends durable notes.

Above: ``CompactionPolicy``, which runs it once per compaction cycle when the context crosses
the flush threshold. Below: the agent loop (``Agent.turn(purpose="flush")``) and the agent's
toolset, which must offer ``memory_append`` (the memory server's append-only write to
``memory/YYYY-MM-DD.md``; every other workspace file stays read-only).

Like OpenClaw's flush, the turn runs on a detached view: its prompt, replies and tool messages
are removed from the transcript afterwards, so the conversation the user and later turns see
is unchanged; only the notes written to the workspace persist. A reply starting with
``NO_REPLY`` (any case) is suppressed. Each flush is recorded in the session (see
``flush_records``) with its tool calls, and the backbone calls appear in the ledger with
purpose ``flush``. Without a ``memory_append`` tool the flush calls no model, writes nothing
and records ``status="no_tool"``. A reference summarizer (``compaction.references``) writes
its declared notes itself: each is one ``memory_append`` call through the agent's toolset, and
no model turn runs.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Literal

import structlog
from pydantic import BaseModel, Field

from compaction.references import NoteWriter
from runtime.agent import Agent, ToolCallRecord
from runtime.backbones.base import ProviderError
from runtime.session import Session

log = structlog.get_logger(__name__)

MEMORY_TOOL = "memory_append"
SILENT_TOKEN = "NO_REPLY"
FLUSH_STATE_KEY = "compaction_flushes"

FLUSH_PROMPT = (
    "Pre-compaction memory flush. This conversation is about to be compacted: older messages "
    "will be replaced by a summary. Store durable memories now by calling the "
    f"{MEMORY_TOOL} tool, which appends to memory/{{date}}.md in the workspace: decisions, "
    "the user's preferences, open tasks, and every exact identifier, path and value worth "
    "keeping. Append only; never rewrite or delete anything, and do not touch other files. "
    f"When you are done, or if there is nothing to store, reply with exactly {SILENT_TOKEN}."
)

FlushStatus = Literal["written", "nothing_written", "no_tool", "failed"]


class FlushRecord(BaseModel):
    status: FlushStatus
    context_tokens: int
    compaction_cycle: int
    reply: str | None = Field(default=None, description="None when the reply was NO_REPLY.")
    silent: bool = True
    appended: int = 0
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    error: str | None = None


def is_silent(reply: str) -> bool:
    return reply.strip().upper().startswith(SILENT_TOKEN)


def flush_records(session: Session) -> list[FlushRecord]:
    stored = session.tool_state.get(FLUSH_STATE_KEY, [])
    return [FlushRecord.model_validate(entry) for entry in stored]


def _store(session: Session, record: FlushRecord) -> None:
    session.tool_state.setdefault(FLUSH_STATE_KEY, []).append(record.model_dump(mode="json"))


async def memory_flush(
    agent: Agent,
    context_tokens: int,
    prompt: str = FLUSH_PROMPT,
    writer: NoteWriter | None = None,
    date: str | None = None,
) -> FlushRecord:
    """Run one flush turn on ``agent`` and record it; never raises for provider trouble. With
    a ``writer`` (a reference summarizer) its notes are appended instead, with no model turn.
    ``date`` (ISO) is the day the prompt names for the notes file (default today); it should be
    the memory server's note date."""
    session = agent.session
    cycle = session.compaction.count
    if MEMORY_TOOL not in {spec.name for spec in agent.tools}:
        record = FlushRecord(
            status="no_tool", context_tokens=context_tokens, compaction_cycle=cycle
        )
    elif writer is not None:
        record = await _write_notes(agent, writer, context_tokens, cycle)
    else:
        text = prompt.replace("{date}", date or dt.date.today().isoformat())
        record = await _flush_turn(agent, context_tokens, cycle, text)
    _store(session, record)
    log.info(
        "memory_flush",
        status=record.status,
        appended=record.appended,
        context_tokens=context_tokens,
        cycle=cycle,
    )
    return record


async def _write_notes(
    agent: Agent, writer: NoteWriter, context_tokens: int, cycle: int
) -> FlushRecord:
    """The writer's notes, each appended with one ``memory_append`` call through the agent's
    toolset (the same tool a model's flush calls)."""
    calls = []
    for note in writer.notes(agent.session.messages):
        started = time.perf_counter()
        outcome = await agent.toolset.call(MEMORY_TOOL, {"text": note})
        calls.append(
            ToolCallRecord(
                round=1,
                label="ok",
                name=MEMORY_TOOL,
                arguments={"text": note},
                executed=not outcome.is_error,
                result=outcome.text,
                is_error=outcome.is_error,
                error=outcome.text if outcome.is_error else None,
                latency_s=time.perf_counter() - started,
            )
        )
    appended = sum(1 for call in calls if call.executed)
    return FlushRecord(
        status="written" if appended else "nothing_written",
        context_tokens=context_tokens,
        compaction_cycle=cycle,
        appended=appended,
        tool_calls=calls,
    )


async def _flush_turn(agent: Agent, context_tokens: int, cycle: int, prompt: str) -> FlushRecord:
    mark = len(agent.session.messages)
    try:
        turn = await agent.turn(prompt, purpose="flush")
    except ProviderError as error:
        return FlushRecord(
            status="failed", context_tokens=context_tokens, compaction_cycle=cycle, error=str(error)
        )
    finally:
        agent.session.truncate(mark)
    appended = sum(
        1
        for call in turn.tool_calls
        if call.name == MEMORY_TOOL and call.executed and not call.is_error
    )
    silent = is_silent(turn.reply)
    return FlushRecord(
        status="written" if appended else "nothing_written",
        context_tokens=context_tokens,
        compaction_cycle=cycle,
        reply=None if silent else turn.reply,
        silent=silent,
        appended=appended,
        tool_calls=turn.tool_calls,
    )
