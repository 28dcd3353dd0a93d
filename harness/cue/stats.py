"""Significance (paper D.1): a stratified bootstrap over questions and Holm's step-down
adjustment over the contrasts the run config declares.

Above: the report. Below: per-question outcomes (``metrics.stratum_outcomes``) and the metric
functions of ``harness.cue.metrics``, evaluated on every replicate.

- Strata are profile × task × setting. A replicate draws, within every stratum, as many questions
  as it holds, with replacement; metrics are then computed exactly as for the point estimate
  (profiles equally weighted within a task). Explicit and implicit questions sit in different
  strata, so an explicit-vs-implicit contrast resamples them independently; a contrast between
  two conditions (caption level, audio level, system) applies the same draws to both, over the
  questions both answered (paired).
- ``replicates`` (default 10,000) and ``seed`` make it reproducible: contrast ``i`` draws from
  ``numpy.random.default_rng([seed, i])``, so adding a contrast does not move the others.
- CI: percentile interval of the replicate differences. p (two-sided):
  ``min(1, 2·(1 + min(#{Δ* ≤ 0}, #{Δ* ≥ 0})) / (B + 1))`` — with B = 10,000, 13 contrasts and
  no replicate crossing zero, Holm gives 13 · 2/10,001 = 0.0026, the smallest p_Holm the paper
  reports.
- Holm: sort the m p-values ascending; adjusted p_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from harness.cue.metrics import MetricName, Stratum, metric_value
from harness.cue.schema import Setting, Task

Outcomes = Mapping[Stratum, Mapping[str, float]]


class ContrastResult(BaseModel):
    name: str
    kind: str
    description: str
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p: float | None = None
    p_holm: float | None = None
    questions: int = 0
    note: str | None = None


def _replicate_means(
    outcomes: Sequence[Outcomes], rng: np.random.Generator, replicates: int
) -> list[dict[Stratum, np.ndarray]]:
    """Per condition, {stratum: replicate means}; the same draws for every condition, over the
    questions all of them answered."""
    shared = sorted(set.intersection(*(set(o) for o in outcomes))) if outcomes else []
    results: list[dict[Stratum, np.ndarray]] = [{} for _ in outcomes]
    for stratum in shared:
        questions = sorted(set.intersection(*(set(o[stratum]) for o in outcomes)))
        if not questions:
            continue
        draws = rng.integers(0, len(questions), size=(replicates, len(questions)))
        for index, condition in enumerate(outcomes):
            values = np.array([condition[stratum][q] for q in questions])
            results[index][stratum] = values[draws].mean(axis=1)
    return results


def _point_means(outcomes: Sequence[Outcomes]) -> list[dict[Stratum, np.ndarray]]:
    shared = sorted(set.intersection(*(set(o) for o in outcomes))) if outcomes else []
    results: list[dict[Stratum, np.ndarray]] = [{} for _ in outcomes]
    for stratum in shared:
        questions = sorted(set.intersection(*(set(o[stratum]) for o in outcomes)))
        if questions:
            for index, condition in enumerate(outcomes):
                results[index][stratum] = np.array(
                    [np.mean([condition[stratum][q] for q in questions])]
                )
    return results


def bootstrap_p(differences: np.ndarray) -> float:
    below = int(np.sum(differences <= 0))
    above = int(np.sum(differences >= 0))
    return min(1.0, 2 * (1 + min(below, above)) / (len(differences) + 1))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


class Difference(BaseModel):
    """What one contrast compares: metric(a) − metric(b), or explicit − implicit within a."""

    metric: MetricName
    task: Task | None = None
    setting: Setting | None = None
    within_settings: bool = False


def _value(
    means: Mapping[Stratum, np.ndarray], spec: Difference, setting: Setting | None
) -> np.ndarray | None:
    return metric_value(means, spec.metric, setting, spec.task)


def difference(
    spec: Difference, means: Sequence[Mapping[Stratum, np.ndarray]]
) -> np.ndarray | None:
    if spec.within_settings:
        (only,) = means
        explicit = _value(only, spec, Setting.explicit)
        implicit = _value(only, spec, Setting.implicit)
        if explicit is None or implicit is None:
            return None
        return explicit - implicit
    first, second = (_value(m, spec, spec.setting) for m in means)
    if first is None or second is None:
        return None
    return first - second


def bootstrap_contrast(
    spec: Difference,
    outcomes: Sequence[Outcomes],
    *,
    replicates: int,
    seed: int,
    index: int,
) -> tuple[float | None, float | None, float | None, float | None, int]:
    """(estimate, ci_low, ci_high, p) in percentage points, and the questions used."""
    point = difference(spec, _point_means(outcomes))
    used = _shared_questions(outcomes)
    if point is None:
        return None, None, None, None, used
    rng = np.random.default_rng([seed, index])
    replicated = difference(spec, _replicate_means(outcomes, rng, replicates))
    assert replicated is not None
    low, high = np.percentile(replicated, [2.5, 97.5])
    return (
        round(float(point[0]) * 100, 2),
        round(float(low) * 100, 2),
        round(float(high) * 100, 2),
        bootstrap_p(replicated),
        used,
    )


def _shared_questions(outcomes: Sequence[Outcomes]) -> int:
    if not outcomes:
        return 0
    strata = set.intersection(*(set(o) for o in outcomes))
    return sum(len(set.intersection(*(set(o[s]) for o in outcomes))) for s in strata)


def apply_holm(results: list[ContrastResult]) -> list[ContrastResult]:
    tested = [r for r in results if r.p is not None]
    adjusted = holm([r.p for r in tested if r.p is not None])
    by_name = {r.name: value for r, value in zip(tested, adjusted, strict=True)}
    return [
        r.model_copy(update={"p_holm": round(by_name[r.name], 4) if r.name in by_name else None})
        for r in results
    ]
