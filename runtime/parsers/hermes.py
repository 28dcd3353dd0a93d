"""Hermes / Qwen family: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``.

Repeated blocks carry parallel calls; a JSON list inside one block (SmolLM2's trained format)
carries several calls too. Each listed call is validated on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.messages import ToolSpec
from runtime.parsers.base import ParsedCall
from runtime.parsers.blocks import TaggedBlockParser
from runtime.parsers.scan import decode_body
from runtime.parsers.validation import validate_call


def validate_json_calls(payload: Any, tools: Sequence[ToolSpec], *, raw: str) -> list[ParsedCall]:
    """One call object or a list of them, each validated on its own."""
    if isinstance(payload, list):
        if not payload:
            return [ParsedCall(label="wrong_shape", raw=raw, error="empty list of calls")]
        return [validate_call(item, tools, raw=raw) for item in payload]
    return [validate_call(payload, tools, raw=raw)]


class HermesParser(TaggedBlockParser):
    family = "hermes"
    open_marker = r"<tool_call>"
    close_marker = r"</tool_call>"
    stray_markers = ("</tool_call>",)

    def parse_body(self, body: str, tools: Sequence[ToolSpec]) -> list[ParsedCall]:
        return validate_json_calls(decode_body(body), tools, raw=body)
