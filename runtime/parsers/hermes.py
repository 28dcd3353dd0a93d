"""Hermes / Qwen family: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``.

Repeated blocks carry parallel calls; a JSON list inside one block (SmolLM2's trained format)
carries several calls too. Each listed call is validated on its own. A ``<tool_call>`` that is
not followed by a call body (a JSON value, or a name and ``(``) is a mention in prose and
stays in the content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from runtime.messages import ToolSpec
from runtime.parsers.blocks import (
    Block,
    ScanningParser,
    ends_reply,
    json_block_calls,
    json_extent,
    opens_json,
    plain_extent,
)

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_NAMED_BODY = re.compile(r"\s*[A-Za-z_][\w.\-]*\s*[({]")


class HermesParser(ScanningParser):
    family = "hermes"
    opener = re.compile(re.escape(OPEN))

    def read_block(
        self, text: str, opener: re.Match[str], tools: Sequence[ToolSpec], *, truncated: bool
    ) -> Block | None:
        start = opener.end()
        if opens_json(text, start):
            extent = json_extent(text, start, OPEN, CLOSE)
        elif _NAMED_BODY.match(text, start) or ends_reply(text, start):
            extent = plain_extent(text, start, OPEN, CLOSE)
        else:
            return None
        return Block(json_block_calls(extent, tools, truncated=truncated), extent.end)
