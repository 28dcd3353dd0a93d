"""Pythonic family (Gemma-3 prompt style, Llama 3.2/4): ``[fn(a=1), g(b="x")]``.

Parsed with ``ast`` (never ``eval``); only literal arguments are accepted. Positional
arguments are mapped onto the tool's parameters in schema order. Prose around the list is
kept as content; Llama 4's ``<|python_start|>``/``<|python_end|>`` around a list belong to it.

A list the reply ends inside is ``truncated``; a complete list that is not valid Python
(mismatched brackets, a stray quote) is ``marker_bad_body``, and as in vLLM's pythonic parser
the calls in it that parse on their own are still kept.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from runtime.messages import ToolSpec
from runtime.parsers.base import ParsedCall
from runtime.parsers.blocks import Block, ScanningParser
from runtime.parsers.scan import BodyError, call_parts, dotted_name, parse_python, scan_brackets
from runtime.parsers.validation import find_tool, validate_arguments

_LIST_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\(")
_CALL_SEPARATOR = re.compile(r",(?=\s*[A-Za-z_][\w.]*\s*\()")
_WRAPPER_BEFORE = re.compile(r"<\|python_start\|>\s*$")
_WRAPPER_AFTER = re.compile(r"\s*<\|python_end\|>")


class PythonicParser(ScanningParser):
    family = "pythonic"
    opener = _LIST_START

    def read_block(
        self, text: str, opener: re.Match[str], tools: Sequence[ToolSpec], *, truncated: bool
    ) -> Block:
        """The list opened at ``opener`` and, when present, the ``<|python_start|>`` /
        ``<|python_end|>`` wrapper around it."""
        scan = scan_brackets(text, opener.start())
        cut_off = scan.cut_off and (truncated or not scan.malformed)
        end = len(text) if cut_off else scan.end
        source = text[opener.start() : end]
        if cut_off:
            calls = [ParsedCall(label="truncated", raw=source, error="call list cut off")]
        else:
            calls = _parse_list(source, tools)
        before = _WRAPPER_BEFORE.search(text, 0, opener.start())
        after = _WRAPPER_AFTER.match(text, end)
        return Block(calls, after.end() if after else end, before.start() if before else None)


def _parse_list(source: str, tools: Sequence[ToolSpec]) -> list[ParsedCall]:
    try:
        tree = parse_python(source)
    except BodyError as exc:
        return _salvage(source, tools) or [
            ParsedCall(label="marker_bad_body", raw=source, error=str(exc))
        ]
    if not isinstance(tree, ast.List):
        return [ParsedCall(label="wrong_shape", raw=source, error="expected a list of calls")]
    return [call_from_ast(element, tools, raw=source) for element in tree.elts]


def _salvage(source: str, tools: Sequence[ToolSpec]) -> list[ParsedCall]:
    """The calls of a list that is not valid Python as a whole, one segment at a time: a
    segment that parses as a call is validated, the rest become one ``marker_bad_body``.
    Empty when no segment parses (the caller then labels the whole list)."""
    inner = source[1:-1] if source.endswith("]") else source[1:]
    calls: list[ParsedCall] = []
    pending = ""
    for segment in _CALL_SEPARATOR.split(inner):
        pending = f"{pending},{segment}" if pending else segment
        try:
            node = parse_python(pending)
        except BodyError:
            continue
        if isinstance(node, ast.Call):
            calls.append(call_from_ast(node, tools, raw=pending.strip()))
            pending = ""
    if not calls:
        return []
    if pending.strip():
        error = "not valid Python"
        calls.append(ParsedCall(label="marker_bad_body", raw=pending.strip(), error=error))
    return calls


def call_from_ast(node: ast.AST, tools: Sequence[ToolSpec], *, raw: str) -> ParsedCall:
    """Validate one ``ast.Call`` with literal arguments against the offered tools."""
    try:
        name, positional, keywords = call_parts(node)
    except BodyError as exc:
        called = dotted_name(node.func) if isinstance(node, ast.Call) else None
        return ParsedCall(label="wrong_shape", name=called, raw=raw, error=str(exc))
    arguments = _bind_positional(name, positional, tools)
    if arguments is None:
        return ParsedCall(
            label="wrong_shape",
            name=name,
            raw=raw,
            error="positional arguments for a tool without known parameters",
        )
    clash = sorted(set(arguments) & set(keywords))
    if clash:
        return ParsedCall(
            label="wrong_shape",
            name=name,
            raw=raw,
            error=f"argument(s) given twice: {', '.join(clash)}",
        )
    return validate_arguments(name, {**arguments, **keywords}, tools, raw=raw)


def _bind_positional(
    name: str, positional: list[Any], tools: Sequence[ToolSpec]
) -> dict[str, Any] | None:
    if not positional:
        return {}
    spec = find_tool(name, tools)
    order = list((spec.parameters.get("properties") or {}) if spec else {})
    if len(positional) > len(order):
        return None
    return dict(zip(order, positional, strict=False))
