"""PNG figures like the paper's Figures 3-6, drawn with matplotlib's Agg backend.

Above: the report writer. Below: an ``Aggregate``. matplotlib is imported inside the functions
so that importing the report package (and the CLI) stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.aggregate import Aggregate
from harness.metrics import FIGURE_DELTAS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CONDITION_COLOURS = {"C0": "#4c78a8", "Cm": "#e45756"}
FALLBACK_COLOUR = "#888888"


def _figure(width: float = 7.0, height: float = 4.0) -> tuple[Figure, Any]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110)
    return figure, figure.add_subplot(1, 1, 1)


def _save(figure: Figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def _conditions(agg: Aggregate) -> list[str]:
    return sorted({c for conds in agg.states.values() for c in conds})


def _bar_groups(ax: Any, labels: list[str], series: dict[str, list[float]], **style: Any) -> None:
    width = 0.8 / max(len(series), 1)
    for index, (name, values) in enumerate(series.items()):
        positions = [i + (index - (len(series) - 1) / 2) * width for i in range(len(labels))]
        colour = CONDITION_COLOURS.get(name, FALLBACK_COLOUR)
        ax.bar(positions, values, width=width, label=name, color=colour, **style)
    ax.set_xticks(range(len(labels)), labels)


def mi_by_state(agg: Aggregate, path: Path) -> Path:
    """Figure 3: Mirage Index per state (as a proportion)."""
    figure, ax = _figure()
    states = list(agg.states)
    series = {
        cond: [((agg.states[s].get(cond) and agg.states[s][cond].MI) or 0.0) / 100 for s in states]
        for cond in _conditions(agg)
    }
    _bar_groups(ax, states, series)
    ax.set_ylim(0, 1)
    ax.set_ylabel("MI (YES ∧ GC=0, share of recorded answerable calls)")
    ax.set_title("Mirage Index by state")
    ax.legend()
    return _save(figure, path)


def transitions(agg: Aggregate, path: Path) -> Path:
    """Figure 4: grounding transitions S1-d0 → S1-d80k → S2 over shared answerable probes."""
    figure, ax = _figure()
    patterns = list(next(iter(agg.cross_state.values())).transitions) if agg.cross_state else []
    series = {
        cond: [float(cross.transitions[p]) for p in patterns]
        for cond, cross in agg.cross_state.items()
    }
    _bar_groups(ax, patterns, series)
    roles = agg.roles
    ax.set_xlabel(f"{roles.d0} → {roles.deep} → {roles.post}  (✓ grounded, × not / PF)")
    ax.set_ylabel("answerable probes")
    ax.set_title("Evidence-grounding transitions")
    ax.legend()
    return _save(figure, path)


def path_composition(agg: Aggregate, path: Path) -> Path:
    """Figure 5: R_context / R_tool shares of recorded probe calls per state and condition."""
    figure, ax = _figure()
    labels, context, tool, colours = [], [], [], []
    for state, conds in agg.cells.items():
        for cond, detail in conds.items():
            labels.append(f"{state}\n{cond}")
            context.append(detail.path["R_context"] or 0.0)
            tool.append(detail.path["R_tool"] or 0.0)
            colours.append(CONDITION_COLOURS.get(cond, FALLBACK_COLOUR))
    positions = range(len(labels))
    ax.bar(positions, context, color=colours, label="R_context")
    ax.bar(positions, tool, bottom=context, color=colours, hatch="//", alpha=0.6, label="R_tool")
    ax.set_xticks(list(positions), labels, fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of recorded probe calls")
    ax.set_title("Retrieval-path composition (solid R_context, hatched R_tool)")
    ax.legend()
    return _save(figure, path)


def cm_minus_c0(agg: Aggregate, path: Path) -> Path:
    """Figure 6: Cm − C0 deltas of GC, SC, AC and HR per state (percentage points)."""
    figure, ax = _figure()
    states = list(agg.deltas)
    metrics = FIGURE_DELTAS
    width = 0.8 / len(metrics)
    for index, metric in enumerate(metrics):
        values = [agg.deltas[s][metric] or 0.0 for s in states]
        positions = [i + (index - 1.5) * width for i in range(len(states))]
        ax.bar(positions, values, width=width, label=f"Δ{metric}")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(states)), states)
    ax.set_ylabel("Cm − C0 (percentage points)")
    ax.set_title("Effect of retrieval pressure" if states else "Cm − C0: no state ran both")
    ax.legend()
    return _save(figure, path)


FIGURES = {
    "mi_by_state.png": mi_by_state,
    "transitions.png": transitions,
    "path_composition.png": path_composition,
    "cm_minus_c0.png": cm_minus_c0,
}
