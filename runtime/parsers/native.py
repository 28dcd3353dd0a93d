"""``native``: structured tool calls returned by a provider, validated like parsed ones."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.messages import ToolCall, ToolSpec
from runtime.parsers.base import ParseResult
from runtime.parsers.validation import overall_label, validate_arguments


class NativeParser:
    family = "native"

    def parse(
        self,
        text: str,
        tools: Sequence[ToolSpec],
        *,
        truncated: bool = False,
        native_calls: Sequence[ToolCall] = (),
    ) -> ParseResult:
        calls = [
            validate_arguments(call.name, dict(call.arguments), tools, raw=call.model_dump_json())
            for call in native_calls
        ]
        return ParseResult(
            family=self.family,
            content=text.strip(),
            calls=tuple(calls),
            overall=overall_label(calls),
        )
