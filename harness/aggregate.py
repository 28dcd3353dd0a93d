"""Aggregation of probe records into the paper's tables and diagnostics (sections 3.5, 4.1).

Above: the report writer and ``mirage report``. Below: the indicator fields of ``ProbeRecord``
only (never raw outputs), so a report always agrees with the records it is computed from.

Per state x condition (all percentages; PF and n are counts, pooled over repeats):
AC over parsed probes; SC, VC, GC, WS over parsed answerable probes; HR over parsed unanswerable
probes; MI over all recorded answerable probes (PF contributes 0); OG = VC - GC in percentage
points; R_tool over all recorded probes. Records with a provider error are counted apart and
enter no metric. Cross-state (per condition): DS, delta_comp, Ret, MI at the deep state, source
drift, transitions; and Cm - C0 deltas per state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from harness.records import ProbeRecord
from harness.scoring.sources import clean_reference
from harness.stats import Interval, Spread, spread, wilson_interval

INDICATORS: tuple[str, ...] = ("AC", "SC", "VC", "GC", "HR", "WS")
RATE_METRICS: tuple[str, ...] = (*INDICATORS, "MI", "OG", "R_tool")
DELTA_METRICS: tuple[str, ...] = ("AC", "SC", "VC", "GC", "HR", "WS", "MI", "R_tool")
GROUNDED, UNGROUNDED = "✓", "×"


class StateRoles(BaseModel):
    """Which state names play the paper's four roles in the cross-state diagnostics."""

    d0: str = "S1-d0"
    mid: str = "S1-d50k"
    deep: str = "S1-d80k"
    post: str = "S2"

    def ordered(self) -> list[str]:
        return [self.d0, self.mid, self.deep, self.post]


@dataclass
class Counts:
    """Numerators and denominators of one cell (or one repeat of a cell)."""

    n: int = 0
    pf: int = 0
    provider_errors: int = 0
    parsed: int = 0
    parsed_answerable: int = 0
    parsed_unanswerable: int = 0
    recorded_answerable: int = 0
    mirages: int = 0
    r_tool: int = 0
    AC: int = 0
    SC: int = 0
    VC: int = 0
    GC: int = 0
    HR: int = 0
    WS: int = 0

    def add(self, record: ProbeRecord) -> None:
        if not record.scored:
            self.provider_errors += 1
            return
        self.n += 1
        self.r_tool += record.path == "R_tool"
        answerable = record.gold_answerable == "YES"
        self.recorded_answerable += answerable
        if record.pf:
            self.pf += 1
            return
        self.parsed += 1
        self.parsed_answerable += answerable
        self.parsed_unanswerable += not answerable
        self.mirages += answerable and record.parsed.answerable == "YES" and record.GC == 0
        for name in INDICATORS:
            setattr(self, name, getattr(self, name) + (getattr(record, name) or 0))

    def fraction(self, metric: str) -> tuple[int, int]:
        """Numerator and denominator of a rate metric (not OG, which is a difference)."""
        if metric == "AC":
            return self.AC, self.parsed
        if metric in ("SC", "VC", "GC", "WS"):
            return getattr(self, metric), self.parsed_answerable
        if metric == "HR":
            return self.HR, self.parsed_unanswerable
        if metric == "MI":
            return self.mirages, self.recorded_answerable
        if metric == "R_tool":
            return self.r_tool, self.n
        raise KeyError(metric)

    def rate(self, metric: str) -> float | None:
        if metric == "OG":
            vc, gc = self.rate("VC"), self.rate("GC")
            return None if vc is None or gc is None else vc - gc
        k, n = self.fraction(metric)
        return 100.0 * k / n if n else None


def count(records: Iterable[ProbeRecord]) -> Counts:
    counts = Counts()
    for record in records:
        counts.add(record)
    return counts


class CellSummary(BaseModel):
    """One state x condition cell of ``summary.json``."""

    AC: float | None
    SC: float | None
    VC: float | None
    GC: float | None
    HR: float | None
    WS: float | None
    PF: int
    MI: float | None
    OG: float | None
    R_tool: float | None
    n: int


