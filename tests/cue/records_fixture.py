"""Hand-made CUE records for metric and statistics tests."""

from __future__ import annotations

from harness.cue.records import CueRecord
from harness.cue.schema import Setting, Task

ER, LP, PR, AR = Task.entity_recall, Task.long_pattern, Task.recommendation, Task.refusal
E, I = Setting.explicit, Setting.implicit  # noqa: E741


def record(
    qid: str,
    profile: str,
    task: Task,
    setting: Setting,
    correct: bool | None,
    *,
    condition: str = "c",
    retrieved: tuple[str, ...] = (),
    clues: tuple[str, ...] = (),
    tokens: int = 0,
) -> CueRecord:
    return CueRecord(
        condition=condition,
        question_id=qid,
        profile=profile,
        task=task,
        setting=setting,
        answer="A",
        model="m",
        raw_output=None if correct is None else ("A" if correct else "B"),
        choice=None if correct is None else ("A" if correct else "B"),
        parse_rule="none" if correct is None else "bare",
        correct=correct,
        retrieved=list(retrieved),
        in_context=list(retrieved[:2]),
        clue_rounds=list(clues),
        memory_tokens=tokens,
        error="provider_error: boom" if correct is None else None,
    )


def hand_computed() -> list[CueRecord]:
    """ER E: p1 1/2, p2 1/1 -> 75 (pooled would be 66.7); ER I: p1 0/2, p2 1/3 -> 16.67;
    LP E: p1 1/1, p2 0/2 -> 50; LP I: p1 1/2 -> 50; PR E: p1 0/1, p2 1/1 -> 50;
    PR I: 0/1, 0/1 -> 0; refusal E p1 1/1 -> 100, refusal I p2 0/1 -> 0.
    MemAvg E = 58.33, MemAvg I = 22.22, EI-Gap = 36.11. One failed call (not scored)."""
    rows = [
        ("q1", "p1", ER, E, True),
        ("q2", "p1", ER, E, False),
        ("q2x", "p1", ER, E, None),
        ("q3", "p1", ER, I, False),
        ("q4", "p1", ER, I, False),
        ("q5", "p2", ER, E, True),
        ("q6", "p2", ER, I, True),
        ("q7", "p2", ER, I, False),
        ("q8", "p2", ER, I, False),
        ("q9", "p1", LP, E, True),
        ("q10", "p2", LP, E, False),
        ("q11", "p2", LP, E, False),
        ("q12", "p1", LP, I, True),
        ("q13", "p1", LP, I, False),
        ("q14", "p1", PR, E, False),
        ("q15", "p2", PR, E, True),
        ("q16", "p1", PR, I, False),
        ("q17", "p2", PR, I, False),
        ("q18", "p1", AR, E, True),
        ("q19", "p2", AR, I, False),
    ]
    return [record(*row) for row in rows]
