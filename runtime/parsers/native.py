"""``native``: structured tool calls returned by a provider, validated like parsed ones."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.messages import RAW_ARGUMENTS_KEY, ToolCall, ToolSpec
from runtime.parsers.base import ParsedCall
from runtime.parsers.blocks import FamilyParser
from runtime.parsers.validation import validate_arguments


class NativeParser(FamilyParser):
    family = "native"

    def split(
        self,
        text: str,
        tools: Sequence[ToolSpec],
        *,
        truncated: bool,
        native_calls: Sequence[ToolCall],
    ) -> tuple[str, list[ParsedCall]]:
        return text.strip(), [self._validate(call, tools) for call in native_calls]

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
