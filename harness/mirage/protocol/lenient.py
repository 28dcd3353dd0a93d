"""The ``lenient`` reply parser: mirage's tolerant reading of the three protocol fields.

Tolerated: any letter case, surrounding whitespace, markdown emphasis (``**``, ``__``, backticks),
code fences, bullets and headings, ``:`` instead of ``=``, all three fields on one line, a JSON
object with the three keys in any letter case, and reasoning blocks (``<think>…</think>``).
When a field appears several times the last one wins, so a model that first echoes the template
and then answers is read by its answer. ``NONE``, ``<NONE>`` and ``[NONE]`` read as NONE.
Parsing never raises on model output: a reply that does not carry all three fields with valid
values is a parse failure (PF) whose reason says what was wrong.
"""

from __future__ import annotations

import re
from typing import Literal

from harness.mirage.protocol.types import (
    FIELDS,
    NONE_VALUE,
    THINK_BLOCK,
    ParsedResponse,
    ParseOutcome,
    json_object,
)

_FENCE_LINE = re.compile(r"^\s*(```|~~~)[\w+-]*\s*$", re.MULTILINE)
_FIELD = re.compile(
    r"(?<![A-Za-z0-9_])[*_`]*(ANSWERABLE|SOURCE|ANSWER)[*_`]*\s*[:=]",
    re.IGNORECASE,
)
_EDGE_NOISE = "*_`'\""
_TRAILING_NOISE = ".;,"
_YES_NO: dict[str, Literal["YES", "NO"]] = {"YES": "YES", "Y": "YES", "NO": "NO", "N": "NO"}
_NONE_SPELLINGS = {"NONE", "<NONE>", "[NONE]"}


def _field_values(text: str) -> dict[str, str]:
    """Last value of every field; a value runs to the next field marker or the line end."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        matches = list(_FIELD.finditer(line))
        for index, match in enumerate(matches):
            end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
            values[match.group(1).upper()] = _clean_value(line[match.end() : end])
    return values


def _json_values(text: str) -> dict[str, str]:
    """The fields of a reply that is one JSON object (keys in any case; null reads as NONE)."""
    found = json_object(text.strip())
    if found is None:
        return {}
    by_name = {str(key).upper(): value for key, value in found.items()}
    return {
        name: _clean_value(NONE_VALUE if by_name[name] is None else str(by_name[name]))
        for name in FIELDS
        if name in by_name
    }


def _clean_value(raw: str) -> str:
    value = raw.strip()
    previous = None
    while previous != value:
        previous = value
        value = value.strip().strip(_EDGE_NOISE).rstrip(_TRAILING_NOISE)
    return value


def _normalise_none(value: str) -> str:
    return NONE_VALUE if value.strip().upper() in _NONE_SPELLINGS else value


def parse(reply: str | None) -> ParseOutcome:
    """Parse a probe reply; a reply that is missing or malformed in any field is a PF."""
    if reply is None or not reply.strip():
        return ParseOutcome(parsed=ParsedResponse(), pf=True, pf_reason="empty reply")
    text = _FENCE_LINE.sub("", THINK_BLOCK.sub("", reply))
    values = _field_values(text)
    if any(name not in values for name in FIELDS):
        values = _json_values(text) or values
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
    missing = [name for name in FIELDS if name not in values]
    if missing:
        return "missing field(s): " + ", ".join(missing)
    empty = [name for name in FIELDS if not values[name]]
    if empty:
        return "empty field(s): " + ", ".join(empty)
    if answerable is None:
        return f"ANSWERABLE must be YES or NO, got {answerable_raw!r}"
    return None
