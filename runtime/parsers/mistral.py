"""Mistral family: ``[TOOL_CALLS]`` followed by a JSON array of calls (tokenizers before v11),
or by ``name{json-args}`` (v11+, optionally ``name[ARGS]{...}`` / ``name[CALL_ID]id[ARGS]{...}``),
with ``[TOOL_CALLS]`` repeated before each further call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from runtime.messages import ToolSpec
from runtime.parsers.base import ParsedCall, undecodable_label
from runtime.parsers.blocks import Block, ScanningParser
from runtime.parsers.scan import BodyError, decode_json_at
from runtime.parsers.validation import validate_arguments, validate_json_calls

MARKER = "[TOOL_CALLS]"
_NAMED = re.compile(r"([A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\]\s*[\w\-]*\s*)?(?:\[ARGS\])?\s*")


class MistralParser(ScanningParser):
    family = "mistral"
    opener = re.compile(re.escape(MARKER))

    def read_block(
        self, text: str, opener: re.Match[str], tools: Sequence[ToolSpec], *, truncated: bool
    ) -> Block:
        calls, end = self._parse_after_marker(text, opener.end(), tools)
        return Block(calls, end)

    def _parse_after_marker(
        self, text: str, position: int, tools: Sequence[ToolSpec]
    ) -> tuple[list[ParsedCall], int]:
        """Calls following one marker and the index where they end."""
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return [ParsedCall(label="truncated", error=f"nothing after {MARKER}")], position
        if text[position] == "[":
            return self._parse_array(text, position, tools)
        named = _NAMED.match(text, position)
        if named is None or named.end() >= len(text) or text[named.end()] != "{":
            cut_off = named is not None and named.end() >= len(text)
            label = undecodable_label(cut_off)
            raw = text[position : position + 200]
            error = f"{MARKER} not followed by a JSON array or name{{arguments}}"
            return [ParsedCall(label=label, raw=raw, error=error)], len(
                text
            ) if cut_off else position
        return self._parse_named(named.group(1), text, named.end(), tools)

    def _parse_array(
        self, text: str, position: int, tools: Sequence[ToolSpec]
    ) -> tuple[list[ParsedCall], int]:
        try:
            payload, end = decode_json_at(text, position)
        except BodyError as exc:
            label = undecodable_label(exc.incomplete)
            return [ParsedCall(label=label, raw=text[position:], error=str(exc))], len(text)
        return validate_json_calls(payload, tools, raw=text[position:end]), end

    def _parse_named(
        self, name: str, text: str, position: int, tools: Sequence[ToolSpec]
    ) -> tuple[list[ParsedCall], int]:
        try:
            arguments, end = decode_json_at(text, position)
        except BodyError as exc:
            label = undecodable_label(exc.incomplete)
            return [ParsedCall(label=label, name=name, raw=text[position:], error=str(exc))], len(
                text
            )
        raw = name + text[position:end]
        if not isinstance(arguments, dict):
            return [
                ParsedCall(
                    label="wrong_shape", name=name, raw=raw, error="arguments are not an object"
                )
            ], end
        return [validate_arguments(name, arguments, tools, raw=raw)], end
