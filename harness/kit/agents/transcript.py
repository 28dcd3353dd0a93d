"""What an agent we did not write receives to stand in for a restore: the checkpoint's context.

Above: the OpenAI-endpoint and command adapters. Below: the session snapshot of a checkpoint
(``runtime.snapshot``) and the OpenAI chat-format conversion (``runtime.backbones``). The
transcript is the checkpoint session's active context — for S2 that is the compaction summary
message followed by the kept tail, exactly what the built-in runtime would see — as OpenAI chat
messages in native tool format (assistant ``tool_calls``, role ``tool`` results), preceded by
the session's system prompt. Images become their text representation.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from harness.kit.agents.base import RestorePoint, ToolCallRecord
from harness.kit.agents.context import ProbeContext, chat_probe_context
from runtime.backbones.openai_format import OpenAIMessage, to_openai_messages
from runtime.profiles import resolve_profile
from runtime.session import Session
from runtime.snapshot import SnapshotCache

MEMORY_URL_HEADER = "X-Mirage-Memory-Url"
TAG_HEADER = "X-Mirage-Tag"


class RestoredContext(BaseModel):
    """A restore of a checkpoint, as an agent we did not write receives it: the same for every
    probe of the checkpoint, read and never changed (an adapter sends ``[*messages, probe]``)."""

    model_config = ConfigDict(frozen=True)

    messages: tuple[OpenAIMessage, ...]
    restored_sha256: str
    context: ProbeContext
    """What the agent is given before its probe message: the transcript's messages as its
    active context, its system prompt as start-of-session material."""

    @classmethod
    def of(cls, messages: list[OpenAIMessage], restored_sha256: str) -> RestoredContext:
        return cls(
            messages=tuple(messages),
            restored_sha256=restored_sha256,
            context=chat_probe_context(messages),
        )


def system_text(session: Session) -> str:
    config = session.config
    parts = [config.system_prompt]
    if config.workspace_hint:
        parts.append(config.workspace_hint)
    return "\n\n".join(parts)


def session_transcript(session: Session) -> list[OpenAIMessage]:
    """The system prompt and the session's messages as OpenAI chat messages."""
    profile = resolve_profile(session.config.model)
    converted = to_openai_messages(session.messages, [], profile, "native")
    return [{"role": "system", "content": system_text(session)}, *converted]


class TranscriptSource:
    """Verifies each checkpoint snapshot once and builds its transcript once, for every probe
    of the checkpoint."""

    def __init__(self) -> None:
        self._snapshots = SnapshotCache()
        self._restored: dict[str, RestoredContext] = {}

    def restore(self, checkpoint: RestorePoint) -> RestoredContext:
        found = self._restored.get(checkpoint.snapshot_sha256)
        if found is None:
            path = checkpoint.snapshot_path
            session = self._snapshots.restore(path)
            found = RestoredContext.of(session_transcript(session), self._snapshots.name(path))
            self._restored[checkpoint.snapshot_sha256] = found
        return found


def reported_call(entry: Any) -> ToolCallRecord:
    """An OpenAI ``tool_calls`` entry or a ``{"name", "arguments"}`` object as a record of a
    call the agent reports (``executed`` stays False: only the server's log says what ran)."""
    if not isinstance(entry, dict):
        return ToolCallRecord(label="unreadable_report", error=f"not an object: {entry!r:.80}")
    nested = entry.get("function")
    function: dict[str, Any] = nested if isinstance(nested, dict) else entry
    name = function.get("name")
    arguments: Any = function.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {"_raw": arguments}
    if not isinstance(arguments, dict):
        arguments = {"_raw": arguments}
    return ToolCallRecord(name=name if isinstance(name, str) else None, arguments=arguments)
