"""PNG figures like the paper's Figures 3-6, drawn with matplotlib's Agg backend.

Above: the report writer (one answerer) and the comparison (every answerer on one figure).
Below: ``Aggregate`` objects keyed by answerer label. matplotlib is imported inside the
functions so that importing the report package (and the CLI) stays light.

Every bar series is one (answerer, condition) and is drawn in one style, so the legend shows
exactly what the bars look like; a value that is undefined (an empty denominator) is a gap
marked "n/a", never a zero bar; every figure states its n. Legible at any number of states and
answerers: a summary format's state (``S2@<format>``) is abbreviated on the axis (``S2·a``) and
spelled out in a key under it, legends sit outside the axes, an n is printed on each bar only
where the bar is wide enough for it (else under the state's name), and the figures whose bars
would crowd (paths, Cm − C0) grow a row per bar or a panel per answerer. ``overlapping_labels``
(``harness.kit.report.figures``) checks it; every figure has a caption (``FIGURE_SPECS``).
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.kit.report.figures import new_figure, new_panels, save_figure
from harness.mirage.report.aggregate import Aggregate
from harness.mirage.scoring.metrics import FIGURE_DELTAS
from harness.mirage.trunk.checkpoints import FORMAT_SEPARATOR

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CONDITION_COLOURS = {"C0": "#4c78a8", "Cm": "#e45756"}
MODEL_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d")
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
FALLBACK_COLOUR = "#888888"
CONDITION_HATCHES = {"C0": "", "Cm": ".."}
METRIC_HATCHES = ("", "//", "..", "xx")  # one per FIGURE_DELTAS metric when models share colour
LABEL_POINTS = 6  # the n printed on a bar
KEY_POINTS = 7
DPI = 110
BAR_PIXELS = 14  # the bar width the figures are sized for, so an n fits on each bar
Runs = Mapping[str, Aggregate]  # answerer label ("" for a single-answerer report) -> aggregate


@dataclass(frozen=True)
class StateNames:
    """What a figure calls each state: a summary format's state ``S2@<format>`` by a short name
    (``S2·a``), spelled out, with what wrote its summary where known, in ``key``."""

    short: dict[str, str]
    key: list[str] = field(default_factory=list)

    def of(self, state: str) -> str:
        return self.short.get(state, state)

    @property
    def key_text(self) -> str:
        return "\n".join(self.key)


def state_names(states: Sequence[str], described: Mapping[str, str] | None = None) -> StateNames:
    """Short names for ``states``; ``described``: state -> what wrote its summary ("verbatim by
    reference/keep-charts"), shown in the key (also for a plain ``S2``, to tell it from an arm
    of another summarizer)."""
    described = described or {}
    short: dict[str, str] = {}
    key: list[str] = []
    arms: dict[str, int] = {}
    for state in dict.fromkeys(states):
        base, separator, _ = state.partition(FORMAT_SEPARATOR)
        if not separator:
            short[state] = state
            if state in described:
                key.append(f"{state}: {described[state]}")
            continue
        index = arms.get(base, 0)
        arms[base] = index + 1
        letter = string.ascii_lowercase[index] if index < 26 else str(index + 1)
        short[state] = f"{base}·{letter}"
        what = f" ({described[state]})" if state in described else ""
        key.append(f"{short[state]} = {state}{what}")
    return StateNames(short, key)


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


def _states(runs: Runs) -> list[str]:
    states: list[str] = []
    for agg in runs.values():
        states += [s for s in agg.states if s not in states]
    return states


def _names(runs: Runs, names: StateNames | None) -> StateNames:
    return names if names is not None else state_names(_states(runs))


def _bar_figure(groups: int, series: int, names: StateNames) -> tuple[Figure, Any]:
    """A figure wide enough for ``groups`` × ``series`` bars of ``BAR_PIXELS`` (at most 18
    inches), with room for a legend on the right and the state key under the axes."""
    bars_inches = groups * series * BAR_PIXELS / 0.8 / DPI
    width = min(18.0, max(7.0, bars_inches + (3.0 if series > 2 else 1.5)))
    height = 4.0 + 0.16 * len(names.key)
    return new_figure(width, height)


def _offsets(count: int) -> list[float]:
    width = 0.8 / max(count, 1)
    return [(index - (count - 1) / 2) * width for index in range(count)]


def _gap(value: float | None) -> float:
    return math.nan if value is None else value


def _mark_gaps(
    ax: Any, positions: list[float], values: list[float], recorded: list[bool] | None = None
) -> None:
    """ "n/a" where a recorded bar's value is undefined."""
    for x, value, seen in zip(positions, values, recorded or [True] * len(values), strict=True):
        if math.isnan(value) and seen:
            ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=LABEL_POINTS, rotation=90)


