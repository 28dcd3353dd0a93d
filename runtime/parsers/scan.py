"""Text-scanning helpers shared by the parser families.

Below the parsers: bracket matching that respects string literals, lenient decoding of JSON
(or Python-literal) bodies, and conversion of Python call syntax to names and literal values
with ``ast`` — never ``eval``. Every helper reports bad input with ``BodyError`` (a
``ValueError``), which the parsers turn into an outcome label.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_DECODER = json.JSONDecoder()
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)
_EMPTY_FENCE = re.compile(r"```[\w-]*\s*```")
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError, TypeError)
_JSON_WORDS = {"true": True, "false": False, "null": None, "none": None}


class BodyError(ValueError):
    """A call body that cannot be decoded; ``incomplete`` says it looks cut off."""

    def __init__(self, message: str, *, incomplete: bool = False) -> None:
        super().__init__(message)
        self.incomplete = incomplete


def find_closing(text: str, start: int) -> int | None:
    """Index of the bracket closing ``text[start]`` (one of ``([{``), skipping brackets
    inside quoted strings; ``None`` when the text ends first or brackets are mismatched."""
    stack: list[str] = []
    quote: str | None = None
    index = start
    length = len(text)
    while index < length:
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
        elif char in ")]}":
            if not stack or stack.pop() != char:
                return None
            if not stack:
                return index
        index += 1
    return None


def looks_incomplete(text: str) -> bool:
    """True when ``text`` ends inside a string or with brackets still open."""
    depth = 0
    quote: str | None = None
    escaped = False
    for char in text:
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
        elif char == '"':
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
    return quote is not None or depth > 0


def strip_fence(text: str) -> str:
    """Drop one surrounding Markdown code fence, if any."""
    stripped = text.strip()
    match = _FENCE.match(stripped)
    return match.group(1).strip() if match else stripped


def remove_empty_fences(text: str) -> str:
    return _EMPTY_FENCE.sub("", text)


def decode_body(body: str) -> Any:
    """Decode a call body: one JSON value, several JSON values in a row (returned as a list),
    or a Python literal (single quotes, ``True``/``None``). Raises ``BodyError``."""
    text = strip_fence(body)
    if not text:
        raise BodyError("empty call body", incomplete=False)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    values = _decode_json_run(text)
    if values is not None:
        return values if len(values) > 1 else values[0]
    try:
        return python_literal(text)
    except BodyError:
        pass
    raise BodyError("body is neither JSON nor a literal", incomplete=looks_incomplete(text))


def _decode_json_run(text: str) -> list[Any] | None:
    """JSON values separated by whitespace, ``,`` or ``;`` that fill ``text`` exactly."""
    values: list[Any] = []
    index = 0
    while index < len(text):
        try:
            value, index = _DECODER.raw_decode(text, index)
        except (ValueError, RecursionError):
            return None
        values.append(value)
        while index < len(text) and (text[index].isspace() or text[index] in ",;"):
            index += 1
    return values or None


def decode_json_at(text: str, start: int) -> tuple[Any, int]:
    """Decode the bracketed JSON (or Python-literal) value starting at ``text[start]``;
    returns the value and the index just past it. Raises ``BodyError``."""
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    close = find_closing(text, start)
    if close is None:
        raise BodyError("value is cut off", incomplete=looks_incomplete(text[start:]))
    return python_literal(text[start : close + 1]), close + 1


def python_literal(source: str) -> Any:
    """Evaluate a Python (or JSON-ish) literal expression safely. Raises ``BodyError``."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except _PARSE_ERRORS as exc:
        raise BodyError(f"not a literal: {_short(exc)}") from None
    return literal_value(tree.body)


def literal_value(node: ast.AST) -> Any:
    """The value of a literal node (constants, lists, tuples, dicts, sets, signed numbers,
    and the bare words true/false/null). Raises ``BodyError`` for anything else."""
    try:
        return _literal(node)
    except RecursionError:
        raise BodyError("literal nested too deeply") from None


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and not isinstance(node.value, bytes | complex):
        return node.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise BodyError("dict unpacking is not a literal")
        return {
            _literal_key(key): _literal(value)
            for key, value in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _literal(node.operand)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Name) and node.id.lower() in _JSON_WORDS:
        return _JSON_WORDS[node.id.lower()]
    raise BodyError(f"{type(node).__name__} is not a literal")


def _literal_key(node: ast.expr | None) -> Any:
    key = _literal(node) if node is not None else None
    if isinstance(key, list):
        raise BodyError("a list cannot be a dict key")
    return key


def call_parts(node: ast.AST) -> tuple[str, list[Any], dict[str, Any]]:
    """Name, positional and keyword literal arguments of an ``ast.Call``. Raises ``BodyError``
    when the node is not a call of a (dotted) name or an argument is not a literal."""
    if not isinstance(node, ast.Call):
        raise BodyError(f"expected a function call, found {type(node).__name__}")
    name = dotted_name(node.func)
    if name is None:
        raise BodyError("the called object is not a plain name")
    positional: list[Any] = []
    for argument in node.args:
        if isinstance(argument, ast.Starred):
            raise BodyError("*args is not allowed")
        positional.append(_argument_value(argument, f"positional argument {len(positional)}"))
    keywords: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise BodyError("**kwargs is not allowed")
        keywords[keyword.arg] = _argument_value(keyword.value, f"argument {keyword.arg!r}")
    return name, positional, keywords


def _argument_value(node: ast.AST, what: str) -> Any:
    try:
        return literal_value(node)
    except BodyError as exc:
        raise BodyError(f"{what} is not a literal ({exc})") from None


def dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def parse_python(source: str) -> ast.AST:
    """``ast.parse`` in eval mode with every failure turned into ``BodyError``."""
    try:
        return ast.parse(source.strip(), mode="eval").body
    except _PARSE_ERRORS as exc:
        raise BodyError(f"not valid Python: {_short(exc)}") from None


def _short(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:160]


def cut(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the given ``(start, end)`` spans removed, whitespace-tidied."""
    pieces: list[str] = []
    position = 0
    for start, end in sorted(spans):
        if start >= position:
            pieces.append(text[position:start])
            position = end
    pieces.append(text[position:])
    joined = remove_empty_fences("".join(pieces))
    return re.sub(r"\n{3,}", "\n\n", joined).strip()