class CellDetail(BaseModel):
    """What a cell needs beyond the headline: counts, intervals, repeats, paths."""

    parsed: int
    parsed_answerable: int
    parsed_unanswerable: int
    recorded_answerable: int
    provider_errors: int
    path: dict[str, float | None]
    intervals: dict[str, Interval | None]
    repeats: dict[str, Spread | None]


class Diagnostics(BaseModel):
    """Cross-state indicators of one condition, in Table 2 units."""

    DS: float | None
    delta_comp: float | None
    Ret: float | None
    MI_d80k: float | None


class CrossStateDetail(BaseModel):
    ret_d0_correct: int
    ret_kept: int
    drift_both_correct: int
    drift_changed: int
    source_drift: float | None
    transitions: dict[str, int]
    transitions_shared: int


class Aggregate(BaseModel):
    roles: StateRoles
    states: dict[str, dict[str, CellSummary]]
    diagnostics: dict[str, Diagnostics]
    cells: dict[str, dict[str, CellDetail]]
    cross_state: dict[str, CrossStateDetail]
    deltas: dict[str, dict[str, float | None]]

    def summary(self) -> dict[str, object]:
        """Exactly the ``summary.json`` shape of issue 7."""
        return {
            "states": {
                state: {cond: cell.model_dump() for cond, cell in conds.items()}
                for state, conds in self.states.items()
            },
            "diagnostics": {cond: d.model_dump() for cond, d in self.diagnostics.items()},
        }


Grouped = dict[str, dict[str, list[ProbeRecord]]]