@dataclass(frozen=True)
class Bar:
    """One bar: its height (None: a gap), its n, and a 95% interval around it if it has one."""

    height: float | None
    n: int
    interval: tuple[float, float] | None = None
    recorded: bool = True  # False: the answerer never ran this state (no bar, no "n/a")

    @classmethod
    def absent(cls) -> Bar:
        return cls(None, 0, recorded=False)


def _grouped_bars(
    ax: Any,
    states: list[str],
    ticks: list[str],
    series: list[Series],
    value: Callable[[Series, str], Bar],
) -> list[tuple[list[float], list[Bar]]]:
    """One bar per (series, state), error bars where a bar has an interval; returns each
    series' positions and bars for ``_label_counts``."""
    width = 0.8 / max(len(series), 1)
    drawn = []
    for offset, item in zip(_offsets(len(series)), series, strict=True):
        positions = [i + offset for i in range(len(states))]
        bars = [value(item, state) for state in states]
        heights = [_gap(b.height) for b in bars]
        errors = [
            (h - b.interval[0], b.interval[1] - h) if b.interval and not math.isnan(h) else (0, 0)
            for h, b in zip(heights, bars, strict=True)
        ]
        with_intervals = any(b.interval for b in bars)
        ax.bar(
            positions, heights, width=width, label=item.label, color=item.colour,
            hatch=item.hatch, edgecolor="black", linewidth=0.4,
            yerr=list(zip(*errors, strict=True)) if with_intervals else None,
            error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "#333333"},
        )  # fmt: skip
        _mark_gaps(ax, positions, heights, [b.recorded for b in bars])
        drawn.append((positions, bars))
    ax.set_xticks(range(len(states)), ticks, fontsize=8)
    ax.set_xlim(-0.5, len(states) - 0.5)
    return drawn


def _bar_pixels(figure: Figure, ax: Any, width: float) -> float:
    """How many pixels a bar of ``width`` (data units) spans once the figure is laid out."""
    figure.tight_layout()
    left, right = ax.transData.transform([(0.0, 0.0), (width, 0.0)])
    return float(abs(right[0] - left[0]))


def _label_counts(
    figure: Figure,
    ax: Any,
    states: list[str],
    names: StateNames,
    drawn: list[tuple[list[float], list[Bar]]],
) -> None:
    """Each bar's n at its foot, where the bars are wide enough for the text; otherwise the
    n (or its range) under each state's name."""
    width = 0.8 / max(len(drawn), 1)
    text_pixels = 1.3 * LABEL_POINTS * DPI / 72
    if _bar_pixels(figure, ax, width) >= text_pixels:
        for positions, bars in drawn:
            for x, bar in zip(positions, bars, strict=True):
                if bar.height is not None:
                    ax.annotate(
                        f"n={bar.n}", (x, 0), xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", rotation=90, fontsize=LABEL_POINTS,
                    )  # fmt: skip
        return
    ticks = []
    for index, state in enumerate(states):
        counts = sorted({bars[index].n for _, bars in drawn if bars[index].recorded})
        shown = "–" if not counts else str(counts[0])
        if len(counts) > 1:
            shown = f"{counts[0]}–{counts[-1]}"
        ticks.append(f"{names.of(state)}\nn={shown}")
    ax.set_xticks(range(len(states)), ticks, fontsize=8)


def _legend_outside(ax: Any, **kwargs: Any) -> None:
    ax.legend(fontsize=KEY_POINTS, loc="upper left", bbox_to_anchor=(1.01, 1.0), **kwargs)


def _state_key(ax: Any, names: StateNames, prefix: str = "") -> None:
    """The states' key (and any axis text before it) under the axes, left-aligned."""
    lines = [line for line in (prefix, names.key_text) if line]
    if lines:
        ax.set_xlabel("\n".join(lines), loc="left", fontsize=KEY_POINTS)


def _cell(agg: Aggregate, state: str, cond: str) -> Any:
    return agg.states.get(state, {}).get(cond)


