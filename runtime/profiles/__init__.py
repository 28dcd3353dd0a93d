"""Model profiles: per model family, which tool-call parser reads its replies, how offered tools
are written into a text-mode prompt (with optional few-shot examples), which chat role carries
tool results, and whether it takes images.

Above: backbones and the agent loop. ``resolve_profile(model, overrides)`` picks a profile from
the model string by pattern (first match in ``PROFILE_TABLE`` wins) and applies config
overrides, validated like any other profile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime.messages import ToolCall, ToolSpec
from runtime.parsers import FAMILIES
from runtime.profiles.render import (
    ToolPromptStyle,
    python_signature,
    render_tool_call,
    render_tool_prompt,
)

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILE_TABLE",
    "ModelProfile",
    "ToolExample",
    "ToolPromptStyle",
    "python_signature",
    "render_tool_call",
    "render_tool_prompt",
    "resolve_profile",
]


class ToolExample(BaseModel):
    """One few-shot exchange: a user turn and the call the assistant answers it with. Shown
    only when ``tool`` is among the offered tools, written in the profile's own call format."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ModelProfile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    parser: str = "hermes"
    tool_prompt: ToolPromptStyle = "hermes"
    tool_result_role: Literal["tool", "user"] = "tool"
    vision: bool = False
    tool_examples: tuple[ToolExample, ...] = ()

    @field_validator("parser")
    @classmethod
    def _known_parser(cls, value: str) -> str:
        if value not in FAMILIES:
            raise ValueError(f"unknown parser family {value!r} (known: {', '.join(FAMILIES)})")
        return value

    def render_tools(self, tools: Sequence[ToolSpec]) -> str:
        """The tool prompt for a text-mode system message, followed by any few-shot example
        whose tool is offered."""
        prompt = render_tool_prompt(self.tool_prompt, tools)
        offered = {tool.name for tool in tools}
        examples = [example for example in self.tool_examples if example.tool in offered]
        if not prompt or not examples:
            return prompt
        shown = "\n\n".join(
            f"User: {example.user}\nAssistant: "
            + render_tool_call(self.tool_prompt, example.tool, example.arguments)
            for example in examples
        )
        return f"{prompt}\n\nExample:\n{shown}"

    def render_call(self, call: ToolCall) -> str:
        """``call`` written in this profile's text format (to replay earlier calls)."""
        return render_tool_call(self.tool_prompt, call.name, call.arguments)


_RECALL_EXAMPLE = ToolExample(
    user="What was the total in the invoice I sent you last week?",
    tool="artifact_recall",
    arguments={"query": "invoice total"},
)


def _profile(name: str, parser: str, prompt: ToolPromptStyle, **fields: Any) -> ModelProfile:
    return ModelProfile(name=name, parser=parser, tool_prompt=prompt, **fields)


PROFILE_TABLE: tuple[tuple[str, ModelProfile], ...] = (
    (
        "smollm",
        _profile(
            "smollm", "hermes", "hermes", tool_result_role="user", tool_examples=(_RECALL_EXAMPLE,)
        ),
    ),
    (r"qwen3?[-_.]?coder", _profile("qwen3-coder", "qwen3_xml", "qwen3_xml")),
    (r"qwen[\w.\-]*vl|qvq", _profile("qwen-vl", "hermes", "hermes", vision=True)),
    ("qwen|qwq", _profile("qwen", "hermes", "hermes")),
    ("hermes", _profile("hermes", "hermes", "hermes")),
    ("internvl", _profile("internvl", "hermes", "hermes", vision=True)),
    ("internlm", _profile("internlm", "internlm", "internlm")),
    (
        r"gemma[-_]?3[-_:]?(?:1b|270m)",
        _profile("gemma-3-text", "pythonic", "pythonic", tool_result_role="user"),
    ),
    (
        r"gemma[-_]?3",
        _profile("gemma-3", "pythonic", "pythonic", tool_result_role="user", vision=True),
    ),
    ("gemma", _profile("gemma", "pythonic", "pythonic", tool_result_role="user")),
    (r"llama[-_]?4", _profile("llama-4", "pythonic", "pythonic", vision=True)),
    (r"llama[-_]?3\.2.*vision", _profile("llama-3.2-vision", "json", "json_schema", vision=True)),
    (r"llama[-_]?3\.2", _profile("llama-3.2", "pythonic", "pythonic")),
    (r"llama[-_]?3", _profile("llama-3", "json", "json_schema")),
    ("pixtral", _profile("pixtral", "mistral", "mistral", vision=True)),
    (r"mistral|mixtral|ministral|devstral|codestral", _profile("mistral", "mistral", "mistral")),
    (r"gpt-3\.5", _profile("openai", "native", "none")),
    (r"gpt-|(?:^|/)o[134](?:-|$)", _profile("openai", "native", "none", vision=True)),
    ("claude", _profile("anthropic", "native", "none", vision=True)),
    ("gemini", _profile("gemini", "native", "none", vision=True)),
)
DEFAULT_PROFILE = _profile("default", "hermes", "hermes")


def resolve_profile(model: str, overrides: Mapping[str, Any] | None = None) -> ModelProfile:
    """The profile of the first ``PROFILE_TABLE`` pattern found in the lower-cased model
    string (else ``DEFAULT_PROFILE``), with ``overrides`` applied and validated."""
    lowered = model.lower()
    profile = next(
        (profile for pattern, profile in PROFILE_TABLE if re.search(pattern, lowered)),
        DEFAULT_PROFILE,
    )
    if not overrides:
        return profile
    return ModelProfile.model_validate({**profile.model_dump(), **dict(overrides)})
