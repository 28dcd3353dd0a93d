"""The protocol's shared vocabulary: conditions, scoring-profile names, parsed replies."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Condition = Literal["C0", "Cm"]
CONDITIONS: tuple[Condition, ...] = ("C0", "Cm")
NONE_VALUE = "NONE"
FIELDS = ("ANSWERABLE", "SOURCE", "ANSWER")

ProfileName = Literal["paper", "lenient"]
PROFILE_NAMES: tuple[ProfileName, ...] = ("paper", "lenient")
DEFAULT_PROFILE: ProfileName = "paper"

# A reasoning block is the model's thinking, not its reply (an unclosed one runs to the end).
THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.IGNORECASE | re.DOTALL)


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


def check_profile(name: str) -> ProfileName:
    """``name`` as a profile name, or a ValueError listing the known ones."""
    for known in PROFILE_NAMES:
        if name == known:
            return known
    known_names = ", ".join(PROFILE_NAMES)
    raise ValueError(f"unknown scoring profile {name!r}; expected one of {known_names}")


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` as a JSON object, or None when it is anything else (or not JSON at all)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
