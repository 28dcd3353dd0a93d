"""The parse loop every family shares, and the machinery of families whose calls sit between
an open and a close marker (hermes ``<tool_call>``, internlm ``<|action_start|>``, qwen3-coder
XML).

Above: ``runtime.parsers.parse_reply`` (through the ``ToolCallParser`` seam). Below: one small
subclass per family. ``FamilyParser.parse`` turns what a family's ``split`` returns (content
and calls) into a labelled ``ParseResult``; ``ScanningParser`` is the split of every text
family: it finds each place a call may start (the family's ``opener``), lets the family read
the call attempt there (``read_block``), cuts the attempts from the content and keeps the text
around them.

A family reading one block says whether its opener really starts a call (``<tool_call>{...``)
or is only mentioned in prose ("wrap it in <tool_call> tags"), where the block ends, and what
calls it holds. A mentioned marker stays in the content untouched. A block ends where its body
really ends — a marker written inside a string value is part of the value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from runtime.messages import ToolCall, ToolSpec
from runtime.parsers.base import OutcomeLabel, ParsedCall, ParseResult
from runtime.parsers.scan import BodyError, cut, decode_body, decode_run_at, skip_space
from runtime.parsers.validation import overall_label, validate_json_calls

_FENCE_OPEN = re.compile(r"```[\w-]*[ \t]*\n?")
_FENCE_CLOSE = re.compile(r"\s*```")


@dataclass(frozen=True)
class Block:
    """One call attempt: ``text[start:end]`` is cut from the content, ``start`` being where
    the opener matched unless the family says otherwise (a wrapper before it)."""

    calls: list[ParsedCall]
    end: int
    start: int | None = None


@dataclass(frozen=True)
class Extent:
    """Where a block body lies: ``body`` is the text after the open marker (and any family
    prefix) up to the close marker or the block's end; ``payload`` is the decoded JSON when
    the body decoded."""

    body: str
    end: int
    closed: bool
    at_end: bool
    payload: list[Any] | None = None

    def failure_label(self, *, truncated: bool, incomplete: bool) -> OutcomeLabel:
        """An undecodable body is ``truncated`` only when the block runs to the end of the
        reply without its close marker and the body looks cut off or the backbone hit its
        token limit; otherwise the reply was complete and the body is ``marker_bad_body``."""
        if not self.closed and self.at_end and (incomplete or truncated):
            return "truncated"
        return "marker_bad_body"


def opens_json(text: str, index: int) -> bool:
    """A JSON (or Python-literal) call body starts at ``index``, possibly fenced."""
    index = skip_space(text, index)
    fence = _FENCE_OPEN.match(text, index)
    index = skip_space(text, fence.end()) if fence else index
    return index < len(text) and text[index] in "{["


def ends_reply(text: str, index: int, *cut_markers: str) -> bool:
    """Nothing but whitespace follows ``index`` (or only the beginning of one of
    ``cut_markers``, as in ``<function=artifact_re``): the reply was cut off right there."""
    rest = text[skip_space(text, index) :].rstrip()
    return not rest or any(
        marker.startswith(rest) or (rest.startswith(marker) and ">" not in rest)
        for marker in cut_markers
    )


def json_extent(text: str, body_start: int, open_marker: str, close_marker: str) -> Extent:
    """The extent of a block with a JSON body. A body that decodes ends where its values end
    (a marker inside a string value does not end it) and, when the close marker follows,
    past that marker; text after an unclosed but complete body is content again. A body that
    does not decode — or has text between its values and a later close marker — ends at the
    first close marker, the next open marker, or the end of the reply."""
    start = skip_space(text, body_start)
    fence = _FENCE_OPEN.match(text, start)
    run = decode_run_at(text, skip_space(text, fence.end()) if fence else start)
    if run is not None:
        values, value_end = run
        fence_close = _FENCE_CLOSE.match(text, value_end) if fence else None
        body_end = fence_close.end() if fence_close else value_end
        after = skip_space(text, body_end)
        body = text[body_start:body_end]
        if text.startswith(close_marker, after):
            end = after + len(close_marker)
            return Extent(body, end, True, ends_reply(text, end), values)
        close, next_open = text.find(close_marker, after), text.find(open_marker, after)
        if close == -1 or -1 < next_open < close:
            return Extent(body, body_end, False, ends_reply(text, body_end), values)
        return Extent(text[body_start:close], close + len(close_marker), True, False)
    return plain_extent(text, body_start, open_marker, close_marker)


def plain_extent(text: str, body_start: int, open_marker: str, close_marker: str) -> Extent:
    """A body that runs to the first close marker, the next open marker, or the end."""
    close, next_open = text.find(close_marker, body_start), text.find(open_marker, body_start)
    if close != -1 and not -1 < next_open < close:
        end = close + len(close_marker)
        return Extent(text[body_start:close], end, True, ends_reply(text, end))
    end = next_open if next_open != -1 else len(text)
    return Extent(text[body_start:end], end, False, ends_reply(text, end))


@dataclass(frozen=True)
class Reply:
    """What a parser is given: the reply text, the offered tools, whether the backbone hit its
    token limit, and the structured calls a provider returned."""

    text: str
    tools: Sequence[ToolSpec]
    truncated: bool
    native_calls: Sequence[ToolCall]


class FamilyParser:
    """Base of every family: ``parse`` (the ``ToolCallParser`` seam) labels what ``split``
    finds."""

    family: str

    def parse(
        self,
        text: str,
        tools: Sequence[ToolSpec],
        *,
        truncated: bool = False,
        native_calls: Sequence[ToolCall] = (),
    ) -> ParseResult:
        content, calls = self.split(Reply(text, tools, truncated, native_calls))
        return ParseResult(
            family=self.family,
            content=content,
            calls=tuple(calls),
            overall=overall_label(calls),
        )

    def split(self, reply: Reply) -> tuple[str, list[ParsedCall]]:
        """The reply's content and the calls found in it, each labelled."""
        raise NotImplementedError


