"""Aggregation rules beyond the paper tables: denominators, repeats, provider errors, deltas."""

from __future__ import annotations

import pytest

from harness.kit.agents.base import ToolCallRecord
from harness.mirage.probing.records import (
    ProbeRecord,
    RecordKey,
    build_record,
    provider_error_record,
)
from harness.mirage.report.aggregate import MixedProfilesError, StateRoles, aggregate
from harness.mirage.scoring import Gold, KnownIdResolver

GOLD_YES = Gold(answerable="YES", source="chart_1", answer="42", answer_type="numeric")
GOLD_NO = Gold(answerable="NO", artifact="chart_1")
RESOLVER = KnownIdResolver(["chart_1", "chart_2"])
GROUNDED = "ANSWERABLE=YES\nSOURCE=chart_1\nANSWER=42"
MIRAGE_VC = "ANSWERABLE=YES\nSOURCE=NONE\nANSWER=42"
MIRAGE_WRONG = "ANSWERABLE=YES\nSOURCE=chart_2\nANSWER=7"
REFUSAL = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
PF = "the answer is 42"


def rec(
    state: str,
    question: str,
    reply: str,
    *,
    cond: str = "C0",
    repeat: int = 0,
    gold: Gold = GOLD_YES,
    tool: bool = False,
) -> ProbeRecord:
    calls = [ToolCallRecord(name="artifact_recall", executed=True).model_dump()] if tool else []
    key = RecordKey(state, cond, question, repeat)
    return build_record(key, reply, gold, RESOLVER, tool_calls=calls)


def test_denominators_and_mirage_index() -> None:
    records = [
        rec("S1-d0", "a1", GROUNDED),
        rec("S1-d0", "a2", MIRAGE_VC),
        rec("S1-d0", "a3", MIRAGE_WRONG),
        rec("S1-d0", "a4", PF),
        rec("S1-d0", "u1", REFUSAL, gold=GOLD_NO),
        rec("S1-d0", "u2", "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=12", gold=GOLD_NO, tool=True),
        provider_error_record(RecordKey("S1-d0", "C0", "a5", 0), GOLD_YES, "timeout"),
    ]
    cell = aggregate(records).states["S1-d0"]["C0"]
    assert cell.n == 6 and cell.PF == 1
    assert pytest.approx(100.0) == cell.AC  # 5 parsed: 3 YES on answerable, 2 NO on unanswerable
    assert pytest.approx(100 / 3) == cell.SC and pytest.approx(200 / 3) == cell.VC
    assert pytest.approx(100 / 3) == cell.GC and pytest.approx(200 / 3) == cell.WS
    assert pytest.approx(100 / 3) == cell.OG
    assert pytest.approx(50.0) == cell.HR
    assert pytest.approx(50.0) == cell.MI  # 2 mirages over 4 recorded answerable (PF counts 0)
    assert cell.R_tool == pytest.approx(100 / 6)
    detail = aggregate(records).cells["S1-d0"]["C0"]
    assert detail.provider_errors == 1 and detail.recorded_answerable == 4


def test_empty_denominators_are_null() -> None:
    cell = aggregate([rec("S2", "u1", REFUSAL, gold=GOLD_NO)]).states["S2"]["C0"]
    assert cell.SC is None and cell.GC is None and cell.OG is None and cell.MI is None
    assert cell.HR == 0.0 and cell.AC == 100.0


def test_headline_rates_are_means_of_per_run_rates() -> None:
    """Table 1 cells are means over runs, not pooled counts: run 0 grounds 1 of 1, run 1 grounds
    0 of 3 (one more probe of run 1 is a PF), so GC is 50, not the pooled 25."""
    records = [rec("S1-d0", "a0", GROUNDED, repeat=0)]
    records += [rec("S1-d0", f"a{i}", MIRAGE_WRONG, repeat=1) for i in range(3)]
    records += [rec("S1-d0", "a9", PF, repeat=1), rec("S1-d0", "a8", PF, repeat=1)]
    agg = aggregate(records)
    cell = agg.states["S1-d0"]["C0"]
    assert pytest.approx(50.0) == cell.GC
    assert (cell.PF, cell.PF_total, cell.n, cell.runs) == (1.0, 2, 6, 2)
    assert pytest.approx((0.0 + 60.0) / 2) == cell.MI  # run 0: 0 of 1; run 1: 3 of 5 (2 PF)
    detail = agg.cells["S1-d0"]["C0"]
    assert [run.rates["GC"] for run in detail.runs] == [100.0, 0.0]
    assert [run.PF for run in detail.runs] == [0, 2]
    spread = detail.repeats["GC"]
    assert spread is not None and spread.values == [100.0, 0.0] and spread.mean == 50.0
    per_run = [run.intervals["GC"] for run in detail.runs]
    assert [(i.k, i.n) for i in per_run if i is not None] == [(1, 1), (0, 3)]
    pooled = detail.intervals_pooled["GC"]
    assert pooled is not None and (pooled.k, pooled.n) == (1, 4)
    assert agg.runs == 2 and agg.scoring == "paper"


def _three_states(pattern: dict[str, list[str]], cond: str = "C0") -> list[ProbeRecord]:
    return [
        rec(state, f"a{i}", reply, cond=cond)
        for state, replies in pattern.items()
        for i, reply in enumerate(replies)
    ]