def _rate_by_state(
    runs: Runs, names: StateNames | None, metric: str, denominator: str, ylabel: str, title: str
) -> Figure:
    """A rate per state as a proportion with its pooled Wilson 95% interval; n = the metric's
    pooled denominator per bar."""
    names = _names(runs, names)
    states, series = _states(runs), series_of(runs)
    figure, ax = _bar_figure(len(states), len(series), names)

    def value(item: Series, state: str) -> Bar:
        agg = runs[item.model]
        cell = _cell(agg, state, item.condition)
        if cell is None:
            return Bar.absent()
        detail = agg.cells[state][item.condition]
        rate = getattr(cell, metric)
        interval = detail.intervals_pooled.get(metric)
        bounds = None if interval is None else (interval.low / 100, interval.high / 100)
        return Bar(None if rate is None else rate / 100, getattr(detail, denominator), bounds)

    drawn = _grouped_bars(ax, states, [names.of(s) for s in states], series, value)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _legend_outside(ax)
    _state_key(ax, names)
    _label_counts(figure, ax, states, names, drawn)
    return figure


def mi_by_state(runs: Runs, names: StateNames | None = None) -> Figure:
    """Figure 3: Mirage Index per state (as a proportion); n = recorded answerable probes."""
    return _rate_by_state(
        runs, names, "MI", "recorded_answerable",
        "MI (share of recorded answerable calls)",
        "Mirage Index by state (n = recorded answerable probes)",
    )  # fmt: skip


def gc_by_state(runs: Runs, names: StateNames | None = None) -> Figure:
    """Grounded correctness per state (as a proportion); n = parsed answerable probes."""
    return _rate_by_state(
        runs, names, "GC", "parsed_answerable", "GC (share of parsed answerable)",
        "Grounded correctness by state (n = parsed answerable probes)",
    )  # fmt: skip


def gc_headline(runs: Runs, names: StateNames | None = None) -> Figure:
    """The comparison's headline: GC per answerer at each of the profile's states (the
    summary-format arms have their own figures), one panel per condition, each point with its
    pooled Wilson 95% interval; the legend in a row of its own under the panels."""
    from matplotlib.lines import Line2D

    states = [s for s in _states(runs) if FORMAT_SEPARATOR not in s]
    conditions = sorted(
        {c for agg in runs.values() for conds in agg.states.values() for c in conds}
    )
    figure, _ = new_figure(6.0, 3.6)
    figure.clear()
    grid = figure.add_gridspec(2, max(len(conditions), 1), height_ratios=[5, 1])
    axes = [figure.add_subplot(grid[0, column]) for column in range(max(len(conditions), 1))]
    count = max(len(runs), 1)
    handles = []
    for index, (label, agg) in enumerate(runs.items()):
        colour = MODEL_COLOURS[index % len(MODEL_COLOURS)]
        marker = MODEL_MARKERS[index % len(MODEL_MARKERS)]
        offset = (index - (count - 1) / 2) * min(0.12, 0.6 / count)
        plotted = False
        for ax, cond in zip(axes, conditions, strict=False):
            xs, ys, below, above = [], [], [], []
            for position, state in enumerate(states):
                cell = _cell(agg, state, cond)
                if cell is None or cell.GC is None:
                    continue
                interval = agg.cells[state][cond].intervals_pooled.get("GC")
                xs.append(position + offset)
                ys.append(cell.GC)
                below.append(0.0 if interval is None else max(cell.GC - interval.low, 0.0))
                above.append(0.0 if interval is None else max(interval.high - cell.GC, 0.0))
            plotted = plotted or bool(xs)
            ax.errorbar(
                xs, ys, yerr=[below, above], color=colour, marker=marker, markersize=4,
                linewidth=1.2, elinewidth=0.8, capsize=2,
            )  # fmt: skip
        shown = label or "GC"
        if not plotted:
            shown += " (no GC: no parsed answerable probe)"
        handles.append(Line2D([], [], color=colour, marker=marker, label=shown))
    for column, (ax, cond) in enumerate(zip(axes, conditions, strict=False)):
        ax.set_xticks(range(len(states)), states, fontsize=8)
        ax.set_xlim(-0.5, len(states) - 0.5)
        ax.set_ylim(-5, 105)
        ax.set_title(cond, fontsize=10)
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
        ax.tick_params(axis="y", labelsize=8, labelleft=column == 0)
    axes[0].set_ylabel("GC % (95% interval)", fontsize=9)
    legend_row = figure.add_subplot(grid[1, :])
    legend_row.axis("off")
    if handles:
        legend_row.legend(
            handles=handles, loc="center", ncol=2, fontsize=KEY_POINTS + 1, frameon=False
        )
    return figure


