"""Bare-JSON family (Llama 3.x, Gemma JSON variant): ``{"name": ..., "parameters": ...}``,
optionally after ``<|python_tag|>``, several calls separated by ``;``.

A call run starts at each ``<|python_tag|>`` or at an object that opens with a ``name``,
``type`` or ``function`` key; text before, between and after the runs is content. A malformed
object (not cut off) ends where the next call starts, so a good call after it is kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from runtime.messages import ToolSpec
from runtime.parsers.base import ParsedCall, undecodable_label
from runtime.parsers.blocks import Block, ScanningParser
from runtime.parsers.scan import BodyError, decode_json_at
from runtime.parsers.validation import validate_json_calls

PYTHON_TAG = "<|python_tag|>"
_START = re.compile(r"<\|python_tag\|>|\{\s*[\"'](?:name|type|function)[\"']\s*:")


class BareJsonParser(ScanningParser):
    family = "json"
    opener = _START

    def read_block(
        self, text: str, opener: re.Match[str], tools: Sequence[ToolSpec], *, truncated: bool
    ) -> Block:
        tagged = opener.group(0) == PYTHON_TAG
        body = opener.end() if tagged else opener.start()
        run, end = self._parse_run(text, body, tools, truncated=truncated)
        if tagged and not run:
            end = _next_start(text, body)
            rest = text[body:end].strip()
            label = undecodable_label(not rest and end == len(text))
            run = [ParsedCall(label=label, raw=rest, error="no JSON call after <|python_tag|>")]
        return Block(run, end)

    def _parse_run(
        self, text: str, position: int, tools: Sequence[ToolSpec], *, truncated: bool
    ) -> tuple[list[ParsedCall], int]:
        """The calls from ``position`` on, separated by ``;``, and where they end. A call
        that is malformed (not cut off) ends where the next call starts."""
        calls: list[ParsedCall] = []
        end = position
        while True:
            position = _skip_separators(text, end)
            if position >= len(text) or text[position] not in "{[":
                return calls, end
            try:
                payload, end = decode_json_at(text, position)
            except BodyError as exc:
                end = len(text) if exc.incomplete else _next_start(text, position)
                label = undecodable_label(end == len(text) and (exc.incomplete or truncated))
                calls.append(ParsedCall(label=label, raw=text[position:end], error=str(exc)))
                return calls, end
            calls.extend(validate_json_calls(payload, tools, raw=text[position:end]))


def _next_start(text: str, position: int) -> int:
    """Where the next call starts after ``position`` (or the end of the text)."""
    following = _START.search(text, position + 1)
    return following.start() if following else len(text)


def _skip_separators(text: str, position: int) -> int:
    """Past whitespace and at most one ``;`` between calls."""
    stripped = text[position:].lstrip()
    if stripped.startswith(";"):
        stripped = stripped[1:].lstrip()
    return len(text) - len(stripped)
