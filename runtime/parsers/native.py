"""``native``: structured tool calls returned by a provider, validated like parsed ones."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.messages import RAW_ARGUMENTS_KEY, ToolCall, ToolSpec
from runtime.parsers.base import ParsedCall
from runtime.parsers.blocks import FamilyParser, Reply
from runtime.parsers.validation import validate_arguments


class NativeParser(FamilyParser):
    family = "native"

    def split(self, reply: Reply) -> tuple[str, list[ParsedCall]]:
        calls = [self._validate(call, reply.tools) for call in reply.native_calls]
        return reply.text.strip(), calls

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
