"""InternLM2 family: ``<|action_start|><|plugin|>{"name": ..., "parameters": {...}}<|action_end|>``.

``<|interpreter|>`` actions (InternLM's code interpreter) are reported as calls of a tool named
``interpreter``, which is ``unknown_tool`` unless such a tool was offered. An
``<|action_start|>`` followed by neither action kind nor a JSON body stays in the content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from runtime.messages import ToolSpec
from runtime.parsers.base import ParsedCall
from runtime.parsers.blocks import (
    Block,
    ScanningParser,
    ends_reply,
    json_block_calls,
    json_extent,
    opens_json,
    plain_extent,
)
from runtime.parsers.scan import skip_space
from runtime.parsers.validation import validate_arguments

OPEN, CLOSE = "<|action_start|>", "<|action_end|>"
_PLUGIN, _INTERPRETER = "<|plugin|>", "<|interpreter|>"


class InternLMParser(ScanningParser):
    family = "internlm"
    opener = re.compile(re.escape(OPEN))

    def read_block(
        self, text: str, opener: re.Match[str], tools: Sequence[ToolSpec], *, truncated: bool
    ) -> Block | None:
        start = skip_space(text, opener.end())
        if text.startswith(_INTERPRETER, start):
            extent = plain_extent(text, start + len(_INTERPRETER), OPEN, CLOSE)
            code = extent.body.strip()
            call = validate_arguments("interpreter", {"code": code}, tools, raw=code)
            return Block([call], extent.end)
        if text.startswith(_PLUGIN, start):
            start += len(_PLUGIN)
        elif ends_reply(text, start, _PLUGIN, _INTERPRETER):
            rest = text[start:].strip()
            call = ParsedCall(label="truncated", raw=rest, error=f"reply ends after {OPEN}")
            return Block([call], len(text))
        elif not opens_json(text, start):
            return None
        extent = (
            json_extent(text, start, OPEN, CLOSE)
            if opens_json(text, start)
            else plain_extent(text, start, OPEN, CLOSE)
        )
        return Block(json_block_calls(extent, tools, truncated=truncated), extent.end)
