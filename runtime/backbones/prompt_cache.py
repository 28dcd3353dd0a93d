"""Provider prompt caching: which providers need explicit cache markers, and where they go.

Above: the litellm backbone, which marks a request before sending it. Below: the OpenAI-format
message dicts litellm translates (``cache_control`` on a message, a content part or a tool call
becomes Anthropic's ``cache_control`` block field, or a Bedrock ``cachePoint``).

Anthropic (and Claude on Bedrock or Vertex) caches only up to a block marked
``cache_control``; OpenAI, DeepSeek, Gemini and friends cache a repeated prefix on their own.
Two markers are set (Anthropic allows four): the end of the system prompt, shared by every
call of a session, and the end of the *stable prefix*: the last message before the current
user turn. For a MIRAGE probe that is the last message of the restored checkpoint, so every
probe of a state (whatever its question or condition, and in every tool round) reads the one
prefix the state's first probe wrote; on a growing conversation each turn reads what the
previous turn wrote. A marker never moves onto the question itself: a cache entry that ends
with one probe's question would be written by every probe and read by none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.messages import Message, UserMessage
from runtime.offline import quiet_litellm

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
EXPLICIT_MARKER_PROVIDERS = frozenset({"anthropic"})
"""Providers whose every model needs markers; others need them only for Claude models."""
CLAUDE_HOSTS = frozenset({"bedrock", "bedrock_converse", "vertex_ai", "openrouter"})


def needs_cache_markers(model: str, api_base: str | None = None) -> bool:
    """True when ``model`` (a litellm model string) caches only at explicit markers."""
    litellm = quiet_litellm()

    try:
        _, provider, _, _ = litellm.get_llm_provider(model, api_base=api_base)
    except Exception:  # litellm raises a bare BadRequestError subclass for unknown providers
        return False
    if provider in EXPLICIT_MARKER_PROVIDERS:
        return True
    lowered = model.lower()
    return provider in CLAUDE_HOSTS and ("claude" in lowered or "anthropic." in lowered)


def stable_prefix_end(messages: Sequence[Message]) -> int | None:
    """Index of the last message before the current user turn (the latest ``UserMessage``;
    tool results are ``ToolResultMessage`` whatever role they are sent in), or None when
    the turn starts the conversation."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return index - 1 if index > 0 else None
    return None


def mark_cache_prefix(
    converted: list[dict[str, Any]], typed: Sequence[Message]
) -> list[dict[str, Any]]:
    """``converted`` (the OpenAI-format form of ``typed``, possibly with a system message
    put in front) with cache markers after the system prompt and the stable prefix."""
    offset = len(converted) - len(typed)
    targets = set()
    if converted and converted[0].get("role") == "system":
        targets.add(0)
    end = stable_prefix_end(typed)
    if end is not None:
        targets.add(end + offset)
    return [_marked(message) if i in targets else message for i, message in enumerate(converted)]


def _marked(message: dict[str, Any]) -> dict[str, Any]:
    """The message with a marker on its last block: the last content part of a list, the last
    tool call of an assistant message that made calls, else the message itself."""
    for field in ("tool_calls", "content"):
        blocks = message.get(field)
        if isinstance(blocks, list) and blocks:
            last = {**blocks[-1], "cache_control": CACHE_CONTROL}
            return {**message, field: [*blocks[:-1], last]}
    return {**message, "cache_control": CACHE_CONTROL}
