"""Figures: legends show what the bars look like, undefined values are gaps, every figure
states its n, and several answerers share one figure."""

from __future__ import annotations

import math

from matplotlib.colors import to_hex

from harness.mirage.probing.records import RecordKey, build_record
from harness.mirage.report.aggregate import Aggregate, aggregate
from harness.mirage.report.figures import (
    cm_minus_c0,
    gc_by_state,
    mi_by_state,
    path_composition,
    transitions,
)
from harness.mirage.scoring import Gold, KnownIdResolver

RESOLVER = KnownIdResolver(["chart_1"])
ANSWERABLE = Gold(answerable="YES", source="chart_1", answer="42", answer_type="numeric")
UNANSWERABLE = Gold(answerable="NO", artifact="chart_1")
GROUNDED = "ANSWERABLE=YES\nSOURCE=chart_1\nANSWER=42"
MIRAGE = "ANSWERABLE=YES\nSOURCE=NONE\nANSWER=41"


def _aggregate(reply: str, only_unanswerable_at: str | None = None) -> Aggregate:
    records = []
    for state in ("S1-d0", "S1-d80k", "S2"):
        for cond in ("C0", "Cm"):
            calls = [{"name": "artifact_recall", "executed": True}] if cond == "Cm" else []
            golds = {"u": UNANSWERABLE}
            if state != only_unanswerable_at:
                golds["a"] = ANSWERABLE
            for qid, gold in golds.items():
                text = reply if gold is ANSWERABLE else "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
                key = RecordKey(state, cond, qid, 0)
                records.append(build_record(key, text, gold, RESOLVER, tool_calls=calls))
    return aggregate(records)


def _bar_colours(ax: object) -> set[str]:
    return {to_hex(p.get_facecolor(), keep_alpha=False) for p in ax.patches}  # type: ignore[attr-defined]


def test_every_legend_entry_looks_like_bars_on_the_figure() -> None:
    runs = {"": _aggregate(GROUNDED)}
    for draw in (gc_by_state, mi_by_state, transitions, path_composition, cm_minus_c0):
        ax = draw(runs).axes[0]
        legend = ax.get_legend()
        entries = [to_hex(h.get_facecolor(), keep_alpha=False) for h in legend.legend_handles]
        coloured = [c for c in entries if c != "#ffffff"]  # pattern keys (solid/hatched)
        assert coloured and set(coloured) <= _bar_colours(ax), draw.__name__
        assert "n" in ax.get_title() or "n=" in "".join(t.get_text() for t in legend.get_texts())


def test_path_composition_stacks_the_four_paths() -> None:
    """C0 probes made no call and reported no context: R_none; Cm probes recalled: R_tool.
    Each bar (a row: answerer, condition, state) is four stacked segments summing to 100 in
    priority order."""
    ax = path_composition({"": _aggregate(GROUNDED)}).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["R_context", "R_boot", "R_tool", "R_none"]
    bars = len(ax.get_yticks())
    assert bars == 6  # (C0, Cm) x three states
    segments = [ax.patches[i * bars:(i + 1) * bars] for i in range(4)]  # fmt: skip
    widths = [[p.get_width() for p in path] for path in segments]
    assert widths[3][:3] == [100.0] * 3 and widths[2][3:] == [100.0] * 3  # R_none / R_tool
    assert [sum(column) for column in zip(*widths, strict=True)] == [100.0] * bars
    assert [p.get_x() for p in segments[3][:3]] == [0.0] * 3  # nothing before R_none at C0


def test_an_undefined_value_is_a_gap_not_a_zero() -> None:
    runs = {"": _aggregate(MIRAGE, only_unanswerable_at="S1-d80k")}
    ax = mi_by_state(runs).axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert sum(math.isnan(h) for h in heights) == 2  # C0 and Cm at S1-d80k: no answerable probe
    assert [h for h in heights if not math.isnan(h)] == [1.0] * 4
    assert "n/a" in [t.get_text() for t in ax.texts]


def test_several_answerers_share_one_figure_with_one_colour_each() -> None:
    runs = {"alpha": _aggregate(GROUNDED), "beta": _aggregate(MIRAGE)}
    ax = mi_by_state(runs).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["alpha · C0", "alpha · Cm", "beta · C0", "beta · Cm"]
    handles = ax.get_legend().legend_handles
    assert handles[0].get_facecolor() == handles[1].get_facecolor()
    assert handles[0].get_hatch() != handles[1].get_hatch()
    assert handles[0].get_facecolor() != handles[2].get_facecolor()
