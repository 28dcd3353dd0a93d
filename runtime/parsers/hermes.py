"""Hermes / Qwen family: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from runtime.messages import ToolCall, ToolSpec
from runtime.parsers.base import ParseResult, ParsedCall
from runtime.parsers.validation import overall_label, validate_call

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


class HermesParser:
    family = "hermes"

    def parse(
        self,
        text: str,
        tools: Sequence[ToolSpec],
        *,
        truncated: bool = False,
        native_calls: Sequence[ToolCall] = (),
    ) -> ParseResult:
        calls: list[ParsedCall] = []
        for match in _BLOCK.finditer(text):
            body = match.group(1).strip()
            closed = match.group(0).endswith("</tool_call>")
            if not closed:
                calls.append(ParsedCall(label="truncated", raw=match.group(0), error="block not closed"))
                continue
            try:
                payload = json.loads(body)
            except json.JSONDecodeError as exc:
                calls.append(ParsedCall(label="marker_bad_body", raw=body, error=str(exc)))
                continue
            items = payload if isinstance(payload, list) else [payload]
            for item in items:
                calls.append(validate_call(item, tools, raw=body))
        content = _BLOCK.sub("", text).strip()
        return ParseResult(family=self.family, content=content, calls=tuple(calls),
                           overall=overall_label(calls))
