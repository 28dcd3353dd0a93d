"""Message-level helpers for compaction: where the verbatim tail starts, how compacted messages
are rendered as text for a summarizer, and the summary message that replaces them.

Above: the compactor and the summary strategies. Below: the runtime message model and tiktoken
counts (``Session.message_tokens``).

The summary message is a *user* message whose text starts with ``SUMMARY_MARKER``: the user
role is accepted by every provider and chat template (several templates reject a system
message anywhere but first), and the marker lets a later compaction find the previous summary
and fold it into the next one instead of summarising a summary as if it were conversation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePath

from runtime.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolResultMessage,
    UserMessage,
)

SUMMARY_MARKER = "[Compacted conversation summary]"


def summary_message(summary: str) -> UserMessage:
    return UserMessage.text(f"{SUMMARY_MARKER}\n{summary.strip()}")


def previous_summary(message: Message) -> str | None:
    """The summary text if ``message`` is a compaction summary message, else None."""
    if not isinstance(message, UserMessage):
        return None
    text = message.plain_text
    if not text.startswith(SUMMARY_MARKER):
        return None
    return text[len(SUMMARY_MARKER) :].strip()


def tail_start(message_tokens: Sequence[int], messages: Sequence[Message], keep: int) -> int:
    """Index of the first message of the verbatim tail: the longest suffix of at most ``keep``
    tokens, moved earlier while it would start inside a tool block, so that an assistant
    message with tool calls always stays with its tool results."""
    if len(message_tokens) != len(messages):
        raise ValueError("message_tokens and messages differ in length")
    start = len(messages)
    kept = 0
    while start > 0 and kept + message_tokens[start - 1] <= keep:
        start -= 1
        kept += message_tokens[start]
    while 0 < start < len(messages) and isinstance(messages[start], ToolResultMessage):
        start -= 1
    return start


def _image_text(part: ImagePart) -> str:
    """The image's id and path, with an absolute path cut to its file name: where the file
    lies on the machine that built the session (a pack inside an installed package) is no
    part of the conversation, and would make two installs send different summary prompts."""
    location = ""
    if part.path:
        path = PurePath(part.path)
        location = f"file={path.name}" if path.is_absolute() else f"path={part.path}"
    fields = [f"artifact_id={part.artifact_id}" if part.artifact_id else "", location]
    label = " ".join(field for field in fields if field) or "inline"
    text = f"[image {label}]"
    if part.text_representation:
        text += f"\n{part.text_representation}"
    return text


def _user_text(message: UserMessage) -> str:
    parts = []
    for part in message.content:
        parts.append(part.text if isinstance(part, TextPart) else _image_text(part))
    return "\n".join(parts)


def render_message(message: Message) -> str:
    """One message as plain text for a summarizer; tool calls and results keep their exact
    names, arguments and ids."""
    if isinstance(message, SystemMessage):
        return f"SYSTEM: {message.content}"
    if isinstance(message, UserMessage):
        return f"USER: {_user_text(message)}"
    if isinstance(message, AssistantMessage):
        lines = [f"ASSISTANT: {message.content}".rstrip()]
        for call in message.tool_calls:
            arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
            lines.append(f"ASSISTANT TOOL CALL {call.id}: {call.name}({arguments})")
        return "\n".join(lines)
    assert isinstance(message, ToolResultMessage)
    status = " (error)" if message.is_error else ""
    return f"TOOL RESULT {message.tool_call_id} from {message.name}{status}: {message.content}"
