"""The one registry of MIRAGE's indicators and metrics: name, definition, denominator, format.

Above: records (which per-probe indicators a reply carries and for which gold), aggregation
(numerators and denominators of every rate), the report's tables, figures, comparison and HTML
page, and the metrics table of docs/metrics.md (``metrics_markdown``; a test keeps the doc in
step). Below: the kit's number format (``harness.kit.report.tables.fmt``).

Scopes: ``probe`` indicators are fields of every record (null where they do not apply);
``cell`` metrics are computed per state x condition from the records' indicator fields;
``cross`` diagnostics per condition across states (paper section 4.1, Table 2).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from harness.kit.report.tables import DASH, fmt

Scope = Literal["probe", "cell", "cross"]
Applies = Literal["all", "YES", "NO"]
Unit = Literal["percent", "points", "count", "proportion"]


def fmt_count(value: float) -> str:
    """A count, or a mean count over runs (one decimal when it is not whole)."""
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


@dataclass(frozen=True)
class Metric:
    """One indicator or metric. ``numerator``/``denominator`` name the per-cell counts a rate is
    computed from (``harness.mirage.report.aggregate.Counts`` attributes); a rate without them is
    derived (OG) or not a rate (PF, n, the cross-state diagnostics)."""

    name: str
    scope: Scope
    definition: str
    denominator_text: str
    unit: Unit
    label: str = ""
    applies_to: Applies = "all"
    numerator: str | None = None
    denominator: str | None = None

    @property
    def title(self) -> str:
        """The name as printed in tables (``Δcomp`` for ``delta_comp``)."""
        return self.label or self.name

    @property
    def is_rate(self) -> bool:
        """A proportion of counts: it has Wilson intervals and enters the Cm − C0 deltas."""
        return self.numerator is not None and self.denominator is not None

    def render_percent(self, value: float | int | None) -> str:
        """The value on the one scale every report table uses: rates in percent, differences
        (OG, Δcomp) in percentage points, counts as counts."""
        if self.unit == "count":
            return DASH if value is None else fmt_count(value)
        if self.unit == "proportion":
            return fmt(None if value is None else 100 * value, signed=True)
        return fmt(value)

    @property
    def heading(self) -> str:
        """The title with the unit ``render_percent`` prints it in (``Δcomp pp``, ``GC %``)."""
        unit = {"percent": "%", "points": "pp", "proportion": "pp", "count": ""}[self.unit]
        return f"{self.title} {unit}".strip()


_ANSWERABLE = "parsed answerable probes"
METRICS: tuple[Metric, ...] = (
    Metric("AC", "probe", "1[ẑ = z*]: the ANSWERABLE field is right", "parsed probes",
           "percent", numerator="AC", denominator="parsed"),
    Metric("SC", "probe", "1[canon(src) = src*]: the cited source is the gold one", _ANSWERABLE,
           "percent", applies_to="YES", numerator="SC", denominator="parsed_answerable"),
    Metric("VC", "probe", "1[norm(ŷ) = y*]: the value is right", _ANSWERABLE, "percent",
           applies_to="YES", numerator="VC", denominator="parsed_answerable"),
    Metric("GC", "probe", "SC·VC: grounded and correct", _ANSWERABLE, "percent",
           applies_to="YES", numerator="GC", denominator="parsed_answerable"),
    Metric("HR", "probe", "1[ẑ = YES ∨ ŷ ≠ NONE] on an unanswerable probe",
           "parsed unanswerable probes", "percent", applies_to="NO", numerator="HR",
           denominator="parsed_unanswerable"),
    Metric("WS", "probe", "1[canon(src) ≠ src*] (NONE is a mismatch, so WS = 1 − SC)",
           _ANSWERABLE, "percent", applies_to="YES", numerator="WS",
           denominator="parsed_answerable"),
    Metric("PF", "cell", "count of parse failures (every indicator null)",
           "— (the mean count per run; `PF_total` sums the runs)", "count"),
    Metric("MI", "cell", "answerable probes with ẑ = YES and GC = 0",
           "all recorded answerable probes (PF included, contributing 0)", "percent",
           numerator="mirages", denominator="recorded_answerable"),
    Metric("OG", "cell", "VC − GC of the cell", "(in points)", "points"),
    Metric("R_tool", "cell", "probes with `path = R_tool` (the four-way label)",
           "all recorded probes", "percent", numerator="r_tool", denominator="n"),
    Metric("R_none", "cell", "probes with `path = R_none`: no access path to the artifact",
           "all recorded probes", "percent", numerator="r_none", denominator="n"),
    Metric("VC_R_none", "cell", "answerable probes with VC = 1 and `path = R_none`: the right "
           "value with no access path", _ANSWERABLE, "percent", label="VC∧R_none",
           numerator="vc_r_none", denominator="parsed_answerable"),
    Metric("n", "cell", "recorded probes", "— (over all runs)", "count"),
    Metric("DS", "cross", "100 · (GC_d0 − GC_deep) / GC_d0 from the cells' mean GCs",
           "GC at d0", "percent"),
    Metric("delta_comp", "cross", "(GC_post − GC_deep) / 100", "—", "proportion",
           label="Δcomp"),
    Metric("Ret", "cross", "d0-grounded probes still grounded at deep (mean over runs)",
           "d0-grounded probes", "percent"),
    Metric("MI_d80k", "cross", "MI at the deep state", "as MI", "percent"),
)  # fmt: skip

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}


def names(metrics: Iterable[Metric]) -> tuple[str, ...]:
    return tuple(m.name for m in metrics)


PROBE_INDICATORS = names(m for m in METRICS if m.scope == "probe")
ANSWERABLE_ONLY = names(m for m in METRICS if m.scope == "probe" and m.applies_to == "YES")
UNANSWERABLE_ONLY = names(m for m in METRICS if m.scope == "probe" and m.applies_to == "NO")
PROPORTIONS = names(m for m in METRICS if m.is_rate)
RATE_METRICS = names(m for m in METRICS if m.is_rate or m.unit == "points")
DELTA_METRICS = PROPORTIONS
TABLE1_COLUMNS = names(m for m in METRICS if m.scope in ("probe", "cell"))
DIAGNOSTICS = names(m for m in METRICS if m.scope == "cross")
HEADLINE_INTERVALS = ("AC", "GC", "SC", "HR")  # the paper's Table 9 rows
HEADLINE_SPREAD = ("AC", "GC", "MI")
FIGURE_DELTAS = ("GC", "SC", "AC", "HR")  # the paper's Figure 6


def get_metric(name: str) -> Metric:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(BY_NAME)}") from None


def metrics_markdown() -> str:
    """The metrics table of docs/metrics.md, from the registry."""
    lines = ["| metric | scope | definition | denominator (per run) |", "| --- | --- | --- | --- |"]
    for m in METRICS:
        applies = {"YES": " (answerable only)", "NO": " (unanswerable only)"}.get(m.applies_to, "")
        lines.append(f"| {m.title} | {m.scope}{applies} | {m.definition} | {m.denominator_text} |")
    return "\n".join(lines)
