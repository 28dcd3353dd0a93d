"""Qwen3-Coder XML family:
``<tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>``.

The block is read element by element, so a value may carry markup as literal text (an agent
writing about tool calls): ``<tool_call>``, ``<function=...>`` and a ``<parameter=X>`` whose
name is not a parameter of the called tool never end a value. A value ends at a
``</parameter>`` that is followed by the next element (a known parameter, ``</function>``,
``</tool_call>``) or the end of the reply; as in vLLM's qwen3 parsers, a value whose close
tag is missing ends at the next known ``<parameter=`` or a closing ``</function>``.
``<tool_call>`` followed by no element is a mention and stays in the content.

A bare ``<function=NAME>`` element without the ``<tool_call>`` wrapper is read as a call too,
where a ``<parameter=`` or ``</function>`` follows it (a ``<function=x>`` named in prose stays
content). vLLM's shipped qwen3_xml parser does the same — its streaming parser opens an implicit
tool call for such an element, and its shared test ``test_extract_tool_calls_fallback_no_tags``
asserts the call — and Qwen3-Coder does drop the wrapper. One vLLM test expects no call here
(``test_implicit_tool_call_no_wrapper``, of a redesigned parser that never opens a call without
the wrapper); we depart from it on purpose, since following it would drop those calls (corpus
case ``vllm-qwen3-implicit-no-wrapper``, docs/parsers.md).

Every value arrives as text: it is kept as a string where the schema wants one, otherwise
decoded as JSON (or a Python literal), as vLLM's parser converts it by the parameter's type;
text that decodes to nothing the schema allows is a ``type_error``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runtime.messages import ToolSpec
from runtime.parsers.base import OutcomeLabel, ParsedCall
from runtime.parsers.blocks import Block, ScanningParser, ends_reply, opens_json, plain_extent
from runtime.parsers.scan import BodyError, decode_body, skip_space
from runtime.parsers.validation import find_tool, validate_arguments

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_FUNCTION_END = "</function>"
_PARAMETER_END = "</parameter>"
_FUNCTION = re.compile(r"<function=([^>\n]*)>")
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>")
_VALUE_END = re.compile(r"</parameter>|<parameter=([^>\n]*)>|</function>")
_BARE_FUNCTION = re.compile(r"(?=<function=[^>\n]*>\s*(?:<parameter=|</function>))")
_NEXT_TAG = re.compile(r"<parameter=|</function>|<function=|</?tool_call>")


class Qwen3XmlParser(ScanningParser):
    family = "qwen3_xml"
    opener = re.compile(f"{re.escape(OPEN)}|{_BARE_FUNCTION.pattern}")

    def read_block(
        self, text: str, opener: re.Match[str], tools: Sequence[ToolSpec], *, truncated: bool
    ) -> Block | None:
        wrapped = bool(opener.group(0))
        start = skip_space(text, opener.end())
        if _FUNCTION.match(text, start):
            return self._read_functions(text, start, tools, wrapped=wrapped)
        cut_off = ends_reply(text, start, "<function=")
        if cut_off or opens_json(text, start) or text.startswith("<function=", start):
            extent = plain_extent(text, opener.end(), OPEN, CLOSE)
            label = extent.failure_label(truncated=truncated, incomplete=cut_off)
            error = "no <function=NAME> element in the block"
            call = ParsedCall(label=label, raw=extent.body.strip(), error=error)
            return Block([call], extent.end)
        return None

    def _read_functions(
        self, text: str, position: int, tools: Sequence[ToolSpec], *, wrapped: bool
    ) -> Block:
        calls: list[ParsedCall] = []
        while (function := _FUNCTION.match(text, position)) is not None:
            call, position, closed = _read_function(text, function, tools)
            calls.append(call)
            following = skip_space(text, position)
            if not closed or not text.startswith("<function=", following):
                break
            position = following
        else:
            bad = plain_extent(text, position, OPEN, CLOSE)
            cut_off = bad.at_end and not bad.closed and _cut_mid_tag(bad.body)
            calls.append(_unclosed(None, bad.body.strip(), cut_off=cut_off, what="element"))
            return Block(calls, bad.end)
        following = skip_space(text, position)
        if wrapped and text.startswith(CLOSE, following):
            position = following + len(CLOSE)
        return Block(calls, position)


def _read_function(
    text: str, function: re.Match[str], tools: Sequence[ToolSpec]
) -> tuple[ParsedCall, int, bool]:
    """One ``<function=NAME>`` element: its call, where it ends, and whether it was closed."""
    name = function.group(1).strip()
    spec = find_tool(name, tools) if name else None
    properties: dict[str, Any] = (spec.parameters.get("properties") or {}) if spec else {}
    known = set(properties) if spec is not None and properties else None
    arguments: dict[str, Any] = {}
    position = function.end()
    while True:
        position = skip_space(text, position)
        if text.startswith(_FUNCTION_END, position):
            end = position + len(_FUNCTION_END)
            return _function_call(name, arguments, tools, text[function.start() : end]), end, True
        parameter = _PARAMETER.match(text, position)
        if parameter is not None:
            value, position = _value_extent(text, parameter.end(), known)
            if value is None:
                call = _unclosed(name, text[function.start() :], cut_off=True)
                return call, len(text), False
            key = parameter.group(1).strip()
            arguments[key] = _value(_strip_newlines(value), properties.get(key))
            continue
        tag = _NEXT_TAG.search(text, position + 1)
        if tag is not None and tag.group(0) in ("<parameter=", _FUNCTION_END):
            position = tag.start()
            continue
        end = len(text) if tag is None else tag.start()
        cut_off = tag is None and _cut_mid_tag(text[position:])
        return _unclosed(name, text[function.start() : end], cut_off=cut_off), end, False


def _cut_mid_tag(rest: str) -> bool:
    """The reply ended inside an element, or inside a tag such as ``<parameter=que``."""
    rest = rest.strip()
    return not rest or (rest.startswith("<") and ">" not in rest)


def _value_extent(text: str, start: int, known: set[str] | None) -> tuple[str | None, int]:
    """The raw value starting at ``start`` and the index to continue from; ``None`` when the
    reply ends inside the value."""
    plain_close: re.Match[str] | None = None
    for tag in _VALUE_END.finditer(text, start):
        if tag.group(0) == _PARAMETER_END:
            if _next_element(text, tag.end(), known):
                return text[start : tag.start()], tag.end()
            plain_close = plain_close or tag
            continue
        opens_known = tag.group(1) is not None and (known is None or tag.group(1) in known)
        closes_function = tag.group(0) == _FUNCTION_END and _ends_function(text, tag.end())
        if opens_known or closes_function:
            if plain_close is not None:
                return text[start : plain_close.start()], plain_close.end()
            return text[start : tag.start()], tag.start()
    if plain_close is not None:
        return text[start : plain_close.start()], plain_close.end()
    return None, len(text)


def _next_element(text: str, index: int, known: set[str] | None) -> bool:
    """After a ``</parameter>``: the next parameter, the end of the function or block, or
    the end of the reply — so the tag really closed the value."""
    index = skip_space(text, index)
    if index >= len(text) or text.startswith((_FUNCTION_END, CLOSE), index):
        return True
    parameter = _PARAMETER.match(text, index)
    return parameter is not None and (known is None or parameter.group(1).strip() in known)


def _ends_function(text: str, index: int) -> bool:
    index = skip_space(text, index)
    return index >= len(text) or text.startswith((CLOSE, "<function=", OPEN), index)


def _function_call(
    name: str, arguments: dict[str, Any], tools: Sequence[ToolSpec], raw: str
) -> ParsedCall:
    if not name:
        return ParsedCall(label="wrong_shape", raw=raw, error="<function=> without a name")
    return validate_arguments(name, arguments, tools, raw=raw)


def _unclosed(
    name: str | None, raw: str, *, cut_off: bool, what: str = "<function> element"
) -> ParsedCall:
    label: OutcomeLabel = "truncated" if cut_off else "marker_bad_body"
    error = f"{what} not closed" if what != "element" else "malformed <function=NAME> element"
    return ParsedCall(label=label, name=name or None, raw=raw, error=error)


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
