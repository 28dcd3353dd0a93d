"""PNG figures like the paper's Figures 3-6, drawn with matplotlib's Agg backend.

Above: the report writer (one answerer) and the comparison (every answerer on one figure).
Below: ``Aggregate`` objects keyed by answerer label. matplotlib is imported inside the
functions so that importing the report package (and the CLI) stays light.

Every bar series is one (answerer, condition) and is drawn in one style, so the legend shows
exactly what the bars look like; a value that is undefined (an empty denominator) is a gap
marked "n/a", never a zero bar; every figure states its n.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.kit.report.figures import new_figure, save_figure
from harness.mirage.report.aggregate import Aggregate
from harness.mirage.scoring.metrics import FIGURE_DELTAS
from harness.mirage.trunk.checkpoints import FORMAT_SEPARATOR

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CONDITION_COLOURS = {"C0": "#4c78a8", "Cm": "#e45756"}
MODEL_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d")
FALLBACK_COLOUR = "#888888"
CONDITION_HATCHES = {"C0": "", "Cm": ".."}
METRIC_HATCHES = ("", "//", "..", "xx")  # one per FIGURE_DELTAS metric when models share colour
Runs = Mapping[str, Aggregate]  # answerer label ("" for a single-answerer report) -> aggregate


@dataclass(frozen=True)
class Series:
    """One (answerer, condition) bar series and how it is drawn (in Figure 6 ``condition``
    holds the metric whose Cm − C0 delta the series shows)."""

    model: str
    condition: str
    colour: str
    hatch: str
    title: str = ""  # the legend entry, when it is not "answerer · condition"

    @property
    def label(self) -> str:
        if self.title:
            return self.title
        return f"{self.model} · {self.condition}" if self.model else self.condition


def series_of(runs: Runs) -> list[Series]:
    """By condition colour for one answerer; by answerer colour (condition as hatch) for several."""
    several = len(runs) > 1
    found = []
    for index, (model, agg) in enumerate(runs.items()):
        for cond in sorted({c for conds in agg.states.values() for c in conds}):
            if several:
                colour = MODEL_COLOURS[index % len(MODEL_COLOURS)]
                hatch = CONDITION_HATCHES.get(cond, "xx")
            else:
                colour, hatch = CONDITION_COLOURS.get(cond, FALLBACK_COLOUR), ""
            found.append(Series(model, cond, colour, hatch))
    return found


def _width(runs: Runs) -> float:
    return 7.0 if len(runs) <= 1 else min(16.0, 6.0 + 1.5 * len(runs))


def _states(runs: Runs) -> list[str]:
    states: list[str] = []
    for agg in runs.values():
        states += [s for s in agg.states if s not in states]
    return states


def _offsets(count: int) -> list[float]:
    width = 0.8 / max(count, 1)
    return [(index - (count - 1) / 2) * width for index in range(count)]


def _gap(value: float | None) -> float:
    return math.nan if value is None else value


def _mark_gaps(ax: Any, positions: list[float], values: list[float]) -> None:
    for x, value in zip(positions, values, strict=True):
        if math.isnan(value):
            ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)


def _grouped_bars(
    ax: Any,
    labels: list[str],
    series: list[Series],
    value: Callable[[Series, str], tuple[float | None, int]],
    n_per_bar: bool = True,
) -> None:
    """One bar per (series, label); ``value`` gives the height (None: a gap) and its n."""
    width = 0.8 / max(len(series), 1)
    for offset, item in zip(_offsets(len(series)), series, strict=True):
        positions = [i + offset for i in range(len(labels))]
        heights, counts = zip(*(value(item, label) for label in labels), strict=True)
        bars_heights = [_gap(h) for h in heights]
        bars = ax.bar(
            positions, bars_heights, width=width, label=item.label, color=item.colour,
            hatch=item.hatch, edgecolor="black", linewidth=0.4,
        )  # fmt: skip
        if n_per_bar:
            ax.bar_label(bars, [f"n={n}" for n in counts], fontsize=6, rotation=90, padding=2)
        _mark_gaps(ax, positions, bars_heights)
    small = any(FORMAT_SEPARATOR in label for label in labels)
    ax.set_xticks(
        range(len(labels)), [tick_label(label) for label in labels], fontsize=7 if small else None
    )


def tick_label(state: str) -> str:
    """A state on two lines when a summary format names it (``S2@free-form``)."""
    return state.replace(FORMAT_SEPARATOR, "\n" + FORMAT_SEPARATOR, 1)


def _cell(agg: Aggregate, state: str, cond: str) -> Any:
    return agg.states.get(state, {}).get(cond)


def _rate_by_state(runs: Runs, metric: str, denominator: str, ylabel: str) -> Figure:
    """A rate per state as a proportion; n = the metric's pooled denominator per bar."""
    figure, ax = new_figure(_width(runs))

    def value(item: Series, state: str) -> tuple[float | None, int]:
        agg = runs[item.model]
        cell = _cell(agg, state, item.condition)
        if cell is None:
            return None, 0
        rate = getattr(cell, metric)
        n = getattr(agg.cells[state][item.condition], denominator)
        return (None if rate is None else rate / 100), n

    _grouped_bars(ax, _states(runs), series_of(runs), value)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    return figure


def mi_by_state(runs: Runs) -> Figure:
    """Figure 3: Mirage Index per state (as a proportion); n = recorded answerable probes."""
    ylabel = "MI (YES ∧ GC=0, share of recorded answerable calls)"
    figure = _rate_by_state(runs, "MI", "recorded_answerable", ylabel)
    figure.axes[0].set_title("Mirage Index by state (n = recorded answerable probes per bar)")
    return figure


