"""Pseudo-tool detection and adapters.

Runs only when the family parser found no call at all. The detector names the kinds of
tool-like text a reply contains: a simulated tool turn such as ``<|im_start|>tool`` (the
paper's InternVL case), a style real models write that no family reads (``runtime.parsers.
styles``: ReAct ``Action:``/``Action Input:``, Qwen-Agent ``✿FUNCTION✿``/``✿ARGS✿``, Gemma's
``tool_code`` blocks), a ``{"name": ...}`` blob outside any wrapper, an offered tool's name
followed by ``(``, or another family's call markers — ``<tool_call>``, ``<function=...>`` and
``<|action_start|>`` only where a call body follows them, not where prose merely mentions
them. Adapters — off by default and switched on per run — try to recover an executable call
from that text: first each style's own reader, then the family parsers, then an offered tool's
name followed by a call or a JSON object; a recovered call that validates is labelled
``adapted``, anything else stays ``pseudo_tool``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Sequence

from runtime.messages import ToolSpec
from runtime.parsers.base import ParsedCall, ToolCallParser
from runtime.parsers.pythonic import call_from_ast
from runtime.parsers.scan import BodyError, cut, decode_json_at, find_closing, parse_python
from runtime.parsers.styles import STYLES, Recovered
from runtime.parsers.validation import validate_arguments

_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "role_header",
        re.compile(
            r"<\|im_start\|>\s*(?:tool|function|ipython)\b|<start_of_turn>|<\|start_header_id\|>"
        ),
    ),
    ("tool_response", re.compile(r"<tool_response>")),
    *((style.kind, style.marker) for style in STYLES),
    ("json_blob", re.compile(r"\{\s*[\"']name[\"']\s*:")),
    (
        "foreign_marker",
        re.compile(
            r"<tool_call>\s*(?:```[\w-]*\s*)?(?:[\[{]|<function=|\Z)"
            r"|<function=[^>\n]*>\s*(?:<parameter=|</function>|\{)"
            r"|<\|action_start\|>\s*(?:<\|plugin\|>|<\|interpreter\|>|\{)"
            r"|\[TOOL_CALLS\]|<\|python_tag\|>"
            r"|<\|python_start\|>|<\|tool_calls?_begin\|>"
        ),
    ),
)
MAX_NAMED_ATTEMPTS = 32
"""How many mentions of an offered tool's name the name-based adapters read per reply."""
ADAPTER_FAMILIES: tuple[str, ...] = (
    "hermes",
    "qwen3_xml",
    "internlm",
    "mistral",
    "json",
    "pythonic",
)


def detect_pseudo_tool(text: str, tools: Sequence[ToolSpec]) -> tuple[str, ...]:
    """Kinds of pseudo-tool text in ``text``, in order of first appearance."""
    found: list[tuple[int, str]] = []
    for kind, pattern in _MARKERS:
        match = pattern.search(text)
        if match is not None:
            found.append((match.start(), kind))
    call = _tool_name_pattern(tools, r"\(")
    if call is not None and (match := call.search(text)) is not None:
        found.append((match.start(), "tool_name_call"))
    return tuple(kind for _, kind in sorted(found))


def pseudo_tool_call(text: str, tools: Sequence[ToolSpec], kinds: Sequence[str]) -> ParsedCall:
    """The single ``pseudo_tool`` outcome recorded for a reply when adapters are off."""
    return ParsedCall(
        label="pseudo_tool",
        name=_mentioned_tool(text, tools),
        raw=text[:500],
        error="tool-like text in no executable format: " + ", ".join(kinds),
    )


def adapt(
    text: str,
    tools: Sequence[ToolSpec],
    kinds: Sequence[str],
    parsers: dict[str, Callable[[], ToolCallParser]],
) -> tuple[list[ParsedCall], str]:
    """Recover calls from pseudo-tool text. Returns the calls (``adapted`` when they validate,
    else ``pseudo_tool`` with the reason) and the content left once recovered spans are cut."""
    first_failure: Recovered | None = None
    for strategy in _strategies(parsers):
        recovered = strategy(text, tools)
        if not recovered.calls:
            continue
        if any(call.executable for call in recovered.calls):
            calls = [_relabel(call) for call in recovered.calls]
            return calls, cut(text, recovered.spans)
        first_failure = first_failure or recovered
    if first_failure is None:
        call = pseudo_tool_call(text, tools, kinds)
        return [call.model_copy(update={"error": f"{call.error}; no call could be recovered"})], (
            text.strip()
        )
    return [_relabel(call) for call in first_failure.calls], text.strip()


