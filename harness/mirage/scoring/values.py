"""Value matching of the ``lenient`` profile: ``norm(ANSWER) = gold`` of paper section 3.5.

Above: the scorer, which asks ``value_matches(predicted, gold, answer_type, ...)`` (the ``paper``
profile's rules are ``paper_values``). Below: fixed, deterministic rules per answer type
(documented in docs/metrics.md):

- numeric: currency symbols/codes, ``%``/percent, thousands separators, magnitude suffixes and
  words (K/thousand, M/mn/million, B/bn/billion, T/tn/trillion), trailing unit words and
  approximate words (about, ~, approximately, …) are accepted; the reply must contain exactly
  one number. Values compare in the gold's written units (its unit may carry a magnitude, e.g.
  "thousand tonnes"), within the tolerance (default ``max(1% of |gold|, 0.5)``); when only one
  side carries a magnitude the bare mantissa also counts ("516.4 billion" matches a gold
  "516.40" read off a chart in billions).
- year: exactly one four-digit year, equal to the gold year.
- date: ISO, month-name and numeric forms; ``d/m/y`` vs ``m/d/y`` matches if either reading
  equals the gold date; the gold's granularity (day or month) decides what is compared.
- string and enum: Unicode NFKC, case-folded, punctuation removed, whitespace collapsed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

AnswerType = Literal["numeric", "year", "date", "string", "enum"]
ANSWER_TYPES: tuple[str, ...] = ("numeric", "year", "date", "string", "enum")

_MAGNITUDES: dict[str, float] = {
    "k": 1e3,
    "thousand": 1e3,
    "m": 1e6,
    "mn": 1e6,
    "mln": 1e6,
    "million": 1e6,
    "b": 1e9,
    "bn": 1e9,
    "billion": 1e9,
    "t": 1e12,
    "tn": 1e12,
    "trillion": 1e12,
}
# Lower-case single letters are not magnitudes ("5 m" is metres, "5 t" tonnes), except "k".
_CASE_SENSITIVE = {"m": "M", "b": "B", "t": "T"}
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-−–+])?"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?|\.\d+)"
    r"(?:\s*(?P<mag>[kKMBT]|mn|mln|bn|tn|thousand|million|billion|trillion)(?![A-Za-z]))?",
    re.IGNORECASE,
)
_PUNCT_OR_SYMBOL = ("P", "S")
# Narrow/no-break/thin spaces group thousands ("1\u202f234"); NFKC would turn them into spaces.
_GROUP_SPACE = re.compile(r"(?<=\d)[\u00a0\u2009\u202f](?=\d{3}(?!\d))")


@dataclass(frozen=True)
class Quantity:
    mantissa: float
    multiplier: float

    @property
    def value(self) -> float:
        return self.mantissa * self.multiplier


def fold_text(text: str) -> str:
    """NFKC, case-folded, punctuation and symbols removed, whitespace collapsed."""
    normal = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(" " if unicodedata.category(ch)[0] in _PUNCT_OR_SYMBOL else ch for ch in normal)
    return " ".join(kept.split())


def _digits_value(digits: str) -> float:
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", digits):
        return float(digits.replace(",", ""))
    return float(digits.replace(",", "."))


def _magnitude(token: str | None) -> float:
    if not token:
        return 1.0
    if token in _CASE_SENSITIVE:
        return 1.0
    return _MAGNITUDES[token.lower()]


def parse_quantities(text: str) -> list[Quantity]:
    """Every number in ``text`` with its magnitude multiplier."""
    grouped = _GROUP_SPACE.sub(",", text)
    normal = unicodedata.normalize("NFKC", grouped)
    quantities = []
    for match in _NUMBER.finditer(normal):
        sign = -1.0 if match.group("sign") in {"-", "−", "–"} else 1.0
        mantissa = sign * _digits_value(match.group("digits"))
        quantities.append(Quantity(mantissa, _magnitude(match.group("mag"))))
    return quantities


def default_tolerance(gold: float) -> float:
    return max(0.01 * abs(gold), 0.5)


_UNIT_MAGNITUDES = {"thousand", "million", "billion", "trillion", "mn", "mln", "bn", "tn"}


def unit_multiplier(unit: str | None) -> float:
    """Magnitude implied by a gold unit such as "thousand tonnes" or "USD bn" (else 1)."""
    for word in re.findall(r"[A-Za-z]+", unit or ""):
        if word.lower() in _UNIT_MAGNITUDES or word in {"K", "M", "B", "T"}:
            return _MAGNITUDES[word.lower()]
    return 1.0


def numeric_matches(
    predicted: str, gold: str, tolerance: float | None = None, unit: str | None = None
) -> bool:
    """Compare in the gold's written units: the tolerance applies there.

    The gold's scale is its own magnitude suffix, else the magnitude of its unit. A prediction is
    read at full scale; when exactly one of prediction and gold carries a magnitude, its bare
    mantissa is also a reading ("47.3" for 47.3 thousand tonnes, "516.4 billion" for a 516.40
    read off a chart in billions).
    """
    pred_q, gold_q = parse_quantities(predicted), parse_quantities(gold)
    if len(pred_q) != 1 or len(gold_q) != 1:
        return False
    pred, ref = pred_q[0], gold_q[0]
    scale = ref.multiplier if ref.multiplier != 1.0 else unit_multiplier(unit)
    readings = [pred.value / scale]
    if (pred.multiplier == 1.0) != (scale == 1.0):
        readings.append(pred.mantissa)
    allowed = tolerance if tolerance is not None else default_tolerance(ref.mantissa)
    return any(abs(reading - ref.mantissa) <= allowed for reading in readings)


_YEAR = re.compile(r"(?<!\d)(\d{4})(?![\d.,]\d)")


def year_matches(predicted: str, gold: str) -> bool:
    pred_years = set(_YEAR.findall(predicted))
    gold_years = set(_YEAR.findall(gold))
    return len(pred_years) == 1 and pred_years == gold_years


_DAY_FORMATS = (
    "%Y-%m-%d", "%Y/%m/%d", "%Y.%m.%d", "%d %B %Y", "%B %d %Y", "%d %b %Y", "%b %d %Y",
    "%d.%m.%Y", "%Y%m%d",
)  # fmt: skip
_AMBIGUOUS_DAY_FORMATS = ("%m/%d/%Y", "%d/%m/%Y", "%m-%d-%Y", "%d-%m-%Y")
_MONTH_FORMATS = ("%Y-%m", "%Y/%m", "%B %Y", "%b %Y", "%m/%Y")
_WEEKDAY = re.compile(
    r"\b(mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(day|nesday|sday|urday)?\b", re.IGNORECASE
)


def _date_text(text: str) -> str:
    cleaned = _WEEKDAY.sub(" ", unicodedata.normalize("NFKC", text))
    cleaned = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", cleaned, flags=re.IGNORECASE)
    cleaned = re.sub(r"\bof\b|,", " ", cleaned, flags=re.IGNORECASE)
    return " ".join(cleaned.split()).strip(" .")


def parse_dates(text: str) -> tuple[set[date], Literal["day", "month"] | None]:
    """All readings of ``text`` as a date, and the granularity they were read at."""
    cleaned = _date_text(text)
    days = {_strptime(cleaned, fmt) for fmt in (*_DAY_FORMATS, *_AMBIGUOUS_DAY_FORMATS)}
    days.discard(None)
    if days:
        return {d for d in days if d is not None}, "day"
    months = {_strptime(cleaned, fmt) for fmt in _MONTH_FORMATS}
    months.discard(None)
    return ({d for d in months if d is not None}, "month") if months else (set(), None)


def _strptime(text: str, fmt: str) -> date | None:
    try:
        return datetime.strptime(text, fmt).date()
    except ValueError:
        return None


def date_matches(predicted: str, gold: str) -> bool:
    gold_dates, granularity = parse_dates(gold)
    if len(gold_dates) != 1:
        return False
    (target,) = gold_dates
    pred_dates, pred_granularity = parse_dates(predicted)
    if granularity == "month":
        return any((d.year, d.month) == (target.year, target.month) for d in pred_dates)
    return pred_granularity == "day" and target in pred_dates


def value_matches(
    predicted: str | None,
    gold: str,
    answer_type: AnswerType,
    *,
    tolerance: float | None = None,
    aliases: tuple[str, ...] = (),
    unit: str | None = None,
) -> bool:
    """``norm(predicted) == gold`` under the rules of ``answer_type``; NONE never matches."""
    if predicted is None or not predicted.strip() or predicted.strip().upper() == "NONE":
        return False
    return any(
        _matches_one(predicted, candidate, answer_type, tolerance, unit)
        for candidate in (gold, *aliases)
    )


def _matches_one(
    predicted: str, gold: str, answer_type: AnswerType, tolerance: float | None, unit: str | None
) -> bool:
    if answer_type == "numeric":
        return numeric_matches(predicted, gold, tolerance, unit)
    if answer_type == "year":
        return year_matches(predicted, gold)
    if answer_type == "date":
        return date_matches(predicted, gold)
    return fold_text(predicted) == fold_text(gold) != ""