class ScanningParser(FamilyParser):
    """Base of the text families; subclasses set ``opener`` and ``read_block``."""

    opener: ClassVar[re.Pattern[str]]

    def split(self, reply: Reply) -> tuple[str, list[ParsedCall]]:
        text = reply.text
        calls: list[ParsedCall] = []
        spans: list[tuple[int, int]] = []
        position = 0
        while (match := self.opener.search(text, position)) is not None:
            block = self.read_block(text, match, reply.tools, truncated=reply.truncated)
            if block is None:
                position = match.start() + 1
                continue
            calls.extend(block.calls)
            spans.append((match.start() if block.start is None else block.start, block.end))
            position = max(block.end, match.start() + 1)
        return cut(text, spans), calls

    def read_block(
        self, text: str, opener: re.Match[str], tools: Sequence[ToolSpec], *, truncated: bool
    ) -> Block | None:
        """The call attempt opened by ``opener``, or ``None`` when the marker is only
        mentioned (no call body follows it)."""
        raise NotImplementedError


def json_block_calls(
    extent: Extent, tools: Sequence[ToolSpec], *, truncated: bool
) -> list[ParsedCall]:
    """The validated calls of a JSON block (one call object or a list per value), or one
    failure label for a body that does not decode."""
    raw = extent.body.strip()
    if extent.payload is not None:
        payload = extent.payload if len(extent.payload) > 1 else extent.payload[0]
        return validate_json_calls(payload, tools, raw=raw)
    try:
        return validate_json_calls(decode_body(raw), tools, raw=raw)
    except BodyError as exc:
        label = extent.failure_label(truncated=truncated, incomplete=exc.incomplete)
        return [ParsedCall(label=label, raw=raw, error=str(exc))]
