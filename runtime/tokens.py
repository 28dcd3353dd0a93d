"""Token counting for EIT estimates when a provider reports none (tiktoken, offline files)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import runtime  # noqa: F401  (TIKTOKEN_CACHE_DIR must be set before tiktoken loads)
from runtime.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    import tiktoken

MESSAGE_OVERHEAD_TOKENS = 4
IMAGE_PLACEHOLDER_TOKENS = 85


@lru_cache(maxsize=4)
def encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.get_encoding(name)


@lru_cache(maxsize=32_768)
def count_tokens(text: str, encoding_name: str = "cl100k_base") -> int:
    """Tokens of ``text``; the same texts come back every turn and every probe (a system
    prompt, the tools' descriptions, a history's messages: the paper's trunk re-reads its
    2,300 messages on each of its 1,144 turns, 28 s of tiktoken without the kept counts, 4 s
    with them), so the counts of the last 32,768 texts are kept."""
    if not text:
        return 0
    return len(encoding(encoding_name).encode(text, disallowed_special=()))


def message_text(message: Message) -> str:
    """The text a message contributes to a prompt (tool calls rendered as JSON)."""
    if isinstance(message, SystemMessage):
        return message.content
    if isinstance(message, UserMessage):
        parts = []
        for part in message.content:
            if isinstance(part, TextPart):
                parts.append(part.text)
            elif isinstance(part, ImagePart) and part.text_representation:
                parts.append(part.text_representation)
        return "\n".join(parts)
    if isinstance(message, AssistantMessage):
        if message.raw is not None:
            return message.raw
        calls = "".join(call.model_dump_json() for call in message.tool_calls)
        return message.content + calls
    assert isinstance(message, ToolResultMessage)
    return message.content


def count_message_tokens(message: Message) -> int:
    images = 0
    if isinstance(message, UserMessage):
        images = sum(
            IMAGE_PLACEHOLDER_TOKENS
            for part in message.content
            if isinstance(part, ImagePart) and not part.text_representation
        )
    return MESSAGE_OVERHEAD_TOKENS + count_tokens(message_text(message)) + images


def estimate_prompt_tokens(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
    """A tiktoken estimate of a call's input: every message and every offered tool's schema."""
    prompt = sum(count_message_tokens(message) for message in messages)
    return prompt + sum(count_tokens(json.dumps(tool.to_openai())) for tool in tools)


def estimate_usage(
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    text: str,
    tool_calls: Sequence[ToolCall] = (),
) -> Usage:
    """A tiktoken estimate of one call, for backbones whose provider reports no usage."""
    output = count_tokens(text) + sum(count_tokens(call.model_dump_json()) for call in tool_calls)
    return Usage(
        input_tokens=estimate_prompt_tokens(messages, tools),
        output_tokens=output,
        source="estimate",
    )
