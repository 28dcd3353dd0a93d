"""The ``ToolCallParser`` seam.

Above: the agent loop, which hands a backbone's raw reply text (or its native tool calls) and
the offered tool specs to a parser. Below: one small class per model family, each a subclass
of ``runtime.parsers.blocks.FamilyParser`` (the text families of its ``ScanningParser``, which
holds the scan loop they share). A parser never raises on model output: every reply gets a
label per call and one overall label, as data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from runtime.messages import ToolCall, ToolSpec

OutcomeLabel = Literal[
    "no_call",
    "ok",
    "marker_bad_body",
    "wrong_shape",
    "truncated",
    "unknown_tool",
    "missing_required",
    "unexpected_param",
    "type_error",
    "pseudo_tool",
    "adapted",
]
"""Per call: ``ok`` (executable as written); ``truncated`` (the reply ended inside the call, or
the backbone hit its token limit there); ``marker_bad_body`` (a complete call whose body does
not decode); ``wrong_shape`` (decodes, but not as a call); ``unknown_tool``,
``missing_required``, ``unexpected_param``, ``type_error`` (fails the offered tool's schema —
including NaN/Infinity, which JSON cannot carry); ``pseudo_tool`` / ``adapted`` (tool-like text
outside the family's format, not recovered / recovered). A marker merely mentioned in prose is
no call at all: its text stays in the content."""

EXECUTABLE_LABELS: frozenset[str] = frozenset({"ok", "adapted"})


class ParsedCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: OutcomeLabel
    name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw: str = ""
    error: str | None = None

    @property
    def executable(self) -> bool:
        return self.label in EXECUTABLE_LABELS and self.name is not None


class ParseResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    family: str
    content: str
    calls: tuple[ParsedCall, ...] = ()
    overall: OutcomeLabel = "no_call"
    pseudo_tool_markers: tuple[str, ...] = ()
    """Kinds of pseudo-tool text found when no call parsed (see ``runtime.parsers.pseudo``)."""

    @property
    def executable(self) -> bool:
        return any(call.executable for call in self.calls)

    def executable_calls(self, id_prefix: str) -> list[ToolCall]:
        return [
            ToolCall(id=f"{id_prefix}-{index}", name=call.name or "", arguments=call.arguments)
            for index, call in enumerate(self.calls)
            if call.executable
        ]


class ToolCallParser(Protocol):
    family: str

    def parse(
        self,
        text: str,
        tools: Sequence[ToolSpec],
        *,
        truncated: bool = False,
        native_calls: Sequence[ToolCall] = (),
    ) -> ParseResult:
        """Split ``text`` into content and tool calls validated against ``tools``.
        ``truncated`` says the backbone stopped at its token limit; ``native_calls`` are
        structured calls a provider returned (the ``native`` family validates those)."""
        ...


def undecodable_label(cut_off: bool) -> OutcomeLabel:
    """A call body that cannot be decoded is ``truncated`` when it was cut off at the end of
    the reply, else ``marker_bad_body``."""
    return "truncated" if cut_off else "marker_bad_body"
