"""``native``: structured tool calls returned by a provider, validated like parsed ones."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.messages import RAW_ARGUMENTS_KEY, ToolCall, ToolSpec
from runtime.parsers.base import ParsedCall, ParseResult
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
        calls = [self._validate(call, tools) for call in native_calls]
        return ParseResult(
            family=self.family,
            content=text.strip(),
            calls=tuple(calls),
            overall=overall_label(calls),
        )

    @staticmethod
    def _validate(call: ToolCall, tools: Sequence[ToolSpec]) -> ParsedCall:
        if set(call.arguments) == {RAW_ARGUMENTS_KEY}:
            return ParsedCall(
                label="marker_bad_body",
                name=call.name,
                raw=str(call.arguments[RAW_ARGUMENTS_KEY]),
                error="tool-call arguments are not a JSON object",
            )
        return validate_arguments(
            call.name, dict(call.arguments), tools, raw=call.model_dump_json()
        )
