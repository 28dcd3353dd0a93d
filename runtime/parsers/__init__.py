"""Per-model-family tool-call parsers behind the ``ToolCallParser`` seam."""

from __future__ import annotations

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
]
