"""The MIRAGE structured-response protocol (paper section 3.4): probe prompts and reply parsing.

Above: the probe runner, which sends ``probe_prompt(question, condition)`` as the probe turn and
hands the agent's final reply text to ``parse_response``. Below: nothing but the reply text.
Parsing is deterministic and never raises on model output: a reply that does not carry all three
fields with valid values is a parse failure (PF) whose reason says what was wrong.

Tolerated: any letter case, surrounding whitespace, markdown emphasis (``**``, ``__``, backticks),
code fences, bullets and headings, ``:`` instead of ``=``, all three fields on one line, and
reasoning blocks (``<think>…</think>``). When a field appears several times the last one wins,
so a model that first echoes the template and then answers is read by its answer.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

Condition = Literal["C0", "Cm"]
CONDITIONS: tuple[Condition, ...] = ("C0", "Cm")
NONE_VALUE = "NONE"

_RESPONSE_FORMAT = (
    "Answer in exactly three lines, filling in each field:\n"
    "ANSWERABLE=YES|NO (can the question be answered from evidence shared earlier?)\n"
    "SOURCE=artifact_id|NONE (the artifact the answer comes from)\n"
    "ANSWER=value|NONE (a short value)\n\n"
    "Example of the format only (not the answer):\n"
    "ANSWERABLE=YES\nSOURCE=example_00000000\nANSWER=12.5"
)
_CM_INSTRUCTION = (
    "Before answering you MUST call the artifact_recall tool to retrieve the evidence, "
    "then answer from what it returns."
)


def probe_prompt(question: str, condition: Condition) -> str:
    """The probe turn text for one question under condition C0 or Cm."""
    if not question.strip():
        raise ValueError("probe question is empty")
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; expected one of {CONDITIONS}")
    parts = [f"Question: {question.strip()}"]
    if condition == "Cm":
        parts.append(_CM_INSTRUCTION)
    parts.append(_RESPONSE_FORMAT)
    return "\n\n".join(parts)


class ParsedResponse(BaseModel):
    """The three protocol fields; ``None`` where a field is missing. NONE stays ``"NONE"``."""

    model_config = ConfigDict(frozen=True)

    answerable: Literal["YES", "NO"] | None = None
    source: str | None = None
    answer: str | None = None


class ParseOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    parsed: ParsedResponse
    pf: bool
    pf_reason: str | None = None


_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.IGNORECASE | re.DOTALL)
_FENCE_LINE = re.compile(r"^\s*(```|~~~)[\w+-]*\s*$", re.MULTILINE)
_FIELD = re.compile(
    r"(?<![A-Za-z0-9_])[*_`]*(ANSWERABLE|SOURCE|ANSWER)[*_`]*\s*[:=]",
    re.IGNORECASE,
)
_EDGE_NOISE = "*_`'\" \t"
_TRAILING_NOISE = " \t.;,"
_FIELDS = ("ANSWERABLE", "SOURCE", "ANSWER")
_YES_NO: dict[str, Literal["YES", "NO"]] = {"YES": "YES", "Y": "YES", "NO": "NO", "N": "NO"}


def _field_values(text: str) -> dict[str, str]:
    """Last value of every field; a value runs to the next field marker or the line end."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        matches = list(_FIELD.finditer(line))
        for index, match in enumerate(matches):
            end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
            values[match.group(1).upper()] = _clean_value(line[match.end() : end])
    return values


def _clean_value(raw: str) -> str:
    value = raw.strip()
    previous = None
    while previous != value:
        previous = value
        value = value.strip(_EDGE_NOISE).rstrip(_TRAILING_NOISE)
    return value


def _normalise_none(value: str) -> str:
    return NONE_VALUE if value.strip().upper() in {"NONE", "<NONE>", "[NONE]"} else value


def parse_response(reply: str | None) -> ParseOutcome:
    """Parse a probe reply; a reply that is missing or malformed in any field is a PF."""
    if reply is None or not reply.strip():
        return ParseOutcome(parsed=ParsedResponse(), pf=True, pf_reason="empty reply")
    text = _FENCE_LINE.sub("", _THINK_BLOCK.sub("", reply))
    values = _field_values(text)
    answerable_raw = values.get("ANSWERABLE")
    answerable = _YES_NO.get(answerable_raw.upper()) if answerable_raw else None
    source = _normalise_none(values["SOURCE"]) if values.get("SOURCE") else None
    answer = _normalise_none(values["ANSWER"]) if values.get("ANSWER") else None
    parsed = ParsedResponse(answerable=answerable, source=source, answer=answer)
    reason = _pf_reason(values, answerable_raw, answerable)
    return ParseOutcome(parsed=parsed, pf=reason is not None, pf_reason=reason)


def _pf_reason(
    values: dict[str, str], answerable_raw: str | None, answerable: str | None
) -> str | None:
    missing = [name for name in _FIELDS if name not in values]
    if missing:
        return "missing field(s): " + ", ".join(missing)
    empty = [name for name in _FIELDS if not values[name]]
    if empty:
        return "empty field(s): " + ", ".join(empty)
    if answerable is None:
        return f"ANSWERABLE must be YES or NO, got {answerable_raw!r}"
    return None
