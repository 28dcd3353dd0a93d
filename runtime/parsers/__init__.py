"""Per-model-family tool-call parsers behind the ``ToolCallParser`` seam."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.messages import ToolCall, ToolSpec
from runtime.parsers.base import (
    EXECUTABLE_LABELS,
    OutcomeLabel,
    ParsedCall,
    ParseResult,
    ToolCallParser,
)
from runtime.parsers.hermes import HermesParser
from runtime.parsers.native import NativeParser

PARSERS: dict[str, type[ToolCallParser]] = {
    "hermes": HermesParser,
    "native": NativeParser,
}


def get_parser(family: str) -> ToolCallParser:
    try:
        return PARSERS[family]()
    except KeyError:
        known = ", ".join(sorted(PARSERS))
        raise ValueError(f"unknown tool-call parser family {family!r} (known: {known})") from None


__all__ = [
    "EXECUTABLE_LABELS",
    "PARSERS",
    "OutcomeLabel",
    "ParseResult",
    "ParsedCall",
    "ToolCallParser",
    "get_parser",
    "parse_reply",
]


def parse_reply(
    text: str,
    tools: Sequence[ToolSpec],
    *,
    family: str,
    adapters: bool = False,
    truncated: bool = False,
    native_calls: Sequence[ToolCall] = (),
) -> ParseResult:
    """The one entry point the agent loop uses: parse with the family's parser; the
    pseudo-tool detector and adapters (when enabled) run when nothing parsed."""
    return get_parser(family).parse(text, tools, truncated=truncated, native_calls=native_calls)
