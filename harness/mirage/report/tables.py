"""Markdown tables shaped like the paper's Tables 1, 2 and 9, plus diagnostics tables.

Above: the report writer and the CLI (which prints Table 1). Below: an ``Aggregate``.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.kit.report.tables import DASH, fmt, markdown_table
from harness.mirage.probing.retrieval_paths import RETRIEVAL_PATHS
from harness.mirage.report.aggregate import Aggregate, GroundingSummary
from harness.mirage.scoring.metrics import (
    DELTA_METRICS,
    DIAGNOSTICS,
    HEADLINE_INTERVALS,
    HEADLINE_SPREAD,
    TABLE1_COLUMNS,
    get_metric,
)


def table1(agg: Aggregate) -> str:
    """State x condition metrics; percentages (means over runs) except PF (mean count per run)
    and n (recorded probes)."""
    rows = []
    for cond in sorted({c for conds in agg.states.values() for c in conds}):
        for state, conds in agg.states.items():
            if cond in conds:
                values = conds[cond].model_dump()
                cells = [get_metric(c).render_percent(values[c]) for c in TABLE1_COLUMNS]
                rows.append([cond, state, *cells])
    headings = [get_metric(c).heading for c in TABLE1_COLUMNS]
    return markdown_table(["Cond.", "State", *headings], rows)


def table2(agg: Aggregate) -> str:
    """Cross-state diagnostics on one scale: DS, Ret, MI_d80k in percent; Δcomp and OG in
    percentage points (the paper prints those two as fractions: divide by 100)."""
    states = list(agg.states)
    rows = []
    for cond, diag in agg.diagnostics.items():
        ogs = [agg.states[s].get(cond) for s in states]
        og_cells = [get_metric("OG").render_percent(None if c is None else c.OG) for c in ogs]
        values = diag.model_dump()
        diagnostics = [get_metric(name).render_percent(values[name]) for name in DIAGNOSTICS]
        rows.append([cond, *diagnostics, *og_cells])
    headings = [get_metric(name).heading for name in DIAGNOSTICS]
    header = ["Cond.", *headings, *(f"OG pp {s}" for s in states)]
    return markdown_table(header, rows)


def intervals_table(agg: Aggregate, metrics: Sequence[str] = HEADLINE_INTERVALS) -> str:
    """Wilson 95% intervals (Table 9 shape) per run for the headline metrics of every cell;
    with several runs, a row labelled "pooled" adds the interval on the pooled counts."""
    rows = []
    for state, conds in agg.cells.items():
        for cond, detail in conds.items():
            for metric in metrics:
                labelled = [
                    (f"run {run.repeat}" if len(detail.runs) > 1 else "", run.intervals[metric])
                    for run in detail.runs
                ]
                if len(detail.runs) > 1:
                    labelled.append(("pooled", detail.intervals_pooled[metric]))
                for label, interval in labelled:
                    if interval is None:
                        continue
                    rows.append(
                        [
                            f"{cond} {metric}, {state}" + (f" ({label})" if label else ""),
                            f"{interval.k}/{interval.n}",
                            f"{interval.rate:.1f}%",
                            f"[{interval.low:.1f}, {interval.high:.1f}]",
                        ]
                    )
    return markdown_table(["Cell", "Count", "Rate", "95% CI"], rows)


def repeats_table(agg: Aggregate, metrics: Sequence[str] = HEADLINE_SPREAD) -> str:
    """Mean ± sample SD over repeats."""
    rows = []
    for state, conds in agg.cells.items():
        for cond, detail in conds.items():
            cells = []
            for metric in metrics:
                s = detail.repeats.get(metric)
                cells.append(
                    DASH if s is None else f"{s.mean:.1f} ± {fmt(s.sd)} (n={len(s.values)})"
                )
            rows.append([cond, state, *cells])
    return markdown_table(["Cond.", "State", *metrics], rows)


def transitions_table(agg: Aggregate) -> str:
    patterns = list(next(iter(agg.cross_state.values())).transitions) if agg.cross_state else []
    rows = [
        [cond, str(cross.transitions_shared), *(str(cross.transitions[p]) for p in patterns)]
        for cond, cross in agg.cross_state.items()
    ]
    return markdown_table(["Cond.", "shared", *patterns], rows)


def drift_table(agg: Aggregate) -> str:
    rows = [
        [
            cond,
            f"{c.ret_kept}/{c.ret_d0_correct}",
            f"{c.drift_changed}/{c.drift_both_correct}",
            fmt(c.source_drift),
        ]
        for cond, c in agg.cross_state.items()
    ]
    return markdown_table(["Cond.", "kept (Ret)", "source changed", "drift %"], rows)


def _share(value: float | None, n: int) -> str:
    return f"{fmt(value)} ({n})"


def _grounding(cell: GroundingSummary) -> list[str]:
    return [
        str(cell.n),
        str(cell.parsed_answerable),
        f"{fmt(cell.GC)} ({cell.GC_k})",
        f"{fmt(cell.VC)} ({cell.VC_k})",
        fmt(cell.OG),
    ]


def paths_table(agg: Aggregate) -> str:
    """The four retrieval paths per cell: share of recorded probes (mean over runs, probes in
    parentheses) and which records carry an older file's two-way label."""
    rows = []
    for state, conds in agg.states.items():
        for cond, cell in conds.items():
            shares = [_share(p.share, p.n) for p in cell.paths.values()]
            binary = cell.path_sources.get("binary", 0)
            rows.append([cond, state, *shares, str(binary) if binary else "0"])
    header = ["Cond.", "State", *(f"{path} %" for path in RETRIEVAL_PATHS), "binary"]
    return markdown_table(header, rows)


