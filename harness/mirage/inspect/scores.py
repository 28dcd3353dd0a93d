"""A MIRAGE probe record as an Inspect sample score, and a report's state x condition cells as
Inspect results: the one mapping both the export and the ``mirage/probe`` task use.

Above: ``harness.mirage.inspect.export`` and ``harness.mirage.inspect.task``. Below: the probe
record (``harness.mirage.probing.records``), the aggregate behind ``summary.json``
(``harness.mirage.report.aggregate``) and Inspect's ``Score`` / ``EvalScore`` / ``EvalMetric``.

Per probe one score named ``mirage`` whose value maps each indicator (AC SC VC GC WS HR, PF) to
0/1 or None where it does not apply, and ``path`` to the retrieval path; its metadata holds the
path's evidence, where it was decided, the tool calls and the parsed fields. The results hold
one ``EvalScore`` per metric of a ``summary.json`` cell (AC … n), its metrics keyed
``STATE/CONDITION`` with the state as their group, and one ``diagnostics`` score (DS,
delta_comp, Ret, MI_d80k per condition). A figure ``summary.json`` has as null is left out
(Inspect's metrics are numbers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspect_ai.log import EvalMetric, EvalResults, EvalScore, HeadlineMetric
from inspect_ai.scorer import Score

from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report.aggregate import Aggregate
from harness.mirage.scoring import Gold
from harness.mirage.scoring.metrics import PROBE_INDICATORS

SCORER = "mirage"
CELL_METRICS = (
    "AC", "SC", "VC", "GC", "HR", "WS", "PF", "PF_total", "MI", "OG", "R_tool", "R_none",
    "VC_R_none", "n",
)  # fmt: skip
"""The numeric figures of a ``summary.json`` cell, in its order."""
DIAGNOSTICS = "diagnostics"


def gold_target(gold: Gold | None) -> str:
    """The gold reply in the probe protocol's three fields (an Inspect sample's target)."""
    if gold is None:
        return ""
    return (
        f"ANSWERABLE={gold.answerable}\nSOURCE={gold.source or 'NONE'}\n"
        f"ANSWER={gold.answer or 'NONE'}"
    )


def score_value(record: ProbeRecord) -> dict[str, str | int | float | bool | None]:
    """The record's indicators (None where one does not apply), PF and its path."""
    value: dict[str, str | int | float | bool | None] = {
        name: getattr(record, name) for name in PROBE_INDICATORS
    }
    value["PF"] = int(record.pf)
    value["path"] = record.path
    return value


def record_score(record: ProbeRecord) -> Score:
    """The ``mirage`` score of one probe: indicators and path as its value; the path's evidence,
    the tool calls and the parsed reply in its metadata."""
    dumped = record.model_dump(mode="json")
    keep = (
        "path_evidence", "path_source", "declared_path", "tool_calls", "parsed", "pf_reason",
        "canonical_source", "provider_error", "gold",
    )  # fmt: skip
    reason = record.provider_error or record.pf_reason
    if reason is None and record.path_evidence is not None:
        reason = record.path_evidence.reason
    return Score(
        value=score_value(record),
        answer=record.parsed.answer,
        explanation=reason,
        reason="invalid_response_format" if record.pf else None,
        metadata={**{key: dumped[key] for key in keep}, "record": dumped},
    )


def _cell_metrics(summary: Mapping[str, Any], name: str) -> dict[str, EvalMetric]:
    metrics = {}
    for state, conditions in summary["states"].items():
        for condition, cell in conditions.items():
            value = cell[name]
            if value is not None:
                key = f"{state}/{condition}"
                metrics[key] = EvalMetric(name=key, group=state, value=value)
    return metrics


def _diagnostics(summary: Mapping[str, Any]) -> EvalScore:
    metrics = {
        f"{condition}/{name}": EvalMetric(name=f"{condition}/{name}", group=condition, value=value)
        for condition, figures in summary["diagnostics"].items()
        for name, value in figures.items()
        if value is not None
    }
    return EvalScore(name=DIAGNOSTICS, scorer=SCORER, metrics=metrics)


def cell_scores(summary: Mapping[str, Any]) -> list[EvalScore]:
    """One ``EvalScore`` per cell metric (its metrics per state x condition) and the
    diagnostics, from a ``summary.json`` payload."""
    scores = [
        EvalScore(name=name, scorer=SCORER, metrics=_cell_metrics(summary, name))
        for name in CELL_METRICS
    ]
    return [*scores, _diagnostics(summary)]


def eval_results(agg: Aggregate, samples: int, completed: int) -> EvalResults:
    """Inspect results of a report's aggregate: the cells and diagnostics of its
    ``summary.json``, which also goes whole into the results' metadata."""
    summary = agg.summary()
    first = next(
        (f"{s}/{c}" for s, conds in summary["states"].items() for c in conds),  # type: ignore[attr-defined]
        None,
    )
    headline = HeadlineMetric(scorer=SCORER, score="GC", metric=first) if first else None
    return EvalResults(
        total_samples=samples,
        completed_samples=completed,
        scores=cell_scores(summary),
        headline=headline,
        metadata={"summary": summary},
    )
