"""Per-probe indicators AC, SC, VC, GC, WS, HR exactly as in paper section 3.5.

Above: the probe runner and ``mirage rescore``, which turn one reply + its gold annotation into
the indicator fields of a results record. Below: a scoring profile (``profiles``: its reply
parser and value rules) and source canonicalisation (``sources``). The definitions below are the
same under every profile; profiles differ only in how they read the reply and compare values.

- AC = 1[ẑ = z*] on every parsed probe.
- Answerable probes: SC = 1[canon(src) = src*], VC = 1[norm(ŷ) = y*], GC = SC·VC,
  WS = 1[canon(src) ≠ src*] (NONE is a mismatch, so WS = 1 − SC); HR is null.
- Unanswerable probes: HR = 1[ẑ = YES ∨ ŷ ≠ NONE]; SC, VC, GC, WS are null.
- Parse failures (PF) get null indicators everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from harness.mirage.protocol import DEFAULT_PROFILE, NONE_VALUE, ParseOutcome, ProfileName
from harness.mirage.scoring.profiles import ScoringProfile, get_profile
from harness.mirage.scoring.sources import SourceResolver, canonical_source, same_source
from harness.mirage.scoring.values import AnswerType

Indicator = Literal[0, 1]


def _array_as_tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


StoredTuple = Annotated[tuple[str, ...], BeforeValidator(_array_as_tuple)]
"""A tuple of strings that a stored record, read back strictly, holds as a JSON array (the
record's migrating validator hands its fields on as Python lists); each item stays strict."""


class Gold(BaseModel):
    """The gold annotation of one question, as stored with every record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answerable: Literal["YES", "NO"]
    source: str | None = None
    answer: str | None = None
    answer_type: AnswerType = "string"
    tolerance: float | None = Field(default=None, ge=0)
    unit: str | None = None
    aliases: StoredTuple = ()
    artifact: str | None = Field(
        default=None,
        description="the artifact the question is about (also for NO questions); schema 3",
    )
    keywords: StoredTuple = Field(
        default=(), description="that artifact's content keywords (the pack's), for the path"
    )

    @classmethod
    def from_question(cls, question: Any, keywords: Sequence[str] = ()) -> Gold:
        """The gold of a pack question (``harness.mirage.packs.Question`` or anything shaped like
        it); ``keywords`` are the content keywords of its artifact."""
        return cls.model_validate(
            {
                "artifact": getattr(question, "artifact", None),
                "keywords": tuple(keywords),
                "answerable": str(question.gold_answerable),
                "source": question.gold_source,
                "answer": question.gold_answer,
                "answer_type": str(question.answer_type),
                "tolerance": question.tolerance,
                "unit": getattr(question, "unit", None),
                "aliases": tuple(getattr(question, "aliases", None) or ()),
            }
        )

    @field_validator("source", "answer", mode="before")
    @classmethod
    def _none_means_missing(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().upper() in {NONE_VALUE, ""}:
            return None
        return value

    @model_validator(mode="after")
    def _answerable_needs_support(self) -> Gold:
        if self.answerable == "YES" and (not self.source or not self.answer):
            raise ValueError("an answerable gold needs both a source and an answer")
        return self


class ProbeScore(BaseModel):
    """Indicators and the values they were computed from."""

    model_config = ConfigDict(frozen=True)

    outcome: ParseOutcome
    scoring: ProfileName
    canonical_source: str | None = None
    AC: Indicator | None = None
    SC: Indicator | None = None
    VC: Indicator | None = None
    GC: Indicator | None = None
    WS: Indicator | None = None
    HR: Indicator | None = None


def _flag(condition: bool) -> Indicator:
    return 1 if condition else 0


def score_outcome(
    outcome: ParseOutcome,
    gold: Gold,
    resolver: SourceResolver | None,
    profile: ProfileName | ScoringProfile = DEFAULT_PROFILE,
) -> ProbeScore:
    """Indicators of one parsed reply against its gold annotation, under ``profile``."""
    rules = get_profile(profile)
    if outcome.pf:
        return ProbeScore(outcome=outcome, scoring=rules.name)
    parsed = outcome.parsed
    canonical = canonical_source(parsed.source, resolver)
    accuracy = _flag(parsed.answerable == gold.answerable)
    if gold.answerable == "NO":
        claims_answer = parsed.answer is not None and parsed.answer != NONE_VALUE
        hallucinated = _flag(parsed.answerable == "YES" or claims_answer)
        return ProbeScore(
            outcome=outcome,
            scoring=rules.name,
            canonical_source=canonical,
            AC=accuracy,
            HR=hallucinated,
        )
    source_ok = _flag(same_source(canonical, gold.source))
    value_ok = _flag(
        rules.value_matches(
            parsed.answer,
            gold.answer or "",
            gold.answer_type,
            tolerance=gold.tolerance,
            aliases=gold.aliases,
            unit=gold.unit,
        )
    )
    return ProbeScore(
        outcome=outcome,
        scoring=rules.name,
        canonical_source=canonical,
        AC=accuracy,
        SC=source_ok,
        VC=value_ok,
        GC=_flag(source_ok == 1 and value_ok == 1),
        WS=_flag(source_ok == 0),
    )


def score_reply(
    reply: str | None,
    gold: Gold,
    resolver: SourceResolver | None,
    profile: ProfileName | ScoringProfile = DEFAULT_PROFILE,
) -> ProbeScore:
    """Parse and score one raw reply under ``profile`` (default ``paper``)."""
    rules = get_profile(profile)
    return score_outcome(rules.parse(reply), gold, resolver, rules)
