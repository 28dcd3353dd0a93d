"""The indicator registry drives records, aggregation, tables and the metrics doc."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report.aggregate import CellSummary, Counts, Diagnostics
from harness.mirage.scoring import ProbeScore
from harness.mirage.scoring.metrics import (
    ANSWERABLE_ONLY,
    DIAGNOSTICS,
    METRICS,
    PROBE_INDICATORS,
    TABLE1_COLUMNS,
    get_metric,
    metrics_markdown,
)

DOC = Path(__file__).parents[2] / "docs" / "metrics.md"


def test_probe_indicators_are_the_fields_of_scores_and_records() -> None:
    for name in PROBE_INDICATORS:
        assert name in ProbeScore.model_fields
        assert name in ProbeRecord.model_fields


def test_table_columns_are_fields_of_the_aggregate() -> None:
    assert set(TABLE1_COLUMNS) <= set(CellSummary.model_fields)
    assert list(DIAGNOSTICS) == list(Diagnostics.model_fields)


def test_every_rate_names_counts_that_exist() -> None:
    counts = Counts()
    for metric in METRICS:
        if metric.is_rate:
            assert counts.fraction(metric.name) == (0, 0)


def test_a_record_rejects_an_indicator_its_gold_does_not_allow() -> None:
    with pytest.raises(ValueError, match="do not apply"):
        ProbeRecord(
            state="S1-d0", condition="C0", question_id="u", repeat=0, gold_answerable="NO",
            **{ANSWERABLE_ONLY[0]: 1},
        )  # fmt: skip


def test_unknown_metric_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="unknown metric 'XX'; known: AC"):
        get_metric("XX")


def test_docs_metrics_table_is_generated_from_the_registry() -> None:
    assert metrics_markdown() in DOC.read_text(encoding="utf-8"), (
        "docs/metrics.md is out of step with harness/mirage/scoring/metrics.py: paste "
        "metrics_markdown() between its metrics-table markers"
    )
