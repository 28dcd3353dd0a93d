"""Pythonic family (Gemma-3 prompt style, Llama 3.2/4): ``[fn(a=1), g(b="x")]``.

Parsed with ``ast`` (never ``eval``); only literal arguments are accepted. Positional
arguments are mapped onto the tool's parameters in schema order. Prose around the list is
kept as content.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from runtime.messages import ToolCall, ToolSpec
from runtime.parsers.base import ParsedCall, ParseResult
from runtime.parsers.scan import (
    BodyError,
    call_parts,
    cut,
    dotted_name,
    find_closing,
    parse_python,
)
from runtime.parsers.validation import find_tool, overall_label, validate_arguments

_LIST_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\(")
_WRAPPERS = ("<|python_start|>", "<|python_end|>")


class PythonicParser:
    family = "pythonic"

    def parse(
        self,
        text: str,
        tools: Sequence[ToolSpec],
        *,
        truncated: bool = False,
        native_calls: Sequence[ToolCall] = (),
    ) -> ParseResult:
        calls: list[ParsedCall] = []
        spans: list[tuple[int, int]] = []
        position = 0
        while (match := _LIST_START.search(text, position)) is not None:
            close = find_closing(text, match.start())
            end = len(text) if close is None else close + 1
            calls.extend(
                self._parse_list(text[match.start() : end], tools, closed=close is not None)
            )
            spans.append((match.start(), end))
            position = end
        content = cut(text, spans)
        for wrapper in _WRAPPERS:
            content = content.replace(wrapper, "").strip()
        return ParseResult(
            family=self.family, content=content, calls=tuple(calls), overall=overall_label(calls)
        )

    def _parse_list(
        self, source: str, tools: Sequence[ToolSpec], *, closed: bool
    ) -> list[ParsedCall]:
        if not closed:
            return [ParsedCall(label="truncated", raw=source, error="call list not closed")]
        try:
            tree = parse_python(source)
        except BodyError as exc:
            return [ParsedCall(label="marker_bad_body", raw=source, error=str(exc))]
        if not isinstance(tree, ast.List):
            return [ParsedCall(label="wrong_shape", raw=source, error="expected a list of calls")]
        return [call_from_ast(element, tools, raw=source) for element in tree.elts]


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
