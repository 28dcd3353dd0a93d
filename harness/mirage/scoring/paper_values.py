"""Value matching of the ``paper`` profile: the released scorer's rules, kept as data.

It reproduces ``_ans_match`` of prisma-research/MIRAGE (``harness/run_unified_pilot.py``). The
comparison depends on the gold's answer type (``COMPARISONS``):

- ``number``: two readings of both values — the *scaled* reading (leading currency/approximate
  symbols, a trailing ``%`` and a leading approximate word removed; the leading number, times a
  scale word right after it; a number followed by a gloss is the number) and the *bare* reading
  (everything from the first scale suffix on cut; the leading number). Either reading within
  ``max(1% of |gold|, 0.5)`` matches; a pack's per-question tolerance may widen that, never
  tighten it. Commas are thousands separators. The gold's ``unit`` is not used.
- ``exact``: the two values equal after trimming (years: ``2019`` but not ``in 2019``).
- ``text``: both sides through ``TEXT_RULES`` (in order), then equal.

Gold ``aliases`` are further gold values. Departures from the released code (docs/metrics.md):
P6 a number ends with a digit (the released ``[\\d,.]+`` swallows a sentence's full stop, so
"556.73." read as nothing); P7 a scale expansion whose number does not parse (or overflows)
leaves the text as it is (the released code raises and loses the probe); P8 the unit-spacing
rule also applies before ``%`` (the released ``\\b`` after ``%`` can never match); P9 a leading
minus or plus sign belongs to the number (the released pattern has no sign, so "-1.4 percent"
read as nothing).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from harness.mirage.protocol import NONE_VALUE

# --- numbers -----------------------------------------------------------------------------------

LEADING_SYMBOLS = "$€£~≈"
APPROXIMATE_WORDS = ("approximately", "about", "around", "roughly")
SCALE_WORDS: dict[str, float] = {
    "k": 1e3,
    "thousand": 1e3,
    "m": 1e6,
    "million": 1e6,
    "b": 1e9,
    "billion": 1e9,
}
BARE_CUT_WORDS = ("million", "billion", "thousand", "M", "B", "K", "k")
RELATIVE_TOLERANCE = 0.01
ABSOLUTE_TOLERANCE = 0.5

_NUMBER = r"[-+−]?[\d,.]*\d"  # P9 a leading sign; P6 ends with a digit
_LEADING = re.compile("^[" + re.escape(LEADING_SYMBOLS) + "]+")
_APPROXIMATE = re.compile(r"^(" + "|".join(APPROXIMATE_WORDS) + r")\s+", re.I)
_NUMBER_THEN_WORD = re.compile(rf"^({_NUMBER})\s*([a-zA-Z]+)")
_NUMBER_THEN_GLOSS = re.compile(rf"^({_NUMBER})\s+\S")
_BARE_CUT = re.compile(r"\s*(" + "|".join(BARE_CUT_WORDS) + r")\b.*$", re.I)
_LEADING_NUMBER = re.compile(rf"^({_NUMBER})")


def _as_float(digits: str, scale: float = 1.0) -> float | None:
    try:
        return float(digits.replace(",", "").replace("−", "-")) * scale
    except ValueError:
        return None


def scaled_reading(value: str) -> float | None:
    """The released ``_norm_num``: "$1.2B" -> 1.2e9, "about 42 (est.)" -> 42, "12%" -> 12."""
    text = _LEADING.sub("", value.strip()).strip().rstrip("%").strip()
    text = _APPROXIMATE.sub("", text).strip()
    word = _NUMBER_THEN_WORD.match(text)
    if word:
        return _as_float(word.group(1), SCALE_WORDS.get(word.group(2).lower(), 1.0))
    gloss = _NUMBER_THEN_GLOSS.match(text)
    return _as_float(gloss.group(1) if gloss else text)


def bare_reading(value: str) -> float | None:
    """The released ``_raw_num``: "516.4 billion USD" -> 516.4, "$1,234 total" -> 1234."""
    text = _BARE_CUT.sub("", _LEADING.sub("", value.strip()).strip()).strip()
    number = _LEADING_NUMBER.match(text)
    return _as_float(number.group(1) if number else text)


NUMBER_READINGS: tuple[Callable[[str], float | None], ...] = (scaled_reading, bare_reading)


def allowed_difference(gold: float, tolerance: float | None) -> float:
    """``max(1% of |gold|, 0.5)``, widened (never tightened) by a per-question tolerance."""
    rule = max(abs(gold) * RELATIVE_TOLERANCE, ABSOLUTE_TOLERANCE)
    return max(rule, tolerance or 0.0)


def numbers_match(predicted: str, gold: str, tolerance: float | None = None) -> bool:
    for reading in NUMBER_READINGS:
        pred_value, gold_value = reading(predicted), reading(gold)
        if pred_value is None or gold_value is None:
            continue
        if abs(gold_value - pred_value) <= allowed_difference(gold_value, tolerance):
            return True
    return False


# --- text --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextRule:
    """One normalisation step applied to both the answer and the gold."""

    name: str
    effect: str
    apply: Callable[[str], str]


def _sub(pattern: str, replacement: str, flags: int = 0) -> Callable[[str], str]:
    compiled = re.compile(pattern, flags)
    return lambda text: compiled.sub(replacement, text)


def _scale(pattern: str, scales: Mapping[str, float], suffix: str = "") -> Callable[[str], str]:
    """Replace "<number><scale word>" by the expanded number (P7: unparseable stays)."""
    compiled = re.compile(pattern, re.I)

    def expand(match: re.Match[str]) -> str:
        value = _as_float(match.group(1), scales[match.group(2).lower()])
        if value is None or not math.isfinite(value):
            return match.group(0)
        return (str(int(value)) if value == int(value) else str(value)) + suffix

    return lambda text: compiled.sub(expand, text)


def _whole_value(table: Mapping[str, str]) -> Callable[[str], str]:
    return lambda text: table.get(text, text)


UNIT_WORDS = ("cm", "kg", "lb", "lbs", "mm", "m", "km", "ft", "in", "oz", "g", "mg", "mph", "bpm")
SYNONYMS: dict[str, str] = {
    "true": "yes",
    "false": "no",
    "correct": "yes",
    "incorrect": "no",
    "enabled": "on",
    "disabled": "off",
    "active": "on",
    "inactive": "off",
}
CJK_SCALES: dict[str, float] = {"万": 1e4, "亿": 1e8}
ENGLISH_SCALES: dict[str, float] = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_TRIM = r"^\s+|\s+$"


def _tidy(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


TEXT_RULES: tuple[TextRule, ...] = (
    TextRule("trim", "remove surrounding whitespace", _sub(_TRIM, "")),
    TextRule("unquote", "remove surrounding ' and \" characters", _sub(r"^['\"]+|['\"]+$", "")),
    TextRule("lowercase", "lower-case everything", str.lower),
    TextRule("collapse-spaces", "every run of whitespace becomes one space", _sub(r"\s+", " ")),
    TextRule(
        "drop-marks",
        "remove ©, ® and ™, then surrounding whitespace",
        lambda text: re.sub(r"[©®™]", "", text).strip(),
    ),
    TextRule(
        "dotted-abbreviations",
        "a letter-dot-letter-dot abbreviation loses its dots: U.S. -> us, p.m. -> pm",
        _sub(r"\b([A-Za-z])\.([A-Za-z])\.", r"\1\2"),
    ),
    TextRule(
        "drop-quantity-gloss",
        "remove a parenthesised number with a comma, optionally with steps/步/thousand/million/"
        "billion/k/m/b: '2 million steps (2,000,000 steps)' -> '2 million steps'",
        _sub(r"\s*\([\d,.\s]*,[\d,.\s]*(steps|步|thousand|million|billion|[kKmMbB])?\)", ""),
    ),
    TextRule("open-parentheses", "other parentheses become spaces", _sub(r"[()]", " ")),
    TextRule("tidy-after-parentheses", "collapse whitespace and trim", _tidy),
    TextRule(
        "drop-preamble",
        "remove a leading 'award for' or 'badge:'",
        _sub(r"^(award for|badge[:\s]+)\s*", "", re.I),
    ),
    TextRule(
        "cjk-scale",
        "expand 万 (10^4) and 亿 (10^8) after a number: 200万 -> 2000000",
        _scale(r"([\d,.]+)(" + "|".join(CJK_SCALES) + r")", CJK_SCALES, suffix=" "),
    ),
    TextRule("tidy-after-cjk", "collapse whitespace and trim", _tidy),
    TextRule(
        "english-scale",
        "expand thousand/million/billion after a number and a space: 2 million -> 2000000",
        _scale(r"([\d,.]+)\s+(" + "|".join(ENGLISH_SCALES) + r")", ENGLISH_SCALES),
    ),
    TextRule(
        "thousands-separators",
        "remove a comma between two digits: 2,000,000 -> 2000000",
        _sub(r"(\d),(\d)", r"\1\2"),
    ),
    TextRule("steps", "步 becomes 'steps'", _sub("步", "steps")),
    TextRule(
        "unit-spacing",
        "remove the space between a number and a unit (" + ", ".join(UNIT_WORDS) + ", %): "
        "181 cm -> 181cm",
        _sub(r"(\d)\s+(" + "|".join(UNIT_WORDS) + r"|%)(?!\w)", r"\1\2"),  # P8
    ),
    TextRule(
        "synonyms",
        "a whole value " + ", ".join(f"{k} -> {v}" for k, v in SYNONYMS.items()),
        _whole_value(SYNONYMS),
    ),
)


def normalise_text(value: str) -> str:
    """``value`` after every rule of ``TEXT_RULES``, in order."""
    for rule in TEXT_RULES:
        value = rule.apply(value)
    return value


# --- dispatch ----------------------------------------------------------------------------------

COMPARISONS: dict[str, str] = {
    "numeric": "number",
    "year": "exact",
    "string": "text",
    "enum": "text",
    "date": "text",
}


def _matches_one(predicted: str, gold: str, comparison: str, tolerance: float | None) -> bool:
    if comparison == "number":
        return numbers_match(predicted, gold, tolerance)
    if comparison == "exact":
        return predicted.strip() == gold.strip()
    return normalise_text(predicted) == normalise_text(gold)


def value_matches(
    predicted: str | None,
    gold: str,
    answer_type: str,
    *,
    tolerance: float | None = None,
    aliases: tuple[str, ...] = (),
    unit: str | None = None,
) -> bool:
    """``norm(predicted) == gold`` as the released scorer decides it; NONE never matches.

    ``unit`` is accepted for a common signature and ignored: the released scorer has no units.
    """
    del unit
    if predicted is None or not predicted.strip() or predicted.strip().upper() == NONE_VALUE:
        return False
    comparison = COMPARISONS.get(answer_type, "text")
    return any(
        _matches_one(predicted, candidate, comparison, tolerance)
        for candidate in (gold, *aliases)
        if candidate.strip()
    )
