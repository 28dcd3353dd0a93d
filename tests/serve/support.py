"""Backbones and tools for the endpoint tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.backbones import Completion
from runtime.backbones.base import Backbone, ToolMode
from runtime.messages import Message, ToolSpec, Usage
from runtime.profiles import ModelProfile, resolve_profile

RECALL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "artifact_recall",
        "description": "Search the user's workspace.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "k": {"type": "integer"}},
            "required": ["query"],
        },
    },
}


def function_tool(name: str, fields: dict[str, str]) -> dict[str, Any]:
    """An OpenAI function tool whose arguments are ``fields`` (name → JSON type), all required."""
    properties = {key: {"type": kind} for key, kind in fields.items()}
    parameters = {"type": "object", "properties": properties, "required": list(fields)}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


WEATHER_TOOL = function_tool("get_weather", {"city": "string"})
HERMES_CALL = (
    'Let me look.\n<tool_call>\n{"name": "artifact_recall", "arguments": {"query": "rent"}}'
    "\n</tool_call>"
)


@dataclass
class BudgetEcho(Backbone):
    """A backbone with a reply budget that answers with the budget it was called with."""

    model: str = "budget-echo"
    context_window: int = 4096
    tool_mode: ToolMode = "text"
    profile: ModelProfile = field(default_factory=lambda: resolve_profile("budget-echo"))
    max_output_tokens: int = 77

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        return Completion(
            text=f"budget={self.max_output_tokens}",
            usage=Usage(input_tokens=10, output_tokens=2),
            model=self.model,
        )
