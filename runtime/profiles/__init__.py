"""Model profiles: per model family, which tool-call parser to use, how offered tools are
written into a text-mode prompt, which chat role carries tool results, and vision support.

``resolve_profile(model)`` picks a profile from the model string by pattern; configs may
override any field.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from runtime.messages import ToolSpec

ToolPromptStyle = Literal["hermes", "pythonic", "json_schema"]


class ModelProfile(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    parser: str = "hermes"
    tool_prompt: ToolPromptStyle = "hermes"
    tool_result_role: Literal["tool", "user"] = "tool"
    vision: bool = False

    def render_tools(self, tools: Sequence[ToolSpec]) -> str:
        return render_tool_prompt(self.tool_prompt, tools)


def render_tool_prompt(style: ToolPromptStyle, tools: Sequence[ToolSpec]) -> str:
    if not tools:
        return ""
    if style == "hermes":
        specs = "\n".join(json.dumps(tool.to_openai()) for tool in tools)
        return (
            "You may call one or more functions to assist with the user query.\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{specs}\n</tools>\n"
            "For each function call, return a json object with function name and arguments "
            "within <tool_call></tool_call> XML tags:\n"
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )
    if style == "json_schema":
        specs = json.dumps([tool.to_openai()["function"] for tool in tools], indent=1)
        return (
            "You have access to the following functions. To call one, respond with JSON "
            '{"name": function name, "parameters": {argument name: value}}.\n' + specs
        )
    lines = []
    for tool in tools:
        props = tool.parameters.get("properties", {})
        args = ", ".join(f"{key}: {value.get('type', 'any')}" for key, value in props.items())
        lines.append(f"def {tool.name}({args}):\n    \"\"\"{tool.description}\"\"\"")
    return (
        "You can call these Python functions. To call, write a list of calls like "
        "[func_name(arg=value)] and nothing else.\n" + "\n".join(lines)
    )


PROFILES: tuple[tuple[str, ModelProfile], ...] = (
    ("*smollm*", ModelProfile(name="smollm", parser="hermes", tool_result_role="user")),
    ("*qwen*", ModelProfile(name="qwen", parser="hermes", vision=True)),
    ("*hermes*", ModelProfile(name="hermes", parser="hermes")),
    ("*gpt-*", ModelProfile(name="openai", parser="native", vision=True)),
    ("*claude*", ModelProfile(name="anthropic", parser="native", vision=True)),
)
DEFAULT_PROFILE = ModelProfile(name="default", parser="hermes")


def resolve_profile(model: str) -> ModelProfile:
    lowered = model.lower()
    for pattern, profile in PROFILES:
        if fnmatch.fnmatch(lowered, pattern):
            return profile
    return DEFAULT_PROFILE
