"""CUE-Mem metrics (paper 5.1, D.1, D.3): accuracy by task × setting, Memory Avg, EI-Gap, refusal
accuracy, retrieval Recall@k / Precision@k against the clue ids, retrieved input tokens.

Above: the report and the statistics (which evaluate the same metric functions on bootstrap
replicates). Below: ``CueRecord`` lines of ``results.jsonl``.

Definitions (percent; docs/cue.md):

- accuracy(task, setting) = mean over profiles of that profile's share of correct answers among
  its scored questions of that task and setting (profiles equally weighted within a task);
- Memory Avg(setting) = mean of Entity Recall, Long Pattern and Personalized Recommendation
  accuracy (undefined when one of them has no question); Answer Refusal is reported apart;
- EI-Gap = Memory Avg(explicit) − Memory Avg(implicit), in points;
- a record whose call failed (``error``) is not scored; an unparsed reply is scored wrong;
- Recall@k = |top-k retrieved rounds ∩ clue rounds| / |clue rounds|, Precision@k = the same
  intersection / k, averaged over non-refusal questions (refusal clues point at context, not at
  support) whose system ranked at least k rounds (a top-5 system has no Recall@10); a clue id
  names a round, an image or a voice message, and counts as its round.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from harness.cue.records import CueRecord
from harness.cue.schema import MEMORY_TASKS, Setting, Task

RETRIEVAL_CUTOFFS: tuple[int, ...] = (1, 5, 10)
Stratum = tuple[str, Task, Setting]
MetricName = Literal["accuracy", "memory_avg", "ei_gap"]


def stratum_of(record: CueRecord) -> Stratum:
    return (record.profile, record.task, record.setting)


def stratum_outcomes(records: Iterable[CueRecord]) -> dict[Stratum, dict[str, float]]:
    """Scored records as {stratum: {question_id: 1.0 correct / 0.0 wrong}}."""
    strata: dict[Stratum, dict[str, float]] = defaultdict(dict)
    for record in records:
        if record.scored:
            strata[stratum_of(record)][record.question_id] = 1.0 if record.correct else 0.0
    return dict(strata)


def task_accuracy(
    means: Mapping[Stratum, np.ndarray], task: Task, setting: Setting
) -> np.ndarray | None:
    """Profile-weighted accuracy (proportion) from stratum means; ``None`` when no profile has a
    question of this task and setting. Arrays carry bootstrap replicates (shape ``(B,)``)."""
    per_profile = [
        value for (_, t, s), value in sorted(means.items()) if t == task and s == setting
    ]
    if not per_profile:
        return None
    return np.mean(np.stack(per_profile), axis=0)


def memory_avg(means: Mapping[Stratum, np.ndarray], setting: Setting) -> np.ndarray | None:
    tasks = [task_accuracy(means, task, setting) for task in MEMORY_TASKS]
    if any(value is None for value in tasks):
        return None
    return np.mean(np.stack([v for v in tasks if v is not None]), axis=0)


def ei_gap(means: Mapping[Stratum, np.ndarray]) -> np.ndarray | None:
    explicit, implicit = memory_avg(means, Setting.explicit), memory_avg(means, Setting.implicit)
    if explicit is None or implicit is None:
        return None
    return explicit - implicit


def metric_value(
    means: Mapping[Stratum, np.ndarray],
    metric: MetricName,
    setting: Setting | None = None,
    task: Task | None = None,
) -> np.ndarray | None:
    """One named metric (as a proportion) from stratum means."""
    if metric == "ei_gap":
        return ei_gap(means)
    if setting is None:
        raise ValueError(f"metric {metric} needs a setting")
    if metric == "memory_avg":
        return memory_avg(means, setting)
    if task is None:
        raise ValueError("metric accuracy needs a task")
    return task_accuracy(means, task, setting)


def point_means(strata: Mapping[Stratum, Mapping[str, float]]) -> dict[Stratum, np.ndarray]:
    return {key: np.array([np.mean(list(v.values()))]) for key, v in strata.items() if v}


def _percent(value: np.ndarray | None) -> float | None:
    return None if value is None else round(float(value[0]) * 100, 2)


class Cell(BaseModel):
    """One task × setting of one condition."""

    accuracy: float | None
    k: int
    n: int
    profiles: int
    unparsed: int
    errors: int


class RetrievalAt(BaseModel):
    recall: float | None
    precision: float | None
    n: int


class ConditionMetrics(BaseModel):
    condition: str
    cells: dict[Task, dict[Setting, Cell]]
    memory_avg: dict[Setting, float | None]
    ei_gap: float | None
    task_ei_gap: dict[Task, float | None]
    refusal: dict[Setting, float | None]
    retrieval: dict[str, dict[int, RetrievalAt]]
    clue_coverage: float | None
    memory_tokens_mean: float | None
    input_tokens_mean: float | None
    parse_rules: dict[str, int]
    scored: int
    errors: int


def _cell(
    records: Sequence[CueRecord], means: Mapping[Stratum, np.ndarray], task: Task, setting: Setting
) -> Cell:
    mine = [r for r in records if r.task == task and r.setting == setting]
    scored = [r for r in mine if r.scored]
    return Cell(
        accuracy=_percent(task_accuracy(means, task, setting)),
        k=sum(bool(r.correct) for r in scored),
        n=len(scored),
        profiles=len({r.profile for r in scored}),
        unparsed=sum(r.choice is None for r in scored),
        errors=sum(r.error is not None for r in mine),
    )


def retrieval_at(records: Iterable[CueRecord], k: int) -> RetrievalAt:
    recalls, precisions = [], []
    for record in records:
        if record.task == Task.refusal or len(record.retrieved) < k or not record.clue_rounds:
            continue
        gold = set(record.clue_rounds)
        hits = len(gold & set(record.retrieved[:k]))
        recalls.append(hits / len(gold))
        precisions.append(hits / k)
    if not recalls:
        return RetrievalAt(recall=None, precision=None, n=0)
    return RetrievalAt(
        recall=round(100 * float(np.mean(recalls)), 2),
        precision=round(100 * float(np.mean(precisions)), 2),
        n=len(recalls),
    )


def _retrieval(records: Sequence[CueRecord]) -> dict[str, dict[int, RetrievalAt]]:
    groups = {
        "all": records,
        **{str(s): [r for r in records if r.setting == s] for s in Setting},
    }
    return {
        name: {k: retrieval_at(group, k) for k in RETRIEVAL_CUTOFFS}
        for name, group in groups.items()
    }


def _mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 1) if values else None


def _coverage(records: Sequence[CueRecord]) -> float | None:
    shares = [
        len(set(r.clue_rounds) & set(r.in_context)) / len(set(r.clue_rounds))
        for r in records
        if r.task != Task.refusal and r.clue_rounds
    ]
    return round(100 * float(np.mean(shares)), 2) if shares else None


def condition_metrics(condition: str, records: Sequence[CueRecord]) -> ConditionMetrics:
    means = point_means(stratum_outcomes(records))
    scored = [r for r in records if r.scored]
    cells = {task: {s: _cell(records, means, task, s) for s in Setting} for task in Task}
    averages = {s: _percent(memory_avg(means, s)) for s in Setting}
    return ConditionMetrics(
        condition=condition,
        cells=cells,
        memory_avg=averages,
        ei_gap=_percent(ei_gap(means)),
        task_ei_gap={task: _difference(cells[task]) for task in Task},
        refusal={s: cells[Task.refusal][s].accuracy for s in Setting},
        retrieval=_retrieval(scored),
        clue_coverage=_coverage(scored),
        memory_tokens_mean=_mean([r.memory_tokens for r in scored]),
        input_tokens_mean=_mean([r.usage.input_tokens for r in scored if r.usage.input_tokens]),
        parse_rules=dict(Counter(r.parse_rule for r in scored)),
        scored=len(scored),
        errors=sum(r.error is not None for r in records),
    )


def _difference(cells: Mapping[Setting, Cell]) -> float | None:
    explicit, implicit = cells[Setting.explicit].accuracy, cells[Setting.implicit].accuracy
    if explicit is None or implicit is None:
        return None
    return round(explicit - implicit, 2)


def all_metrics(
    records: Iterable[CueRecord], conditions: Sequence[str]
) -> dict[str, ConditionMetrics]:
    by_condition: dict[str, list[CueRecord]] = defaultdict(list)
    for record in records:
        by_condition[record.condition].append(record)
    return {c: condition_metrics(c, by_condition.get(c, [])) for c in conditions}
