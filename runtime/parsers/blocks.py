"""Shared machinery for families whose calls sit between an open and a close marker
(hermes ``<tool_call>``, internlm ``<|action_start|><|plugin|>``, qwen3-coder XML).

A subclass names its markers and decodes one block body into calls; this base finds the
blocks, decides whether a failing block is ``truncated`` (cut off at the end of the reply) or
``marker_bad_body``, and keeps the text around the blocks as content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from runtime.messages import ToolCall, ToolSpec
from runtime.parsers.base import OutcomeLabel, ParsedCall, ParseResult
from runtime.parsers.scan import BodyError, cut
from runtime.parsers.validation import overall_label


@dataclass(frozen=True)
class Block:
    body: str
    start: int
    end: int
    closed: bool
    at_end: bool

    def failure_label(self, *, truncated: bool, incomplete: bool) -> OutcomeLabel:
        """An undecodable block is ``truncated`` when it runs to the end of the reply without
        its close marker and either looks cut off or the backbone hit its token limit."""
        if not self.closed and self.at_end and (incomplete or truncated):
            return "truncated"
        return "marker_bad_body"


def find_blocks(text: str, open_marker: str, close_marker: str) -> list[Block]:
    """Blocks from each open marker to its close marker, the next open marker, or the end."""
    pattern = re.compile(f"{open_marker}(.*?)(?:({close_marker})|(?={open_marker})|\\Z)", re.DOTALL)
    blocks = []
    for match in pattern.finditer(text):
        closed = match.group(2) is not None
        at_end = match.end() == len(text) or not text[match.end() :].strip()
        blocks.append(Block(match.group(1), match.start(), match.end(), closed, at_end))
    return blocks


class TaggedBlockParser:
    """Base of the marker-delimited families; subclasses set the markers and ``parse_body``."""

    family: str
    open_marker: ClassVar[str]
    close_marker: ClassVar[str]
    stray_markers: ClassVar[tuple[str, ...]] = ()

    def parse(
        self,
        text: str,
        tools: Sequence[ToolSpec],
        *,
        truncated: bool = False,
        native_calls: Sequence[ToolCall] = (),
    ) -> ParseResult:
        calls: list[ParsedCall] = []
        blocks = find_blocks(text, self.open_marker, self.close_marker)
        for block in blocks:
            calls.extend(self._parse_block(block, tools, truncated=truncated))
        content = cut(text, [(block.start, block.end) for block in blocks])
        for marker in self.stray_markers:
            content = content.replace(marker, "").strip()
        return ParseResult(
            family=self.family, content=content, calls=tuple(calls), overall=overall_label(calls)
        )

    def _parse_block(
        self, block: Block, tools: Sequence[ToolSpec], *, truncated: bool
    ) -> list[ParsedCall]:
        raw = block.body.strip()
        try:
            calls = self.parse_body(raw, tools)
        except BodyError as exc:
            label = block.failure_label(truncated=truncated, incomplete=exc.incomplete)
            return [ParsedCall(label=label, raw=raw, error=str(exc))]
        return calls

    def parse_body(self, body: str, tools: Sequence[ToolSpec]) -> list[ParsedCall]:
        """Decode one block body into one or more validated calls; raise ``BodyError``."""
        raise NotImplementedError
