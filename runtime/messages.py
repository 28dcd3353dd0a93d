"""Typed conversation messages, tool specs and per-call usage records.

Everything that crosses a seam (backbone, parser, session snapshot, results file) uses these
pydantic models, so a snapshot written today reads back exactly tomorrow.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Frozen):
    type: Literal["text"] = "text"
    text: str


class ImagePart(_Frozen):
    """An image attachment. ``path`` or ``data_b64`` carries the pixels for vision backbones;
    ``text_representation`` (e.g. a chart's extracted table) replaces it for text-only ones."""

    type: Literal["image"] = "image"
    path: str | None = None
    data_b64: str | None = None
    media_type: str = "image/png"
    artifact_id: str | None = None
    text_representation: str | None = None


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


RAW_ARGUMENTS_KEY = "_raw_arguments"
"""A provider-native call whose arguments were not a JSON object keeps the raw text under this
key, so the parser can label it instead of the backbone raising."""


class ToolCall(_Frozen):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class SystemMessage(_Frozen):
    role: Literal["system"] = "system"
    content: str


class UserMessage(_Frozen):
    role: Literal["user"] = "user"
    content: tuple[ContentPart, ...]

    @classmethod
    def text(cls, text: str, images: tuple[ImagePart, ...] = ()) -> UserMessage:
        return cls(content=(TextPart(text=text), *images))

    @property
    def plain_text(self) -> str:
        return "\n".join(part.text for part in self.content if isinstance(part, TextPart))


class AssistantMessage(_Frozen):
    """``content`` is the visible reply text (tool-call markup removed); ``raw`` keeps the
    backbone's text exactly as produced, which text-mode prompts replay verbatim."""

    role: Literal["assistant"] = "assistant"
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    raw: str | None = None


class ToolResultMessage(_Frozen):
    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage,
    Field(discriminator="role"),
]


class ToolSpec(_Frozen):
    """A tool offered to the backbone, in the OpenAI function-tool shape."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> ToolSpec:
        function = data.get("function", data)
        return cls(
            name=function["name"],
            description=function.get("description", ""),
            parameters=function.get("parameters") or {"type": "object", "properties": {}},
        )


class Usage(_Frozen):
    """One backbone call. ``input_tokens`` is the effective input (cached tokens included);
    ``cached_tokens`` is the part read from a prompt/KV cache and ``cache_write_tokens`` the
    part written to a provider's prompt cache on this call (Anthropic bills writes at a
    premium; providers that cache automatically report none). Both are parts of
    ``input_tokens``."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    source: Literal["provider", "estimate"] = "provider"
