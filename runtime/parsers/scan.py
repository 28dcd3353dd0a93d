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
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError, TypeError)
_JSON_WORDS = {"true": True, "false": False, "null": None, "none": None}
_FENCE_OPEN = re.compile(r"^```[\w-]*[ \t]*\n?")
_PARTIAL_TAIL = re.compile(
    r"-?\d*\.?\d*(?:[eE][+-]?\d*)?|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?"
)
_EMPTY_FENCE_BEFORE = re.compile(r"```[\w-]*\s*$")
_EMPTY_FENCE_AFTER = re.compile(r"^\s*```")


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
    """True when ``text`` is a cut-off beginning of a call body: decoding it fails only because
    the text ended (inside a string, a number or a word, or with brackets still open), not at
    a malformation before the end. ``{"a": {bad}`` is complete but malformed; ``{"a": "x`` is
    cut off. Bodies written as Python literals (single quotes) are judged by their brackets."""
    stripped = _FENCE_OPEN.sub("", text.strip(), count=1)
    first_quote = next((char for char in stripped if char in "\"'"), '"')
    if first_quote == "'":
        return _brackets_open(stripped)
    return _json_cut_off(stripped)


def _json_cut_off(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated string"):
            return True
        if exc.msg.startswith("Invalid \\uXXXX escape"):
            return exc.pos + 6 > len(text)
        return _PARTIAL_TAIL.fullmatch(text[exc.pos :]) is not None
    except (ValueError, RecursionError):
        return False
    return False


def _brackets_open(text: str) -> bool:
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
        elif char in "\"'":
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


def decode_body(body: str) -> Any:
    """Decode a call body: one JSON value, several JSON values in a row (returned as a list),
    or a Python literal (single quotes, ``True``/``None``). Raises ``BodyError``."""
    text = strip_fence(body)
    if not text:
        raise BodyError("empty call body", incomplete=True)
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
    """``text`` with the given ``(start, end)`` spans removed. Text outside the spans is kept
    byte for byte, except at each junction: a Markdown fence left empty by the cut is
    dropped and a whitespace run of more than two line breaks becomes a blank line. The
    result is stripped."""
    pieces: list[str] = []
    position = 0
    for start, end in sorted(spans):
        if start >= position:
            pieces.append(text[position:start])
            position = end
    pieces.append(text[position:])
    joined = pieces[0]
    for piece in pieces[1:]:
        joined = _join(joined, piece)
    return joined.strip()


def _join(left: str, right: str) -> str:
    before, after = _EMPTY_FENCE_BEFORE.search(left), _EMPTY_FENCE_AFTER.match(right)
    if before is not None and after is not None:
        left, right = left[: before.start()], right[after.end() :]
    kept_left, kept_right = left.rstrip(), right.lstrip()
    gap = left[len(kept_left) :] + right[: len(right) - len(kept_right)]
    return kept_left + (gap if gap.count("\n") <= 2 else "\n\n") + kept_right


def skip_space(text: str, index: int) -> int:
    """The first index at or after ``index`` that is not whitespace (or ``len(text)``)."""
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def decode_run_at(text: str, start: int) -> tuple[list[Any], int] | None:
    """One or more bracketed JSON (or Python-literal) values starting at ``text[start]``,
    separated by whitespace, ``,`` or ``;``; returns them and the index just past the last.
    ``None`` when the first value does not decode. A marker inside a string value is part of
    the value, so the run ends where the values really end."""
    values: list[Any] = []
    end = start
    index = start
    while index < len(text) and text[index] in "{[":
        try:
            value, index = decode_json_at(text, index)
        except BodyError:
            break
        values.append(value)
        end = index
        while index < len(text) and (text[index].isspace() or text[index] in ",;"):
            index += 1
    return (values, end) if values else None


@dataclass(frozen=True)
class BracketScan:
    """Where a bracketed region that starts at an opening bracket ends."""

    end: int
    """Just past its closing bracket; when never closed, the end of the text (or, for a
    malformed region, just past its last ``]``)."""
    closed: bool
    malformed: bool
    """A closer did not match its opener, or a quote had to be read as a plain character
    (``query=Bob's``) for the region to close: complete text that is not a valid literal."""
    cut_off: bool = False
    """Read literally, the text ends inside the region (inside a string or with brackets
    open) without any mismatch before."""


def scan_brackets(text: str, start: int) -> BracketScan:
    """Scan from the bracket at ``text[start]`` to its match, skipping quoted strings. An
    unmatched closer is skipped and marks the region malformed; a string left open at the
    end is retried with its quote read as a plain character, which marks the region
    malformed if it then closes or mismatches. A region that only runs out of text is cut
    off."""
    ignored: set[int] = set()
    first, open_quote = _scan_brackets(text, start, ignored)
    cut_off = not first.closed and not first.malformed
    scan = first
    while open_quote is not None and len(ignored) < 3:
        ignored.add(open_quote)
        scan, open_quote = _scan_brackets(text, start, ignored)
        if scan.closed or scan.malformed:
            return BracketScan(scan.end, scan.closed, True, cut_off)
    return BracketScan(first.end, first.closed, first.malformed, cut_off)


def _scan_brackets(text: str, start: int, ignored: set[int]) -> tuple[BracketScan, int | None]:
    stack: list[str] = []
    quote_at: int | None = None
    first_mismatch: int | None = None
    index = start
    while index < len(text):
        char = text[index]
        if quote_at is not None:
            if char == "\\":
                index += 1
            elif char == text[quote_at]:
                quote_at = None
        elif char in "\"'" and index not in ignored:
            quote_at = index
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
        elif char in ")]}":
            if stack and stack[-1] == char:
                stack.pop()
                if not stack:
                    return BracketScan(index + 1, True, first_mismatch is not None), None
            elif first_mismatch is None:
                first_mismatch = index
        index += 1
    if first_mismatch is None:
        return BracketScan(len(text), False, False), quote_at
    last_close = text.rfind("]", first_mismatch)
    end = last_close + 1 if last_close != -1 else len(text)
    return BracketScan(end, False, True), quote_at
