"""What a probe really had before its question: the active context its first backbone call sent
(minus the probe message) and the start-of-session material (system prompt, bootstrap and memory
files loaded before the query), as plain text a protocol can search.

Above: every adapter (``ProbeReply.context``) and a protocol's retrieval-path classifier
(MIRAGE's ``harness.mirage.probing.retrieval_paths``), which re-exports these types. Below: the
runtime's typed messages (``runtime.messages``), OpenAI-format chat messages, and the compaction
summary marker. Nothing here knows a protocol or an artifact.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from compaction.transcript import SUMMARY_MARKER, previous_summary
from runtime.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolResultMessage,
)

ContextSource = Literal["restored_session", "transcript", "openclaw_session", "unavailable"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ContextMessage(_Frozen):
    """One message of the pre-query active context, as text. ``images`` are the artifact ids of
    images the message carries; ``summary`` marks the compaction summary."""

    role: str
    text: str = ""
    images: tuple[str, ...] = ()
    summary: bool = False


INSTRUCTIONS_SOURCE = "system_prompt"
"""The ``BootItem`` source of the agent's own instructions (its system prompt without the files
it injects)."""

CONFIGURATION_SOURCES = frozenset(
    {
        INSTRUCTIONS_SOURCE,
        "AGENTS.md",
        "SOUL.md",
        "IDENTITY.md",
        "USER.md",
        "TOOLS.md",
        "BOOTSTRAP.md",
        "HEARTBEAT.md",
    }
)
"""Start-of-session material that configures the agent (its instructions and OpenClaw's
persona and workspace files, shipped from templates) as against what it remembers
(``MEMORY.md``, ``memory/…``, startup tool results)."""


class BootItem(_Frozen):
    """Material the agent loaded at session start: ``source`` is ``INSTRUCTIONS_SOURCE`` or
    a file's name such as ``MEMORY.md``."""

    source: str
    text: str


class ProbeContext(_Frozen):
    """What one probe had before its question. ``messages`` is None when the adapter could not
    read the active context (``unavailable`` says why): a classifier must then never conclude
    the content came from the context."""

    source: ContextSource
    messages: tuple[ContextMessage, ...] | None = None
    boot: tuple[BootItem, ...] = ()
    unavailable: str | None = Field(
        default=None, description="why the active context could not be read (messages is None)"
    )

    @classmethod
    def missing(cls, reason: str, boot: Iterable[BootItem] = ()) -> ProbeContext:
        return cls(source="unavailable", messages=None, boot=tuple(boot), unavailable=reason)


def _user_context(parts: Sequence[TextPart | ImagePart]) -> tuple[str, tuple[str, ...]]:
    texts: list[str] = []
    images: list[str] = []
    for part in parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
            continue
        if part.text_representation:
            texts.append(part.text_representation)
        if part.artifact_id:
            images.append(part.artifact_id)
    return "\n".join(texts), tuple(images)


def _calls_text(calls: Iterable[tuple[str, Any]]) -> list[str]:
    return [
        f"{name}({json.dumps(arguments, ensure_ascii=False, sort_keys=True)})"
        for name, arguments in calls
    ]


def context_from_messages(messages: Sequence[Message]) -> list[ContextMessage]:
    """The active context of runtime messages (system messages are start-of-session material,
    see ``boot_from_system``): an image part gives its artifact id and its text stand-in."""
    context = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, AssistantMessage):
            calls = _calls_text((call.name, call.arguments) for call in message.tool_calls)
            text = "\n".join([message.content, *calls])
            context.append(ContextMessage(role="assistant", text=text))
        elif isinstance(message, ToolResultMessage):
            context.append(ContextMessage(role="tool", text=message.content))
        else:
            text, images = _user_context(message.content)
            summary = previous_summary(message) is not None
            context.append(ContextMessage(role="user", text=text, images=images, summary=summary))
    return context


def chat_text(content: Any) -> str:
    """The text of an OpenAI-format message's ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return "\n".join(part for part in parts if isinstance(part, str))
    return ""


def _chat_calls(message: Mapping[str, Any]) -> list[str]:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        calls.append(f"{function.get('name')}({function.get('arguments', '')})")
    return calls


def context_from_chat(messages: Sequence[Mapping[str, Any]]) -> list[ContextMessage]:
    """The active context of OpenAI-format chat messages (system messages left out, see
    ``boot_from_chat``). Images sent as ``image_url`` carry no artifact id, so they count only
    through text; a user message starting with the compaction marker is the summary."""
    context = []
    for message in messages:
        role = str(message.get("role", ""))
        if role == "system":
            continue
        text = "\n".join([chat_text(message.get("content")), *_chat_calls(message)]).strip()
        summary = role == "user" and text.startswith(SUMMARY_MARKER)
        context.append(ContextMessage(role=role, text=text, summary=summary))
    return context


def boot_from_chat(messages: Sequence[Mapping[str, Any]]) -> list[BootItem]:
    """The system messages of OpenAI-format chat messages, as start-of-session material."""
    return [
        BootItem(source=INSTRUCTIONS_SOURCE, text=chat_text(message.get("content")))
        for message in messages
        if message.get("role") == "system"
    ]


def boot_from_system(messages: Sequence[Message]) -> list[BootItem]:
    """The system messages of runtime messages, as start-of-session material."""
    return [
        BootItem(source=INSTRUCTIONS_SOURCE, text=message.content)
        for message in messages
        if isinstance(message, SystemMessage)
    ]


def chat_probe_context(messages: Sequence[Mapping[str, Any]]) -> ProbeContext:
    """The context of an agent handed ``messages`` (OpenAI chat format) before its probe."""
    return ProbeContext(
        source="transcript",
        messages=tuple(context_from_chat(messages)),
        boot=tuple(boot_from_chat(messages)),
    )
