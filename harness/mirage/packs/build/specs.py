"""Question specs -> schema ``Question`` records, with golds computed from the data.

A ``QuestionSpec`` is an answerable question and (usually) its matched unanswerable twin: the
same topic, local cues and response format, with a derivation the data cannot support. The
builder refuses a spec whose answerable derivation finds no support, or whose twin does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.mirage.packs.resolve import NoSupport, derive, format_answer
from harness.mirage.packs.schema import (
    NONE,
    Answerability,
    AnswerType,
    Difficulty,
    Question,
    ShortcutRisk,
)


class SpecError(ValueError):
    """A question spec whose gold cannot be computed as declared."""


@dataclass(frozen=True)
class QuestionSpec:
    question: str
    derivation: dict[str, Any]
    answer_type: AnswerType
    difficulty: Difficulty
    query_type: str
    twin_question: str | None = None
    twin_derivation: dict[str, Any] | None = None
    unit: str | None = None
    choices: list[str] | None = None
    twin_choices: list[str] | None = None
    shortcut_risk: list[str] = field(default_factory=list)
    decimals: int | None = None


def pair_spec_from_yaml(raw: dict[str, Any]) -> QuestionSpec:
    """A hand-written pair: ``q``/``d`` (answerable text and derivation), ``u``/``ud`` (twin),
    ``type``, ``difficulty``, ``query_type``, optional ``risk``, ``unit``, ``choices``,
    ``decimals``."""
    unknown = set(raw) - {
        "q",
        "d",
        "u",
        "ud",
        "type",
        "difficulty",
        "query_type",
        "risk",
        "unit",
        "choices",
        "decimals",
    }
    if unknown:
        raise SpecError(f"question spec {raw.get('q')!r} has unknown keys {sorted(unknown)}")
    return QuestionSpec(
        question=raw["q"],
        derivation=raw["d"],
        twin_question=raw.get("u"),
        twin_derivation=raw.get("ud"),
        answer_type=AnswerType(raw["type"]),
        difficulty=Difficulty(raw["difficulty"]),
        query_type=raw["query_type"],
        unit=raw.get("unit"),
        choices=raw.get("choices"),
        shortcut_risk=raw.get("risk", []),
        decimals=raw.get("decimals"),
    )


def _tolerance(spec: QuestionSpec, gold: str) -> float | None:
    if spec.answer_type is not AnswerType.numeric:
        return None
    if spec.derivation["op"] == "pct_change":
        return 0.1
    places = len(gold.split(".")[1]) if "." in gold else 0
    return 0.5 * 10**-places


def build_questions(
    key: str, artifact_id: str, data: Any, specs: list[QuestionSpec]
) -> list[Question]:
    """Answerable question ``{key}-NN-a`` and its twin ``{key}-NN-u`` for each spec."""
    questions: list[Question] = []
    for number, spec in enumerate(specs, start=1):
        pair_id = f"{key}-{number:02d}" if spec.twin_question else None
        try:
            result = derive(data, spec.derivation)
        except NoSupport as exc:
            raise SpecError(f"{key} #{number} {spec.question!r}: no support ({exc})") from exc
        gold = format_answer(result, spec.answer_type, spec.decimals)
        risks = [ShortcutRisk(risk) for risk in spec.shortcut_risk]
        common: dict[str, Any] = {
            "artifact": artifact_id,
            "answer_type": spec.answer_type,
            "unit": spec.unit,
            "choices": spec.choices,
            "difficulty": spec.difficulty,
            "query_type": spec.query_type,
            "shortcut_risk": risks,
            "pair_id": pair_id,
        }
        questions.append(
            Question(
                id=f"{key}-{number:02d}-a",
                question=spec.question,
                gold_answerable=Answerability.YES,
                gold_source=artifact_id,
                gold_answer=gold,
                tolerance=_tolerance(spec, gold),
                derivation=spec.derivation,
                **common,
            )
        )
        if spec.twin_question is None or spec.twin_derivation is None:
            continue
        _require_no_support(key, number, data, spec)
        questions.append(
            Question(
                id=f"{key}-{number:02d}-u",
                question=spec.twin_question,
                gold_answerable=Answerability.NO,
                gold_source=NONE,
                gold_answer=NONE,
                derivation=spec.twin_derivation,
                **{**common, "choices": spec.twin_choices or spec.choices},
            )
        )
    return questions


def _require_no_support(key: str, number: int, data: Any, spec: QuestionSpec) -> None:
    assert spec.twin_derivation is not None
    try:
        derive(data, spec.twin_derivation)
    except NoSupport:
        return
    raise SpecError(f"{key} #{number} twin {spec.twin_question!r} is supported by the data")