def gc_by_state(runs: Runs) -> Figure:
    """Grounded correctness per state (as a proportion); n = parsed answerable probes."""
    figure = _rate_by_state(runs, "GC", "parsed_answerable", "GC (share of parsed answerable)")
    figure.axes[0].set_title("Grounded correctness by state (n = parsed answerable per bar)")
    return figure


def _patterns(runs: Runs) -> list[str]:
    for agg in runs.values():
        if agg.cross_state:
            return list(next(iter(agg.cross_state.values())).transitions)
    return []


def transitions(runs: Runs) -> Figure:
    """Figure 4: grounding transitions S1-d0 → S1-d80k → S2 over shared answerable probes."""
    figure, ax = new_figure(_width(runs))
    series = [
        Series(s.model, s.condition, s.colour, s.hatch,
               f"{s.label} (n={runs[s.model].cross_state[s.condition].transitions_shared})")
        for s in series_of(runs)
        if s.condition in runs[s.model].cross_state
    ]  # fmt: skip

    def value(item: Series, pattern: str) -> tuple[float | None, int]:
        cross = runs[item.model].cross_state[item.condition]
        return float(cross.transitions[pattern]), cross.transitions_shared

    _grouped_bars(ax, _patterns(runs), series, value, n_per_bar=False)
    roles = next(iter(runs.values())).roles if runs else None
    if roles is not None:
        ax.set_xlabel(f"{roles.d0} → {roles.deep} → {roles.post}  (✓ grounded, × not / PF)")
    ax.set_ylabel("answerable probes")
    ax.set_title("Evidence-grounding transitions (n = probes recorded in all three states)")
    ax.legend(fontsize=7)
    return figure


PATH_STYLES = {
    "R_context": ("#4c78a8", ""),
    "R_boot": ("#72b7b2", ".."),
    "R_tool": ("#f58518", "//"),
    "R_none": ("#e45756", "xx"),
}
"""Figure 5's colour and hatch per retrieval path (the hatch keeps it readable in grey)."""


def path_composition(runs: Runs) -> Figure:
    """Figure 5: the four retrieval-path shares of recorded probe calls, stacked per
    (answerer, condition, state) bar in priority order R_context, R_boot, R_tool, R_none."""
    from matplotlib.patches import Patch

    figure, ax = new_figure(_width(runs) + 1)
    labels: list[str] = []
    bars: list[dict[str, float]] = []
    for item in series_of(runs):
        agg = runs[item.model]
        for state, conds in agg.states.items():
            cell = conds.get(item.condition)
            if cell is None:
                continue
            labels.append(f"{item.label}\n{tick_label(state)}\nn={cell.n}")
            bars.append({path: _gap(p.share) for path, p in cell.paths.items()})
    positions = list(range(len(labels)))
    bottom = [0.0] * len(labels)
    for path, (colour, hatch) in PATH_STYLES.items():
        heights = [bar.get(path, math.nan) for bar in bars]
        ax.bar(positions, heights, bottom=bottom, color=colour, hatch=hatch, label=path,
               edgecolor="black", linewidth=0.4)  # fmt: skip
        bottom = [b + (0.0 if math.isnan(h) else h) for b, h in zip(bottom, heights, strict=True)]
    _mark_gaps(ax, [float(p) for p in positions], [bar.get("R_context", math.nan) for bar in bars])
    handles = [
        Patch(facecolor=colour, hatch=hatch, edgecolor="black", label=path)
        for path, (colour, hatch) in PATH_STYLES.items()
    ]
    ax.set_xticks(positions, labels, fontsize=6)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of recorded probe calls")
    ax.set_title("Retrieval-path composition (n = recorded probes per bar)")
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def cm_minus_c0(runs: Runs) -> Figure:
    """Figure 6: Cm − C0 deltas of GC, SC, AC and HR per state (percentage points)."""
    figure, ax = new_figure(_width(runs))
    several = len(runs) > 1
    series = [
        Series(model, m, MODEL_COLOURS[i % len(MODEL_COLOURS)], METRIC_HATCHES[j],
               f"{model} · Δ{m}")
        if several
        else Series(model, m, MODEL_COLOURS[j], "", f"Δ{m}")
        for i, model in enumerate(runs) for j, m in enumerate(FIGURE_DELTAS)
    ]  # fmt: skip
    states = [s for s in _states(runs) if any(s in agg.deltas for agg in runs.values())]

    def value(item: Series, state: str) -> tuple[float | None, int]:
        agg = runs[item.model]
        deltas = agg.deltas.get(state)
        if deltas is None:
            return None, 0
        return deltas[item.condition], agg.states[state]["Cm"].n

    _grouped_bars(ax, states, series, value)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("Cm − C0 (percentage points)")
    title = "Effect of retrieval pressure (n = Cm probes per bar)"
    ax.set_title(title if states else "Cm − C0: no state ran both")
    ax.legend(fontsize=7)
    return figure


FIGURES: dict[str, Callable[[Runs], Figure]] = {
    "gc_by_state.png": gc_by_state,
    "mi_by_state.png": mi_by_state,
    "transitions.png": transitions,
    "path_composition.png": path_composition,
    "cm_minus_c0.png": cm_minus_c0,
}


def draw_figures(runs: Runs, directory: Path) -> list[Path]:
    """Every figure into ``directory`` (the Cm − C0 figure only when some state ran both)."""
    directory.mkdir(parents=True, exist_ok=True)
    with_deltas = any(agg.deltas for agg in runs.values())
    return [
        save_figure(draw(runs), directory / name)
        for name, draw in FIGURES.items()
        if name != "cm_minus_c0.png" or with_deltas
    ]
