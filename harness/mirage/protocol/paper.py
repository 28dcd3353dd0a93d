"""The ``paper`` reply parser: the released scorer's reading of the three protocol fields.

It reproduces ``parse_and_score`` of prisma-research/MIRAGE (``harness/run_unified_pilot.py``):

- each field is its first occurrence anywhere in the reply, ``NAME=value`` with ``=`` only
  (any letter case, spaces around ``=``); ``:`` is not a separator;
- ANSWERABLE is YES or NO; SOURCE is the first whitespace-free token after ``=``; ANSWER is the
  rest of its line;
- when a field is missing, a reply that is exactly one JSON object (after removing every
  code fence, optionally tagged json) is read instead: the keys ``ANSWERABLE``, ``SOURCE``,
  ``ANSWER`` in upper case, a missing SOURCE or ANSWER reading as NONE;
- anything else is a parse failure.

Where the released code misreads a reply this parser departs, each departure documented in
docs/metrics.md ("Where paper departs from the released scorer"): P1 ANSWERABLE must be the
whole word YES/NO (the released prefix match reads "NOT SURE" as NO); P2 a value starts on its
own field's line (the released pattern lets an empty ``SOURCE=`` line read the next line, e.g.
``ANSWER=42``, as the source); P3 markdown emphasis and backticks around the ANSWER value are
removed; P4 NONE wrapped in brackets or followed by a full stop is NONE; P5 ``<think>`` blocks
are dropped first.
"""

from __future__ import annotations

import re
from typing import Any, Literal, cast

from harness.mirage.protocol.types import (
    FIELDS,
    NONE_VALUE,
    THINK_BLOCK,
    ParsedResponse,
    ParseOutcome,
    json_object,
)

_SAME_LINE_SPACE = r"[^\S\r\n]*"  # P2: spaces after "=" but never a line break
_PATTERNS = {
    "ANSWERABLE": re.compile(r"ANSWERABLE\s*=" + _SAME_LINE_SPACE + r"(YES|NO)\b", re.I),  # P1
    "SOURCE": re.compile(r"SOURCE\s*=" + _SAME_LINE_SPACE + r"(\S+)", re.I),
    "ANSWER": re.compile(r"ANSWER\s*=" + _SAME_LINE_SPACE + r"(\S.*)", re.I),
}
_WRITTEN = {name: re.compile(name + r"\s*=" + _SAME_LINE_SPACE + r"(.*)", re.I) for name in FIELDS}
_COLON_FORM = {name: re.compile(r"\b" + name + r"\W{0,3}:", re.I) for name in FIELDS}
_JSON_FENCE = re.compile(r"```(?:json)?\s*")
_JSON_YES_NO = re.compile(r"(YES|NO)\b", re.I)  # P1 for the JSON reading
_VALUE_MARKUP = "*`"  # P3
_NONE_SPELLING = re.compile(r"[<\[(]?NONE[>\])]?\.?", re.I)  # P4


def parse(reply: str | None) -> ParseOutcome:
    """Read a probe reply as the released scorer does (with the documented departures)."""
    if reply is None or not reply.strip():
        return ParseOutcome(parsed=ParsedResponse(), pf=True, pf_reason="empty reply")
    text = THINK_BLOCK.sub("", reply)  # P5
    values = _line_values(text)
    if any(name not in values for name in FIELDS):
        values = _json_values(text) or values
    parsed = ParsedResponse(
        answerable=cast(Literal["YES", "NO"] | None, values.get("ANSWERABLE")),
        source=_none_or(values.get("SOURCE")),
        answer=_none_or(values.get("ANSWER")),
    )
    missing = [name for name in FIELDS if name not in values]
    reason = _pf_reason(text, missing) if missing else None
    return ParseOutcome(parsed=parsed, pf=reason is not None, pf_reason=reason)


def _line_values(text: str) -> dict[str, str]:
    """The first valid occurrence of every field written ``NAME=value``."""
    values: dict[str, str] = {}
    for name, pattern in _PATTERNS.items():
        match = pattern.search(text)
        value = match.group(1).strip() if match else ""
        if name == "ANSWER":
            value = _strip_markup(value)
        if value:
            values[name] = value.upper() if name == "ANSWERABLE" else value
    return values


def _json_values(text: str) -> dict[str, str]:
    """The fields of a reply that is one JSON object with an upper-case ANSWERABLE key."""
    found = json_object(_JSON_FENCE.sub("", text).strip())
    if found is None or "ANSWERABLE" not in found:
        return {}
    answerable = _JSON_YES_NO.match(str(found["ANSWERABLE"]))
    if answerable is None:
        return {}
    return {
        "ANSWERABLE": answerable.group(1).upper(),
        "SOURCE": _json_text(found, "SOURCE"),
        "ANSWER": _strip_markup(_json_text(found, "ANSWER")) or NONE_VALUE,
    }


def _json_text(found: dict[str, Any], key: str) -> str:
    """A JSON field as text; missing (or, P2, empty) reads as NONE."""
    return str(found.get(key, NONE_VALUE)).strip() or NONE_VALUE


def _strip_markup(value: str) -> str:
    return value.strip().strip(_VALUE_MARKUP).strip()


def _none_or(value: str | None) -> str | None:
    if value is None:
        return None
    return NONE_VALUE if _NONE_SPELLING.fullmatch(value) else value


def _pf_reason(text: str, missing: list[str]) -> str:
    absent = [name for name in missing if _WRITTEN[name].search(text) is None]
    problems = ["missing " + ", ".join(absent) + _absence_hint(text, absent)] if absent else []
    for name in missing:
        written = _WRITTEN[name].search(text)
        if written is not None:
            value = written.group(1).strip()
            problems.append(
                f"{name} must be YES or NO, got {value!r}"
                if name == "ANSWERABLE" and value
                else f"empty {name}"
            )
    return "; ".join(problems)


def _absence_hint(text: str, absent: list[str]) -> str:
    found = json_object(_JSON_FENCE.sub("", text).strip())
    if found is not None and "ANSWERABLE" in found:
        return f" (JSON ANSWERABLE must be YES or NO, got {found['ANSWERABLE']!r})"
    if found is not None:
        return " (a JSON reply needs the upper-case keys ANSWERABLE, SOURCE, ANSWER)"
    if any(_COLON_FORM[name].search(text) for name in absent):
        return " (written NAME: value; the paper profile reads NAME=value)"
    return ""
