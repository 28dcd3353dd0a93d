"""InternLM2 family: ``<|action_start|><|plugin|>{"name": ..., "parameters": {...}}<|action_end|>``.

``<|interpreter|>`` actions (InternLM's code interpreter) are reported as calls of a tool named
``interpreter``, which is ``unknown_tool`` unless such a tool was offered.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime.messages import ToolSpec
from runtime.parsers.base import ParsedCall
from runtime.parsers.blocks import TaggedBlockParser
from runtime.parsers.hermes import validate_json_calls
from runtime.parsers.scan import decode_body
from runtime.parsers.validation import validate_arguments

_INTERPRETER = "<|interpreter|>"


class InternLMParser(TaggedBlockParser):
    family = "internlm"
    open_marker = r"<\|action_start\|>"
    close_marker = r"<\|action_end\|>"
    stray_markers = ("<|action_end|>",)

    def parse_body(self, body: str, tools: Sequence[ToolSpec]) -> list[ParsedCall]:
        if body.startswith(_INTERPRETER):
            code = body.removeprefix(_INTERPRETER).strip()
            return [validate_arguments("interpreter", {"code": code}, tools, raw=body)]
        payload = decode_body(body.removeprefix("<|plugin|>"))
        return validate_json_calls(payload, tools, raw=body)