def _patterns(runs: Runs) -> list[str]:
    for agg in runs.values():
        if agg.cross_state:
            return list(next(iter(agg.cross_state.values())).transitions)
    return []


def transitions(runs: Runs, names: StateNames | None = None) -> Figure:
    """Figure 4: grounding transitions S1-d0 → S1-d80k → S2 over shared answerable probes."""
    series = [
        Series(s.model, s.condition, s.colour, s.hatch,
               f"{s.label} (n={runs[s.model].cross_state[s.condition].transitions_shared})")
        for s in series_of(runs)
        if s.condition in runs[s.model].cross_state
    ]  # fmt: skip
    patterns = _patterns(runs)
    figure, ax = _bar_figure(len(patterns), len(series), StateNames({}))

    def value(item: Series, pattern: str) -> Bar:
        cross = runs[item.model].cross_state[item.condition]
        return Bar(float(cross.transitions[pattern]), cross.transitions_shared)

    _grouped_bars(ax, patterns, patterns, series, value)
    roles = next(iter(runs.values())).roles if runs else None
    if roles is not None:
        ax.set_xlabel(f"{roles.d0} → {roles.deep} → {roles.post}  (✓ grounded, × not / PF)")
    ax.set_ylabel("answerable probes")
    ax.set_title("Evidence-grounding transitions (n = probes recorded in all three states)")
    _legend_outside(ax)
    return figure


PATH_STYLES = {
    "R_context": ("#4c78a8", ""),
    "R_boot": ("#72b7b2", ".."),
    "R_tool": ("#f58518", "//"),
    "R_none": ("#e45756", "xx"),
}
"""Figure 5's colour and hatch per retrieval path (the hatch keeps it readable in grey)."""
ROW_INCHES = 0.2  # one bar of Figure 5 (a row per answerer, condition and state)