def path_grounding_table(agg: Aggregate) -> str:
    """GC, VC and OG of the parsed answerable probes on each path (pooled over runs; counts in
    parentheses): VC on R_none is a right answer with no access path."""
    rows = [
        [cond, state, path, *_grounding(p)]
        for state, conds in agg.states.items()
        for cond, cell in conds.items()
        for path, p in cell.paths.items()
        if p.n
    ]
    return markdown_table(
        ["Cond.", "State", "Path", "probes", "parsed answerable", "GC % (k)", "VC % (k)", "OG"],
        rows,
    )


VISIBILITY_LABELS = {
    "verbatim": "verbatim",
    "summary_only": "summary only",
    "notes_only": "notes only",
    "nowhere": "nowhere",
}
NOT_AVAILABLE = "not available"


def visibility_grid(agg: Aggregate) -> str:
    """State × artifact: where each planted artifact's content is at each checkpoint."""
    seen = agg.visibility
    if seen is None:
        return "Not available: the run wrote no visibility.json (records from an older run)."
    rows = [
        [state, *(VISIBILITY_LABELS[row[a]] if a in row else NOT_AVAILABLE
                  for a in seen.artifacts)]
        for state, row in seen.grid.items()
    ]  # fmt: skip
    table = markdown_table(["State", *seen.artifacts], rows)
    reasons = [f"- {state}: not available — {why}" for state, why in seen.unavailable.items()]
    return "\n\n".join([table, "\n".join(reasons)]) if reasons else table


def visibility_gc_table(agg: Aggregate) -> str:
    """GC of the parsed answerable probes per visibility class of their artifact, per state
    and over all states (pooled over runs; counts in parentheses)."""
    seen = agg.visibility
    if seen is None or not seen.by_class:
        return "No answerable probe of a mapped checkpoint."
    rows = []
    for cond, states in seen.by_state.items():
        for state, classes in states.items():
            for visibility, cell in classes.items():
                rows.append([cond, state, VISIBILITY_LABELS[visibility], *_grounding(cell)])
        for visibility, cell in seen.by_class[cond].items():
            rows.append([cond, "all states", VISIBILITY_LABELS[visibility], *_grounding(cell)])
    return markdown_table(
        [
            "Cond.",
            "State",
            "Visibility",
            "answerable probes",
            "parsed",
            "GC % (k)",
            "VC % (k)",
            "OG",
        ],
        rows,
    )


def deltas_table(agg: Aggregate) -> str:
    rows = [
        [state, *(fmt(deltas[m], signed=True) for m in DELTA_METRICS)]
        for state, deltas in agg.deltas.items()
    ]
    return markdown_table(["State", *(f"Δ{m}" for m in DELTA_METRICS)], rows)
