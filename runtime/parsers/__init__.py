"""Per-model-family tool-call parsers behind the ``ToolCallParser`` seam.

Above: the agent loop and the ``mirage parse`` / ``mirage compliance`` commands, which call
``parse_reply``. Below: one small class per family (hermes, pythonic, json, internlm, mistral,
qwen3_xml, native), the shared schema validation, and the pseudo-tool detector and adapters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from runtime.messages import ToolCall, ToolSpec
from runtime.parsers.bare_json import BareJsonParser
from runtime.parsers.base import (
    EXECUTABLE_LABELS,
    OutcomeLabel,
    ParsedCall,
    ParseResult,
    ToolCallParser,
)
from runtime.parsers.hermes import HermesParser
from runtime.parsers.internlm import InternLMParser
from runtime.parsers.mistral import MistralParser
from runtime.parsers.native import NativeParser
from runtime.parsers.pseudo import adapt, detect_pseudo_tool, pseudo_tool_call
from runtime.parsers.pythonic import PythonicParser
from runtime.parsers.qwen3_xml import Qwen3XmlParser
from runtime.parsers.validation import overall_label

log = structlog.get_logger(__name__)

PARSERS: dict[str, Callable[[], ToolCallParser]] = {
    "hermes": HermesParser,
    "pythonic": PythonicParser,
    "json": BareJsonParser,
    "internlm": InternLMParser,
    "mistral": MistralParser,
    "qwen3_xml": Qwen3XmlParser,
    "native": NativeParser,
}
FAMILIES: tuple[str, ...] = tuple(PARSERS)

__all__ = [
    "EXECUTABLE_LABELS",
    "FAMILIES",
    "PARSERS",
    "OutcomeLabel",
    "ParseResult",
    "ParsedCall",
    "ToolCallParser",
    "detect_pseudo_tool",
    "get_parser",
    "parse_reply",
]


def get_parser(family: str) -> ToolCallParser:
    try:
        return PARSERS[family]()
    except KeyError:
        known = ", ".join(FAMILIES)
        raise ValueError(f"unknown tool-call parser family {family!r} (known: {known})") from None


def parse_reply(
    text: str,
    tools: Sequence[ToolSpec],
    *,
    family: str,
    adapters: bool = False,
    truncated: bool = False,
    native_calls: Sequence[ToolCall] = (),
) -> ParseResult:
    """The one entry point the agent loop uses: parse with the family's parser; when nothing
    parsed, run the pseudo-tool detector and (if ``adapters``) try to recover a call.

    Raises ``ValueError`` only for an unknown family; model output never raises."""
    parser = get_parser(family)
    try:
        result = parser.parse(text, tools, truncated=truncated, native_calls=native_calls)
        if result.calls:
            return result
        return _pseudo_tool_pass(result, text, tools, adapters=adapters)
    except Exception as exc:  # a parser bug must not crash the loop: record it as data
        log.exception("parser_failed", family=family, error_type=type(exc).__name__)
        call = ParsedCall(label="marker_bad_body", raw=text[:500], error=f"parser error: {exc!r}")
        return ParseResult(
            family=family, content=text.strip(), calls=(call,), overall="marker_bad_body"
        )


def _pseudo_tool_pass(
    result: ParseResult, text: str, tools: Sequence[ToolSpec], *, adapters: bool
) -> ParseResult:
    kinds = detect_pseudo_tool(text, tools)
    if not kinds:
        return result
    if adapters:
        calls, content = adapt(text, tools, kinds, PARSERS)
    else:
        calls, content = [pseudo_tool_call(text, tools, kinds)], result.content
    return result.model_copy(
        update={
            "calls": tuple(calls),
            "content": content,
            "overall": overall_label(calls),
            "pseudo_tool_markers": kinds,
        }
    )