def path_composition(runs: Runs, names: StateNames | None = None) -> Figure:
    """Figure 5: the four retrieval-path shares of recorded probe calls, one horizontal bar per
    (answerer, condition, state), stacked in priority order R_context, R_boot, R_tool, R_none."""
    from matplotlib.patches import Patch

    names = _names(runs, names)
    labels: list[str] = []
    bars: list[dict[str, float]] = []
    for item in series_of(runs):
        agg = runs[item.model]
        for state, conds in agg.states.items():
            cell = conds.get(item.condition)
            if cell is None:
                continue
            labels.append(f"{item.label} · {names.of(state)} (n={cell.n})")
            bars.append({path: _gap(p.share) for path, p in cell.paths.items()})
    height = 1.8 + ROW_INCHES * len(labels) + 0.16 * len(names.key)
    figure, ax = new_figure(9.0, height)
    positions = list(range(len(labels)))
    left = [0.0] * len(labels)
    for path, (colour, hatch) in PATH_STYLES.items():
        widths = [bar.get(path, math.nan) for bar in bars]
        ax.barh(positions, widths, left=left, color=colour, hatch=hatch, label=path,
                edgecolor="black", linewidth=0.4, height=0.7)  # fmt: skip
        left = [b + (0.0 if math.isnan(w) else w) for b, w in zip(left, widths, strict=True)]
    for y, bar in zip(positions, bars, strict=True):
        if math.isnan(bar.get("R_context", math.nan)):
            ax.text(1, y, "n/a", va="center", fontsize=LABEL_POINTS)
    handles = [
        Patch(facecolor=colour, hatch=hatch, edgecolor="black", label=path)
        for path, (colour, hatch) in PATH_STYLES.items()
    ]
    ax.set_yticks(positions, labels, fontsize=KEY_POINTS)
    ax.invert_yaxis()  # the first answerer's first state on top
    ax.set_xlim(0, 100)
    ax.set_title("Retrieval-path composition (n = recorded probes per bar)")
    _state_key(ax, names, "% of recorded probe calls")
    ax.legend(handles=handles, fontsize=KEY_POINTS, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure


def cm_minus_c0(runs: Runs, names: StateNames | None = None) -> Figure:
    """Figure 6: Cm − C0 deltas of GC, SC, AC and HR per state (percentage points), one panel
    per answerer."""
    names = _names(runs, names)
    states = [s for s in _states(runs) if any(s in agg.deltas for agg in runs.values())]
    panels = max(len(runs), 1)
    per_panel = len(FIGURE_DELTAS)
    width = min(18.0, max(7.0, len(states) * per_panel * BAR_PIXELS / 0.8 / DPI + 2.5))
    height = 0.6 + 2.6 * panels + 0.16 * len(names.key)
    figure, axes = new_panels(width, height, rows=panels)
    for ax, (model, agg) in zip(axes, runs.items(), strict=False):
        series = [
            Series(model, m, MODEL_COLOURS[j % len(MODEL_COLOURS)], METRIC_HATCHES[j], f"Δ{m}")
            for j, m in enumerate(FIGURE_DELTAS)
        ]

        def value(item: Series, state: str, agg: Aggregate = agg) -> Bar:
            deltas = agg.deltas.get(state)
            if deltas is None:
                return Bar.absent()
            return Bar(deltas[item.condition], agg.states[state]["Cm"].n)

        drawn = _grouped_bars(ax, states, [names.of(s) for s in states], series, value)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylim(-110, 110)
        ax.set_ylabel("Cm − C0 (pp)", fontsize=8)
        what = f"{model}: " if model else ""
        ax.set_title(f"{what}effect of retrieval pressure (n = Cm probes)", fontsize=10)
        _legend_outside(ax)
        _label_counts(figure, ax, states, names, drawn)
    if not states:
        axes[0].set_title("Cm − C0: no state ran both")
    _state_key(axes[-1], names)
    return figure


@dataclass(frozen=True)
class FigureSpec:
    """One figure file: how it is drawn and its caption (what it shows, how to read it)."""

    name: str
    draw: Callable[[Runs, StateNames | None], Figure]
    caption: str


FIGURE_SPECS: tuple[FigureSpec, ...] = (
    FigureSpec(
        "gc_headline.png", gc_headline,
        "GC (grounded and correct: the right value citing the right source) of each answerer "
        "at each state of the profile, one panel per condition; the bars are 95% Wilson "
        "intervals on the pooled probes. A line that falls from S1-d0 to the deep state lost "
        "its evidence with depth; the step to S2 is what compaction did.",
    ),
    FigureSpec(
        "gc_by_state.png", gc_by_state,
        "GC per state, summary-format states (S2·a, …; spelled out in the key) included, one "
        "bar per answerer and condition (hatched: Cm) with its 95% Wilson interval; n = parsed "
        "answerable probes. Compare a bar with the same answerer's S1-d80k bar to read "
        "Δcomp.",
    ),
    FigureSpec(
        "mi_by_state.png", mi_by_state,
        "Mirage Index per state: the share of answerable probes answered YES without grounding "
        "(lower is better), with 95% Wilson intervals; n = recorded answerable probes (a parse "
        "failure counts as no mirage).",
    ),
    FigureSpec(
        "transitions.png", transitions,
        "How each answerable probe's grounding moves S1-d0 → deep → S2 (✓ grounded, × not or "
        "PF); n = probes recorded in all three states. ✓✓✓ kept its evidence throughout; ✓×✓ "
        "lost it with depth and got it back after compaction.",
    ),
    FigureSpec(
        "path_composition.png", path_composition,
        "Which access path each recorded probe had (R_context in the active context, R_boot "
        "loaded at start, R_tool a retrieval call, R_none none), one row per answerer, "
        "condition and state; a long red R_none segment with high GC would mean answers "
        "nothing grounds.",
    ),
    FigureSpec(
        "cm_minus_c0.png", cm_minus_c0,
        "What retrieval pressure (Cm: the prompt asks to recall first) changes against C0, "
        "in percentage points per state, one panel per answerer; above zero Cm helps. "
        "n = Cm probes per bar.",
    ),
)  # fmt: skip
FIGURES: dict[str, Callable[..., Figure]] = {spec.name: spec.draw for spec in FIGURE_SPECS}
CAPTIONS: dict[str, str] = {spec.name: spec.caption for spec in FIGURE_SPECS}
HEADLINE_FIGURE = "gc_headline.png"


def draw_figures(
    runs: Runs, directory: Path, described: Mapping[str, str] | None = None
) -> list[Path]:
    """Every figure into ``directory`` (the Cm − C0 figure only when some state ran both; the
    headline only for a comparison); ``described``: state -> what wrote its summary, for the
    state key."""
    directory.mkdir(parents=True, exist_ok=True)
    names = state_names(_states(runs), described)
    with_deltas = any(agg.deltas for agg in runs.values())
    comparison = len(runs) > 1 or "" not in runs
    return [
        save_figure(spec.draw(runs, names), directory / spec.name)
        for spec in FIGURE_SPECS
        if (spec.name != "cm_minus_c0.png" or with_deltas)
        and (spec.name != HEADLINE_FIGURE or comparison)
    ]