def group_records(records: Iterable[ProbeRecord], roles: StateRoles) -> Grouped:
    """state -> condition -> records, states in role order then first appearance."""
    grouped: dict[str, dict[str, list[ProbeRecord]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        grouped[record.state][record.condition].append(record)
    known = [s for s in roles.ordered() if s in grouped]
    extra = [s for s in grouped if s not in known]
    return {s: {c: grouped[s][c] for c in sorted(grouped[s])} for s in (*known, *extra)}


def _cell_summary(counts: Counts) -> CellSummary:
    rates = {metric: counts.rate(metric) for metric in RATE_METRICS}
    return CellSummary(**rates, PF=counts.pf, n=counts.n)


def _cell_detail(records: Sequence[ProbeRecord], counts: Counts) -> CellDetail:
    by_repeat: dict[int, list[ProbeRecord]] = defaultdict(list)
    for record in records:
        by_repeat[record.repeat].append(record)
    repeat_counts = [count(by_repeat[r]) for r in sorted(by_repeat)]
    intervals = {
        metric: wilson_interval(*counts.fraction(metric))
        for metric in (*INDICATORS, "MI", "R_tool")
    }
    r_tool = counts.rate("R_tool")
    return CellDetail(
        parsed=counts.parsed,
        parsed_answerable=counts.parsed_answerable,
        parsed_unanswerable=counts.parsed_unanswerable,
        recorded_answerable=counts.recorded_answerable,
        provider_errors=counts.provider_errors,
        path={"R_context": None if r_tool is None else 100.0 - r_tool, "R_tool": r_tool},
        intervals=intervals,
        repeats={m: spread([c.rate(m) for c in repeat_counts]) for m in RATE_METRICS},
    )


def _answerable_outcomes(records: Iterable[ProbeRecord]) -> dict[tuple[str, int], ProbeRecord]:
    """(question_id, repeat) -> recorded answerable probe (provider errors excluded)."""
    return {
        (r.question_id, r.repeat): r for r in records if r.gold_answerable == "YES" and r.scored
    }


def _grounded(record: ProbeRecord | None) -> bool:
    return record is not None and record.GC == 1


def _source_key(record: ProbeRecord) -> str:
    return clean_reference(record.parsed.source or "").casefold()


def _cross_state(grouped: Grouped, condition: str, roles: StateRoles) -> CrossStateDetail:
    def outcomes(state: str) -> dict[tuple[str, int], ProbeRecord]:
        return _answerable_outcomes(grouped.get(state, {}).get(condition, []))

    d0, deep, post = outcomes(roles.d0), outcomes(roles.deep), outcomes(roles.post)
    d0_correct = [key for key, record in d0.items() if _grounded(record)]
    kept = [key for key in d0_correct if _grounded(deep.get(key))]
    changed = [key for key in kept if _source_key(d0[key]) != _source_key(deep[key])]
    shared = sorted(set(d0) & set(deep) & set(post))
    transitions = {
        a + b + c: 0 for a in (GROUNDED, UNGROUNDED) for b in (GROUNDED, UNGROUNDED)
        for c in (GROUNDED, UNGROUNDED)
    }  # fmt: skip
    for key in shared:
        pattern = "".join(GROUNDED if _grounded(s[key]) else UNGROUNDED for s in (d0, deep, post))
        transitions[pattern] += 1
    return CrossStateDetail(
        ret_d0_correct=len(d0_correct),
        ret_kept=len(kept),
        drift_both_correct=len(kept),
        drift_changed=len(changed),
        source_drift=100.0 * len(changed) / len(kept) if kept else None,
        transitions=transitions,
        transitions_shared=len(shared),
    )


def _diagnostics(
    states: dict[str, dict[str, CellSummary]],
    cross: CrossStateDetail,
    condition: str,
    roles: StateRoles,
) -> Diagnostics:
    def metric(state: str, name: str) -> float | None:
        cell = states.get(state, {}).get(condition)
        value = getattr(cell, name) if cell is not None else None
        return value if isinstance(value, float) else None

    gc_d0, gc_deep, gc_post = (metric(s, "GC") for s in (roles.d0, roles.deep, roles.post))
    ds = 100.0 * (gc_d0 - gc_deep) / gc_d0 if gc_d0 and gc_deep is not None else None
    delta = (gc_post - gc_deep) / 100.0 if gc_post is not None and gc_deep is not None else None
    deep_ran = condition in states.get(roles.deep, {})
    ret = (
        100.0 * cross.ret_kept / cross.ret_d0_correct if cross.ret_d0_correct and deep_ran else None
    )
    return Diagnostics(DS=ds, delta_comp=delta, Ret=ret, MI_d80k=metric(roles.deep, "MI"))


def _deltas(states: dict[str, dict[str, CellSummary]]) -> dict[str, dict[str, float | None]]:
    """Cm - C0 per state (percentage points) where both conditions ran."""
    deltas: dict[str, dict[str, float | None]] = {}
    for state, conds in states.items():
        if "C0" not in conds or "Cm" not in conds:
            continue
        base, pressured = conds["C0"], conds["Cm"]
        deltas[state] = {
            m: _difference(getattr(pressured, m), getattr(base, m)) for m in DELTA_METRICS
        }
    return deltas


def _difference(left: float | None, right: float | None) -> float | None:
    return None if left is None or right is None else left - right


def aggregate(records: Iterable[ProbeRecord], roles: StateRoles | None = None) -> Aggregate:
    """Every table, diagnostic and figure input of a report, from indicator fields only."""
    roles = roles or StateRoles()
    grouped = group_records(records, roles)
    states: dict[str, dict[str, CellSummary]] = {}
    cells: dict[str, dict[str, CellDetail]] = {}
    for state, conds in grouped.items():
        for condition, cell_records in conds.items():
            counts = count(cell_records)
            states.setdefault(state, {})[condition] = _cell_summary(counts)
            cells.setdefault(state, {})[condition] = _cell_detail(cell_records, counts)
    conditions = sorted({c for conds in grouped.values() for c in conds})
    cross = {c: _cross_state(grouped, c, roles) for c in conditions}
    diagnostics = {c: _diagnostics(states, cross[c], c, roles) for c in conditions}
    return Aggregate(
        roles=roles,
        states=states,
        diagnostics=diagnostics,
        cells=cells,
        cross_state=cross,
        deltas=_deltas(states),
    )