def test_cross_state_diagnostics() -> None:
    records = _three_states(
        {
            "S1-d0": [GROUNDED, GROUNDED, GROUNDED, GROUNDED],
            "S1-d80k": [GROUNDED, "ANSWERABLE=YES\nSOURCE=chart_1.png\nANSWER=42", MIRAGE_VC, PF],
            "S2": [GROUNDED, MIRAGE_VC, GROUNDED, GROUNDED],
        }
    )
    agg = aggregate(records)
    diagnostics = agg.diagnostics["C0"]
    assert pytest.approx(100 * (100 - 200 / 3) / 100) == diagnostics.DS
    assert diagnostics.delta_comp == pytest.approx(0.75 - 2 / 3)
    assert diagnostics.Ret == pytest.approx(50.0)
    assert diagnostics.MI_d80k == pytest.approx(25.0)
    cross = agg.cross_state["C0"]
    assert (cross.drift_both_correct, cross.drift_changed, cross.source_drift) == (2, 1, 50.0)
    assert cross.transitions_shared == 4
    assert cross.transitions["✓✓✓"] == 1 and cross.transitions["✓✓×"] == 1
    assert cross.transitions["✓×✓"] == 2 and sum(cross.transitions.values()) == 4


def test_missing_states_give_null_diagnostics() -> None:
    agg = aggregate([rec("S1-d0", "a1", GROUNDED)])
    assert agg.diagnostics["C0"].model_dump() == {
        "DS": None, "delta_comp": None, "Ret": None, "MI_d80k": None,
    }  # fmt: skip


def test_ds_is_null_when_nothing_was_grounded_at_d0() -> None:
    agg = aggregate(_three_states({"S1-d0": [MIRAGE_VC], "S1-d80k": [MIRAGE_VC], "S2": [GROUNDED]}))
    assert agg.diagnostics["C0"].DS is None and agg.diagnostics["C0"].Ret is None


def test_cm_minus_c0_deltas() -> None:
    records = _three_states({"S1-d80k": [MIRAGE_VC, MIRAGE_VC]}, cond="C0")
    records += _three_states({"S1-d80k": [GROUNDED, MIRAGE_VC]}, cond="Cm")
    deltas = aggregate(records).deltas
    assert deltas["S1-d80k"]["GC"] == pytest.approx(50.0)
    assert deltas["S1-d80k"]["SC"] == pytest.approx(50.0)
    assert deltas["S1-d80k"]["HR"] is None


def test_custom_state_roles_and_order() -> None:
    records = _three_states({"late": [MIRAGE_VC], "custom-x": [GROUNDED], "early": [GROUNDED]})
    roles = StateRoles(d0="early", mid="unused", deep="late", post="custom-x")
    agg = aggregate(records, roles)
    assert list(agg.states) == ["early", "late", "custom-x"]
    assert pytest.approx(100.0) == agg.diagnostics["C0"].DS
    assert agg.diagnostics["C0"].delta_comp == pytest.approx(1.0)


def test_summary_has_the_issue_shape_with_profile_and_runs() -> None:
    summary = aggregate(_three_states({"S1-d0": [GROUNDED], "S2": [PF]})).summary()
    assert set(summary) == {"scoring", "runs", "states", "diagnostics"}
    assert (summary["scoring"], summary["runs"]) == ("paper", 1)
    cell = summary["states"]["S1-d0"]["C0"]  # type: ignore[index]
    assert set(cell) == {
        "AC", "SC", "VC", "GC", "HR", "WS", "PF", "PF_total", "MI", "OG", "R_tool", "R_none",
        "VC_R_none", "n", "runs", "paths", "path_sources",
    }  # fmt: skip
    assert set(summary["diagnostics"]["C0"]) == {"DS", "delta_comp", "Ret", "MI_d80k"}  # type: ignore[index]


def test_retention_is_the_mean_of_per_run_retention() -> None:
    """Run 0 keeps 1 of 1 d0-grounded probes at d80k, run 1 keeps 0 of 3: Ret = 50, not 25."""
    records = [rec("S1-d0", "a0", GROUNDED, repeat=0), rec("S1-d80k", "a0", GROUNDED, repeat=0)]
    for i in range(3):
        records += [rec("S1-d0", f"a{i}", GROUNDED, repeat=1)]
        records += [rec("S1-d80k", f"a{i}", MIRAGE_VC, repeat=1)]
    agg = aggregate(records)
    assert agg.diagnostics["C0"].Ret == pytest.approx(50.0)
    cross = agg.cross_state["C0"]
    assert [(r.d0_correct, r.kept, r.Ret) for r in cross.ret_runs] == [(1, 1, 100.0), (3, 0, 0.0)]
    assert (cross.ret_kept, cross.ret_d0_correct) == (1, 4)


def test_records_of_two_profiles_are_not_aggregated_together() -> None:
    paper = rec("S1-d0", "a1", GROUNDED)
    lenient = build_record(
        RecordKey("S1-d0", "C0", "a2", 0), GROUNDED, GOLD_YES, RESOLVER, "lenient"
    )
    with pytest.raises(MixedProfilesError, match="mirage rescore DIR --scoring"):
        aggregate([paper, lenient])
