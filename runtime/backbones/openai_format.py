"""Typed messages → OpenAI chat-format dicts, for one model profile and tool mode.

Above: the litellm backbone (sends the dicts to a provider) and the embedded backbone (renders
them as ChatML text). Below: ``runtime.messages`` and the model profile.

Native mode keeps tool calls and tool results structured (``tool_calls``, role ``tool``) and
offers the tools as ``tools=[...]``. Text mode writes the tools into the system prompt with the
profile's renderer, replays assistant turns verbatim (``raw``) and sends tool results in the
profile's ``tool_result_role``. Images reach vision models as data URLs; other models get the
artifact's text representation, or a placeholder saying an image they cannot see was attached.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime.backbones.base import ToolMode
from runtime.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from runtime.profiles import ModelProfile

OpenAIMessage = dict[str, Any]
HERMES_STYLE_PROMPTS = frozenset({"hermes", "qwen3_xml"})
"""Tool-prompt styles whose models read tool results inside ``<tool_response>`` tags."""


def to_openai_messages(
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    profile: ModelProfile,
    tool_mode: ToolMode,
) -> list[OpenAIMessage]:
    """The chat messages to send; in text mode the tool prompt is part of the system message."""
    converted = [convert_message(message, profile, tool_mode) for message in messages]
    tool_prompt = profile.render_tools(tools) if tool_mode == "text" else ""
    return with_tool_prompt(converted, tool_prompt) if tool_prompt else converted


def to_openai_tools(tools: Sequence[ToolSpec], tool_mode: ToolMode) -> list[dict[str, Any]]:
    """The ``tools`` request field: the specs in native mode, nothing in text mode."""
    return [tool.to_openai() for tool in tools] if tool_mode == "native" else []


def convert_message(message: Message, profile: ModelProfile, tool_mode: ToolMode) -> OpenAIMessage:
    """One message in chat format (the text-mode tool prompt is ``with_tool_prompt``'s)."""
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserMessage):
        return {"role": "user", "content": user_content(message, vision=profile.vision)}
    if isinstance(message, AssistantMessage):
        if tool_mode == "native":
            return _native_assistant(message)
        return {"role": "assistant", "content": _replayed_text(message, profile)}
    if tool_mode == "native":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    return _text_tool_result(message, profile)


def with_tool_prompt(converted: list[OpenAIMessage], tool_prompt: str) -> list[OpenAIMessage]:
    """``converted`` with the text-mode tool prompt closing its system message (or as one)."""
    if converted and converted[0]["role"] == "system":
        first = converted[0]
        return [{**first, "content": f"{first['content']}\n\n{tool_prompt}"}, *converted[1:]]
    return [{"role": "system", "content": tool_prompt}, *converted]


def _native_assistant(message: AssistantMessage) -> OpenAIMessage:
    result: OpenAIMessage = {"role": "assistant", "content": message.content or None}
    if message.tool_calls:
        result["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return result


def _replayed_text(message: AssistantMessage, profile: ModelProfile) -> str:
    """Exactly what the model produced when known; otherwise the content plus the calls
    written in the profile's own text format, so the model sees the calls it made."""
    if message.raw is not None:
        return message.raw
    rendered = [profile.render_call(call) for call in message.tool_calls]
    return "\n".join(part for part in (message.content, *rendered) if part)


def _text_tool_result(message: ToolResultMessage, profile: ModelProfile) -> OpenAIMessage:
    """Role ``user`` carries the Hermes ``<tool_response>`` wrapper itself; role ``tool`` is
    left bare because Hermes/Qwen chat templates add that wrapper to tool messages."""
    if profile.tool_result_role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    return {"role": "user", "content": wrap_tool_result(message.content, profile)}


def wrap_tool_result(content: str, profile: ModelProfile) -> str:
    if profile.tool_prompt in HERMES_STYLE_PROMPTS:
        return f"<tool_response>\n{content}\n</tool_response>"
    return content


def user_content(message: UserMessage, *, vision: bool) -> str | list[dict[str, Any]]:
    """A plain string unless a vision model receives images (then OpenAI content parts)."""
    has_images = any(isinstance(part, ImagePart) for part in message.content)
    if vision and has_images:
        return [_vision_part(part) for part in message.content]
    texts = [
        part.text if isinstance(part, TextPart) else image_as_text(part) for part in message.content
    ]
    return "\n".join(texts)


def _vision_part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {"type": "image_url", "image_url": {"url": image_data_url(part)}}


def image_data_url(part: ImagePart) -> str:
    if part.data_b64 is not None:
        data = part.data_b64
    elif part.path is not None:
        path = Path(part.path)
        if not path.is_file():
            raise ValueError(f"image {part.artifact_id or path.name}: file not found: {path}")
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    else:
        raise ValueError(
            f"image {part.artifact_id or '(no artifact id)'} has neither path nor data_b64"
        )
    return f"data:{part.media_type};base64,{data}"


def image_as_text(part: ImagePart) -> str:
    label = f"image {part.artifact_id}" if part.artifact_id else "image"
    if part.text_representation:
        return f"[{label}: {part.text_representation}]"
    return f"[{label}: an image was attached here, but this model cannot see images]"