def _relabel(call: ParsedCall) -> ParsedCall:
    if call.executable:
        return call.model_copy(update={"label": "adapted"})
    return call.model_copy(
        update={
            "label": "pseudo_tool",
            "error": f"adapter recovered a call that is not executable: {call.label}: {call.error}",
        }
    )


Strategy = Callable[[str, Sequence[ToolSpec]], Recovered]


def _strategies(parsers: dict[str, Callable[[], ToolCallParser]]) -> list[Strategy]:
    def via_family(family: str) -> Strategy:
        def recover(text: str, tools: Sequence[ToolSpec]) -> Recovered:
            result = parsers[family]().parse(text, tools)
            spans = [(0, len(text))] if result.calls else []
            recovered = Recovered(list(result.calls), spans)
            return _with_content(recovered, text, result.content)

        return recover

    return [
        *(style.read for style in STYLES),
        *(via_family(family) for family in ADAPTER_FAMILIES if family in parsers),
        _via_tool_name_call,
        _via_tool_name_then_json,
    ]


def _with_content(recovered: Recovered, text: str, content: str) -> Recovered:
    """A family parser reports content rather than spans: express it as one span to cut."""
    if not recovered.calls:
        return recovered
    start = text.find(content) if content else -1
    if start == -1:
        return Recovered(recovered.calls, [(0, len(text))])
    return Recovered(recovered.calls, [(0, start), (start + len(content), len(text))])


def _via_tool_name_call(text: str, tools: Sequence[ToolSpec]) -> Recovered:
    """``artifact_recall(query="x")`` anywhere, also inside ``print(...)`` or a role turn."""
    pattern = _tool_name_pattern(tools, r"\s*\(")
    calls: list[ParsedCall] = []
    spans: list[tuple[int, int]] = []
    for match in _first_matches(pattern, text):
        close = find_closing(text, match.end() - 1)
        if close is None:
            continue
        source = text[match.start() : close + 1]
        try:
            node = parse_python(source)
        except BodyError:
            continue
        calls.append(call_from_ast(node, tools, raw=source))
        spans.append((match.start(), close + 1))
    return Recovered(calls, spans)


def _via_tool_name_then_json(text: str, tools: Sequence[ToolSpec]) -> Recovered:
    """A tool name followed within a short gap by a JSON object of arguments, as in
    ``<|im_start|>tool\\nartifact_recall\\n{"query": ...}`` or ReAct ``Action Input: {...}``."""
    pattern = _tool_name_pattern(tools, r"[^{}]{0,40}?(?=\{)")
    calls: list[ParsedCall] = []
    spans: list[tuple[int, int]] = []
    for match in _first_matches(pattern, text):
        try:
            arguments, end = decode_json_at(text, match.end())
        except BodyError:
            continue
        if isinstance(arguments, dict):
            raw = text[match.start() : end]
            calls.append(validate_arguments(match.group(1), arguments, tools, raw=raw))
            spans.append((match.start(), end))
    return Recovered(calls, spans)


def _first_matches(pattern: re.Pattern[str] | None, text: str) -> Iterator[re.Match[str]]:
    """The first ``MAX_NAMED_ATTEMPTS`` matches of ``pattern``: each is read up to its closing
    bracket, which an unbalanced reply (a small model repeating ``artifact_recall(`` thousands of
    times) puts at its end, so reading every match would take time quadratic in its length."""
    return itertools.islice(pattern.finditer(text), MAX_NAMED_ATTEMPTS) if pattern else iter(())


def _tool_name_pattern(tools: Sequence[ToolSpec], suffix: str) -> re.Pattern[str] | None:
    names = sorted((tool.name for tool in tools if tool.name), key=len, reverse=True)
    if not names:
        return None
    alternatives = "|".join(re.escape(name) for name in names)
    return re.compile(rf"(?<![\w.])({alternatives})(?![\w]){suffix}")


def _mentioned_tool(text: str, tools: Sequence[ToolSpec]) -> str | None:
    pattern = _tool_name_pattern(tools, "")
    match = pattern.search(text) if pattern else None
    return match.group(1) if match else None
