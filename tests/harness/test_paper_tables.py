"""Per-probe replies built to match the paper's Table 1 go through the real parser, scorer and
aggregation; Table 1, Table 2, the stated cross-state facts and Table 9 must come out, under the
default ``paper`` profile (and, for the same replies, under ``lenient``)."""

from __future__ import annotations

import pytest

from harness.kit.stats import wilson_interval
from harness.mirage.probing.records import RecordKey, build_record
from harness.mirage.protocol import PROFILE_NAMES, ProfileName
from harness.mirage.report.aggregate import Aggregate, aggregate
from harness.mirage.scoring import KnownIdResolver
from tests.harness.paper_tables import (
    ARTIFACTS,
    DRIFT_PERCENT,
    MODELS,
    STATES,
    TABLE1,
    TABLE1_COLUMNS,
    TABLE2,
    build_probes,
)

RESOLVER = KnownIdResolver(ARTIFACTS)
PRINTED = 0.05 + 1e-9  # half a unit of the last printed digit


def _aggregate(model: str, profile: ProfileName) -> Aggregate:
    records = [
        build_record(
            RecordKey(p.state, "C0", p.question_id, 0), p.raw_output, p.gold, RESOLVER, profile
        )
        for p in build_probes(model)
    ]
    return aggregate(records)


@pytest.fixture(scope="module", params=PROFILE_NAMES)
def aggregates(request: pytest.FixtureRequest) -> dict[str, Aggregate]:
    return {model: _aggregate(model, request.param) for model in MODELS}


@pytest.mark.parametrize("model", MODELS)
def test_table1_every_cell(aggregates: dict[str, Aggregate], model: str) -> None:
    for state in STATES:
        cell = aggregates[model].states[state]["C0"]
        printed = dict(zip(TABLE1_COLUMNS, TABLE1[(model, state)], strict=True))
        for column in TABLE1_COLUMNS[:-1]:
            value = getattr(cell, column)
            assert value == pytest.approx(printed[column], abs=PRINTED), (state, column)
        assert printed["PF"] == cell.PF, state


@pytest.mark.parametrize("model", MODELS)
def test_table2_diagnostics(aggregates: dict[str, Aggregate], model: str) -> None:
    ds, delta_comp, ret, mi_d80k, *og = TABLE2[model]
    diagnostics = aggregates[model].diagnostics["C0"]
    assert pytest.approx(ds, abs=PRINTED) == diagnostics.DS
    digits = 3 if model == "Gemma-3-27B" else 2
    assert diagnostics.delta_comp == pytest.approx(delta_comp, abs=0.5 * 10**-digits + 1e-9)
    assert diagnostics.Ret == pytest.approx(ret, abs=PRINTED)
    assert diagnostics.MI_d80k == pytest.approx(mi_d80k, abs=PRINTED)
    for state, printed_og in zip(STATES, og, strict=True):
        value = aggregates[model].states[state]["C0"].OG
        assert value is not None
        if (model, state) == ("InternVL3.5-20B", "S1-d0"):
            # The paper prints 0.04 here, but its own Table 1 gives VC - GC = 24.7 - 20.0 = 4.7
            # points (0.047); we check against Table 1 and within one printed unit of Table 2.
            assert value == pytest.approx(4.7, abs=PRINTED)
            assert value / 100 == pytest.approx(printed_og, abs=0.01)
            continue
        assert value / 100 == pytest.approx(printed_og, abs=0.005 + 1e-9), state


def test_headline_examples(aggregates: dict[str, Aggregate]) -> None:
    gpt5, qwen8b = (
        aggregates["GPT-5"].diagnostics["C0"],
        aggregates["Qwen3-VL-8B"].diagnostics["C0"],
    )
    assert round(gpt5.DS or 0, 1) == 3.4
    assert round(gpt5.delta_comp or 0, 2) == 0.02
    assert round(qwen8b.DS or 0, 1) == 74.2
    assert round((aggregates["Qwen3-VL-8B"].states["S1-d80k"]["C0"].OG or 0) / 100, 2) == 0.29


def test_mirage_index_figure3(aggregates: dict[str, Aggregate]) -> None:
    assert pytest.approx(70.0) == aggregates["InternVL3.5-20B"].states["S2"]["C0"].MI
    assert pytest.approx(67.0) == aggregates["Gemma-3-27B"].states["S2"]["C0"].MI
    assert all(
        round((aggregates["GPT-5"].states[s]["C0"].OG or 0) / 100, 2) <= 0.01 for s in STATES
    )


def test_transitions_figure4(aggregates: dict[str, Aggregate]) -> None:
    gpt5 = aggregates["GPT-5"].cross_state["C0"]
    assert gpt5.transitions_shared == 100
    assert gpt5.transitions["✓✓✓"] == 76
    assert aggregates["Qwen3-VL-8B"].cross_state["C0"].transitions["✓×✓"] == 26
    for agg in aggregates.values():
        assert (
            sum(agg.cross_state["C0"].transitions.values())
            == agg.cross_state["C0"].transitions_shared
        )


def test_retention_counts_section_421(aggregates: dict[str, Aggregate]) -> None:
    qwen4b = aggregates["Qwen3-VL-4B"].cross_state["C0"]
    assert (qwen4b.ret_kept, qwen4b.ret_d0_correct) == (1, 54)
    assert aggregates["InternVL3.5-20B"].cross_state["C0"].ret_kept == 0


@pytest.mark.parametrize("model", sorted(DRIFT_PERCENT))
def test_source_drift_section_422(aggregates: dict[str, Aggregate], model: str) -> None:
    drift = aggregates[model].cross_state["C0"].source_drift
    assert drift is not None and round(drift) == DRIFT_PERCENT[model]


@pytest.mark.parametrize(
    ("model", "state", "metric", "k", "n", "low", "high"),
    [
        ("Qwen3-VL-30B", "S1-d80k", "GC", 41, 100, 31.9, 50.8),
        ("Qwen3-VL-4B", "S1-d80k", "GC", 1, 100, 0.2, 5.4),
        ("Gemma-3-27B", "S1-d80k", "SC", 70, 99, 61.1, 78.8),
        ("GPT-5", "S2", "GC", 84, 99, 76.5, 90.6),
    ],
)
def test_table9_wilson_intervals(
    aggregates: dict[str, Aggregate],
    model: str,
    state: str,
    metric: str,
    k: int,
    n: int,
    low: float,
    high: float,
) -> None:
    (run,) = aggregates[model].cells[state]["C0"].runs
    interval = run.intervals[metric]
    assert interval is not None
    assert (interval.k, interval.n) == (k, n)
    assert (round(interval.low, 1), round(interval.high, 1)) == (low, high)
    direct = wilson_interval(k, n)
    assert direct is not None and (round(direct.low, 1), round(direct.high, 1)) == (low, high)
