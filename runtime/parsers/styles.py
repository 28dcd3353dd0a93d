"""Tool-call styles that real models write but no parser family reads: pseudo-tool text.

Above: ``runtime.parsers.pseudo``, which names the styles a reply contains (``STYLES``: each
one's ``marker``) when its family parser found no call, and with adapters on reads calls from
them (each one's ``read``). Below: the shared decoding of ``runtime.parsers.scan`` and the
schema validation of ``runtime.parsers.validation``.

- ``react_action``: ReAct, as LangChain's ``ReActSingleInputOutputParser`` reads it
  (``Action: NAME`` then ``Action Input: INPUT``, numbered ``Action 1:`` too, anywhere in the
  reply). The input is a JSON object of arguments, or plain text for a tool with exactly one
  required string parameter.
- ``qwen_agent``: Qwen-Agent's function-call template (``✿FUNCTION✿: NAME`` then
  ``✿ARGS✿: {...}``, its ``QwenFnCallPrompt``), read as its ``postprocess_fncall_messages``
  does: one call per ``✿ARGS✿``, a trailing comment after the JSON dropped, ``✿RESULT✿`` /
  ``✿RETURN✿`` ending the calls.
- ``tool_code``: Gemma's function-calling prompt (a Python call in a ````` ```tool_code ````` block,
  ``<tool_code>…</tool_code>`` too), the calls read with ``ast`` as the ``pythonic`` family
  reads them; ``print(...)`` around a call and a module prefix (``default_api.NAME``) are
  dropped, as Gemma and Gemini write them.

Where this departs from those projects is in docs/parsers.md ("Pseudo-tool styles").
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.messages import ToolSpec
from runtime.parsers.base import ParsedCall
from runtime.parsers.pythonic import call_from_ast
from runtime.parsers.scan import BodyError, decode_body, dotted_name
from runtime.parsers.validation import find_tool, validate_arguments


@dataclass(frozen=True)
class Recovered:
    """Calls read from pseudo-tool text and the spans of the reply they were read from."""

    calls: list[ParsedCall]
    spans: list[tuple[int, int]]


Reader = Callable[[str, Sequence[ToolSpec]], Recovered]


@dataclass(frozen=True)
class Style:
    kind: str
    marker: re.Pattern[str]
    read: Reader


_REACT_KEYWORD = re.compile(r"\n[ \t]*[*_]*(?:Observation|Thought|Action|Final Answer)\b")
_REACT_TOKEN = re.compile(
    r"(?P<input>Action[ \t]*\d*[ \t]*Input[ \t]*\d*[ \t]*[*_]*:[ \t*_]*)"
    r"|(?P<action>[*_]*Action[ \t]*\d*[ \t]*[*_]*:)"
)
_REACT_MARKER = re.compile(
    r"(?m:^[ \t]*[*_]*Action[ \t]*\d*[ \t]*[*_]*:)|Action[ \t]*\d*[ \t]*Input[ \t]*\d*[ \t]*[*_]*:"
)
FN_NAME, FN_ARGS, FN_RESULT, FN_EXIT = "✿FUNCTION✿", "✿ARGS✿", "✿RESULT✿", "✿RETURN✿"
_FN_NAME = re.compile(rf"{FN_NAME}\s*:")
_FN_ARGS = re.compile(rf"{FN_ARGS}\s*:")
_FN_END = re.compile(f"{FN_RESULT}|{FN_EXIT}")
_TOOL_CODE_OPENER = re.compile(r"```tool_code[ \t]*\n?|<tool_code>")
_TOOL_CODE_MARKER = re.compile(r"<tool_code>|```tool_code")


def read_react(text: str, tools: Sequence[ToolSpec]) -> Recovered:
    """Every ``Action:`` / ``Action Input:`` pair (the ``Action:`` nearest before each
    ``Action Input:``); the input ends at the next ReAct keyword line (``Observation:``,
    ``Thought:``, ``Action:``, ``Final Answer:``) or the reply's end. One pass over the markers
    (a reply repeating ``Action:`` thousands of times, as a small model looping does, is read in
    linear time)."""
    keywords = [match.start() for match in _REACT_KEYWORD.finditer(text)]
    calls: list[ParsedCall] = []
    spans: list[tuple[int, int]] = []
    action: re.Match[str] | None = None
    consumed = 0  # the end of the last input: markers inside it are its text
    for token in _REACT_TOKEN.finditer(text):
        if token.start() < consumed:
            continue
        if token.group("action") is not None:
            action = token
            continue
        if action is None:
            continue
        after = bisect.bisect_right(keywords, token.end() - 1)
        end = keywords[after] if after < len(keywords) else len(text)
        name = text[action.end() : token.start()].strip().strip("\"'`*_ \t\n")
        raw = text[action.start() : end]
        calls.append(_react_call(name, text[token.end() : end].strip(), tools, raw=raw))
        spans.append((action.start(), end))
        action, consumed = None, end
    return Recovered(calls, spans)


def _react_call(name: str, given: str, tools: Sequence[ToolSpec], *, raw: str) -> ParsedCall:
    if not name:
        return ParsedCall(label="wrong_shape", raw=raw, error="Action names no tool")
    arguments = _json_object(given)
    if arguments is not None:
        return validate_arguments(name, arguments, tools, raw=raw)
    spec = find_tool(name, tools)
    if spec is None:
        return validate_arguments(name, {}, tools, raw=raw)  # unknown_tool, naming the offered
    parameter = _single_required_string(spec)
    if parameter is None:
        error = (
            "Action Input is not a JSON object of arguments, and the tool has no single "
            "required string parameter to take it as text"
        )
        return ParsedCall(label="wrong_shape", name=name, raw=raw, error=error)
    value = given.strip().strip("\"'`")
    return validate_arguments(name, {parameter: value}, tools, raw=raw)


def read_qwen_agent(text: str, tools: Sequence[ToolSpec]) -> Recovered:
    """From the first ``✿FUNCTION✿:`` to ``✿RESULT✿``/``✿RETURN✿`` (or the end): one call per
    ``✿ARGS✿:`` of each function, as Qwen-Agent splits them; like Qwen-Agent, what follows the
    calls (a result the model made up) is not kept as content."""
    first = _FN_NAME.search(text)
    if first is None:
        return Recovered([], [])
    end_marker = _FN_END.search(text, first.start())
    end = end_marker.start() if end_marker else len(text)
    calls: list[ParsedCall] = []
    for part in _FN_NAME.split(text[first.end() : end]):
        name, *arguments = _FN_ARGS.split(part)
        raw = f"{FN_NAME}:{part}".rstrip()
        for given in arguments or [""]:
            calls.append(_qwen_call(name.strip(), given.strip(), tools, raw=raw))
    return Recovered(calls, [(first.start(), len(text))])


def _qwen_call(name: str, given: str, tools: Sequence[ToolSpec], *, raw: str) -> ParsedCall:
    if not name:
        return ParsedCall(label="wrong_shape", raw=raw, error=f"{FN_NAME} names no tool")
    if given.startswith("{") and "}" in given:  # Qwen-Agent drops a comment after the JSON
        given = given[: given.rindex("}") + 1]
    arguments = _json_object(given) if given else {}
    if arguments is None:
        error = f"{FN_ARGS} is not a JSON object"
        return ParsedCall(label="marker_bad_body", name=name, raw=raw, error=error)
    return validate_arguments(name, arguments, tools, raw=raw)


def read_tool_code(text: str, tools: Sequence[ToolSpec]) -> Recovered:
    """The Python calls in each ``tool_code`` block, a block ending at the first closing
    ```` ``` ```` (or ``</tool_code>``) after its opening; an opening that nothing closes ends the
    reading (so unclosed openings do not make it quadratic)."""
    calls: list[ParsedCall] = []
    spans: list[tuple[int, int]] = []
    position = 0
    while (opener := _TOOL_CODE_OPENER.search(text, position)) is not None:
        closer = "```" if opener.group().startswith("```") else "</tool_code>"
        close = text.find(closer, opener.end())
        if close < 0:
            break
        calls.extend(_code_calls(text[opener.end() : close].strip(), tools))
        position = close + len(closer)
        spans.append((opener.start(), position))
    return Recovered(calls, spans)


def _code_calls(source: str, tools: Sequence[ToolSpec]) -> list[ParsedCall]:
    try:
        module = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        error = f"tool_code is not valid Python: {str(exc).splitlines()[0][:160]}"
        return [ParsedCall(label="marker_bad_body", raw=source, error=error)]
    found = [call for statement in module.body for call in _statement_calls(statement)]
    if not found:
        return [ParsedCall(label="wrong_shape", raw=source, error="tool_code calls nothing")]
    return [call_from_ast(_offered_name(node, tools), tools, raw=source) for node in found]


def _statement_calls(statement: ast.stmt) -> list[ast.expr]:
    """The calls one statement makes: ``f(...)``, ``print(f(...))``, ``x = f(...)``,
    ``[f(...), g(...)]``."""
    value = statement.value if isinstance(statement, ast.Expr | ast.Assign) else None
    if isinstance(value, ast.List | ast.Tuple):
        return list(value.elts)
    if isinstance(value, ast.Call) and dotted_name(value.func) == "print" and value.args:
        return [argument for argument in value.args if isinstance(argument, ast.Call)]
    return [value] if value is not None else []


def _offered_name(node: ast.expr, tools: Sequence[ToolSpec]) -> ast.expr:
    """``default_api.NAME(...)`` as ``NAME(...)`` when NAME is an offered tool."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return node
    if find_tool(node.func.attr, tools) is None:
        return node
    return ast.Call(func=ast.Name(id=node.func.attr), args=node.args, keywords=node.keywords)


def _json_object(given: str) -> dict[str, Any] | None:
    if not given.lstrip().startswith(("{", "```")):
        return None
    try:
        value = decode_body(given)
    except BodyError:
        return None
    return value if isinstance(value, dict) else None


def _single_required_string(spec: ToolSpec) -> str | None:
    required = spec.parameters.get("required") or []
    properties = spec.parameters.get("properties") or {}
    if len(required) != 1:
        return None
    schema = properties.get(required[0], {})
    return required[0] if isinstance(schema, dict) and schema.get("type") == "string" else None


STYLES: tuple[Style, ...] = (
    Style("qwen_agent", _FN_NAME, read_qwen_agent),
    Style("react_action", _REACT_MARKER, read_react),
    Style("tool_code", _TOOL_CODE_MARKER, read_tool_code),
)
"""The styles, each read before the generic adapters (a family parser, a tool name followed
by a call or by JSON) get their turn."""
