"""Bare-JSON family (Llama 3.x, Gemma JSON variant): ``{"name": ..., "parameters": ...}``,
optionally after ``<|python_tag|>``, several calls separated by ``;``.

The call run starts at ``<|python_tag|>`` or at the first object that opens with a ``name``,
``type`` or ``function`` key; text before and after it is content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from runtime.messages import ToolCall, ToolSpec
from runtime.parsers.base import ParsedCall, ParseResult, undecodable_label
from runtime.parsers.scan import BodyError, cut, decode_json_at
from runtime.parsers.validation import overall_label, validate_json_calls

PYTHON_TAG = "<|python_tag|>"
_START = re.compile(r"<\|python_tag\|>|\{\s*[\"'](?:name|type|function)[\"']\s*:")


class BareJsonParser:
    family = "json"

    def parse(
        self,
        text: str,
        tools: Sequence[ToolSpec],
        *,
        truncated: bool = False,
        native_calls: Sequence[ToolCall] = (),
    ) -> ParseResult:
        start = _START.search(text)
        if start is None:
            return ParseResult(family=self.family, content=text.strip())
        tagged = start.group(0) == PYTHON_TAG
        position = start.end() if tagged else start.start()
        calls, end = self._parse_run(text, position, tools, truncated=truncated)
        if tagged and not calls:
            rest = text[position:].strip()
            label = undecodable_label(not rest)
            calls = [ParsedCall(label=label, raw=rest, error="no JSON call after <|python_tag|>")]
            end = len(text)
        content = cut(text, [(start.start(), end)])
        return ParseResult(
            family=self.family, content=content, calls=tuple(calls), overall=overall_label(calls)
        )

    def _parse_run(
        self, text: str, position: int, tools: Sequence[ToolSpec], *, truncated: bool
    ) -> tuple[list[ParsedCall], int]:
        calls: list[ParsedCall] = []
        end = position
        while True:
            position = _skip_separators(text, end)
            if position >= len(text) or text[position] not in "{[":
                return calls, end
            try:
                payload, end = decode_json_at(text, position)
            except BodyError as exc:
                label = undecodable_label(exc.incomplete or truncated)
                calls.append(ParsedCall(label=label, raw=text[position:], error=str(exc)))
                return calls, len(text)
            calls.extend(validate_json_calls(payload, tools, raw=text[position:end]))


def _skip_separators(text: str, position: int) -> int:
    """Past whitespace and at most one ``;`` between calls."""
    stripped = text[position:].lstrip()
    if stripped.startswith(";"):
        stripped = stripped[1:].lstrip()
    return len(text) - len(stripped)
