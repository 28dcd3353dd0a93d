"""The MIRAGE structured-response protocol (paper section 3.4): probe prompts and reply parsing.

Above: the probe runner, which sends ``probe_prompt(question, condition, profile)`` as the probe
turn and hands the agent's final reply text to ``parse_response(reply, profile)``. Below:
nothing but the reply text. Two scoring profiles read replies: ``paper`` (the default) as the
authors' released scorer does (``harness.mirage.protocol.paper``), ``lenient`` tolerantly
(``harness.mirage.protocol.lenient``). Parsing is deterministic and never raises on model output: a
reply that does not carry all three fields is a parse failure (PF) whose reason says why.
``keywords`` holds the other textual rule the paper's definitions rest on: when a text shows an
artifact's content (its keywords), not merely its name — what decides R_context and the
visibility map.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.mirage.protocol import lenient, paper
from harness.mirage.protocol.templates import QUESTION_SLOT, probe_template
from harness.mirage.protocol.templates import probe_prompt as _probe_prompt
from harness.mirage.protocol.types import (
    CONDITIONS,
    DEFAULT_PROFILE,
    FIELDS,
    NONE_VALUE,
    PROFILE_NAMES,
    Condition,
    ParsedResponse,
    ParseOutcome,
    ProfileName,
    check_profile,
)

__all__ = [
    "CONDITIONS",
    "DEFAULT_PROFILE",
    "FIELDS",
    "NONE_VALUE",
    "PROFILE_NAMES",
    "QUESTION_SLOT",
    "Condition",
    "ParseOutcome",
    "ParsedResponse",
    "ProfileName",
    "check_profile",
    "parse_response",
    "probe_prompt",
    "probe_template",
]

_PARSERS: dict[ProfileName, Callable[[str | None], ParseOutcome]] = {
    "paper": paper.parse,
    "lenient": lenient.parse,
}


def parse_response(reply: str | None, profile: ProfileName = DEFAULT_PROFILE) -> ParseOutcome:
    """Parse a probe reply under ``profile``; a reply missing any field is a PF."""
    return _PARSERS[check_profile(profile)](reply)


def probe_prompt(
    question: str, condition: Condition, profile: ProfileName = DEFAULT_PROFILE
) -> str:
    """The probe turn text for one question under condition C0 or Cm, in ``profile``'s wording."""
    return _probe_prompt(question, condition, check_profile(profile))
