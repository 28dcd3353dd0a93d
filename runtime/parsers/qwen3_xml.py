"""Qwen3-Coder XML family:
``<tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>``.

Every value arrives as text: it is kept as a string where the schema wants one, otherwise
decoded as JSON (or a Python literal) and left to schema coercion when that fails.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runtime.messages import ToolSpec
from runtime.parsers.base import OutcomeLabel, ParsedCall
from runtime.parsers.blocks import TaggedBlockParser
from runtime.parsers.scan import BodyError, decode_body
from runtime.parsers.validation import find_tool, validate_arguments

_FUNCTION = re.compile(r"<function=([^>\n]*)>(.*?)(</function>|(?=<function=)|\Z)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)


class Qwen3XmlParser(TaggedBlockParser):
    family = "qwen3_xml"
    open_marker = r"<tool_call>"
    close_marker = r"</tool_call>"
    stray_markers = ("</tool_call>",)

    def parse_body(self, body: str, tools: Sequence[ToolSpec]) -> list[ParsedCall]:
        functions = list(_FUNCTION.finditer(body))
        if not functions:
            raise BodyError("no <function=NAME> element in the block", incomplete=_cut_tag(body))
        return [self._parse_function(match, tools) for match in functions]

    def _parse_function(self, match: re.Match[str], tools: Sequence[ToolSpec]) -> ParsedCall:
        name, inner, raw = match.group(1).strip(), match.group(2), match.group(0)
        if not match.group(3):
            label: OutcomeLabel = (
                "truncated" if match.end() == len(match.string) else ("marker_bad_body")
            )
            return ParsedCall(
                label=label, name=name or None, raw=raw, error="<function> element not closed"
            )
        if not name:
            return ParsedCall(label="wrong_shape", raw=raw, error="<function=> without a name")
        spec = find_tool(name, tools)
        properties: dict[str, Any] = (spec.parameters.get("properties") or {}) if spec else {}
        arguments = {
            parameter.group(1).strip(): _value(
                _strip_newlines(parameter.group(2)), properties.get(parameter.group(1).strip())
            )
            for parameter in _PARAMETER.finditer(inner)
        }
        return validate_arguments(name, arguments, tools, raw=raw)


def _cut_tag(body: str) -> bool:
    """A block ending inside ``<function=...`` (or empty) was cut off."""
    return not body or "<function=".startswith(body) or body.startswith("<function=")


def _strip_newlines(value: str) -> str:
    return value.removeprefix("\n").removesuffix("\n")


def _value(text: str, schema: Any) -> Any:
    types = _types(schema)
    if text.strip().lower() in {"null", "none"} and ("null" in types or "string" not in types):
        return None
    if "string" in types and types <= {"string", "null"}:
        return text
    try:
        return decode_body(text)
    except BodyError:
        return text


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    expected = schema.get("type")
    types = set(expected) if isinstance(expected, list) else {expected} if expected else set()
    for option in schema.get("anyOf") or schema.get("oneOf") or []:
        if isinstance(option, dict) and isinstance(option.get("type"), str):
            types.add(option["type"])
    return {str(kind) for kind in types}
