"""Aggregation of probe records into the paper's tables and diagnostics (sections 3.5, 4.1).

Above: the report writer and ``mirage report``. Below: the indicator fields of ``ProbeRecord``
only (never raw outputs), so a report always agrees with the records it is computed from.

A run is one repeat (``record.repeat``); like the paper's Table 1 ("each cell is averaged over
three independent runs") every headline rate is the mean of the per-run rates. Per state x
condition and run: AC over parsed probes; SC, VC, GC, WS over parsed answerable probes; HR over
parsed unanswerable probes; MI over all recorded answerable probes (PF contributes 0); R_tool,
R_none and, per path, its share over all recorded probes; VC_R_none (right value, no access
path) over parsed answerable probes; GC, VC and OG within each path pooled over runs;
OG = VC - GC in percentage points. PF is the mean count per run (and the total); n the total
of recorded probes. Records with a provider error are counted apart and enter no metric.
Cross-state (per condition): DS and delta_comp from the mean GCs, Ret as the mean per-run
retention, MI at the deep state, source drift and transitions pooled over runs; and Cm - C0
deltas per state. Given the run's visibility map, GC per visibility class of each probe's
gold artifact at its state. All records must come from one scoring profile.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from harness.kit.stats import Interval, Spread, mean, spread, wilson_interval
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.probing.retrieval_paths import RETRIEVAL_PATHS
from harness.mirage.probing.visibility import VISIBILITY_CLASSES, Visibility, VisibilityMap
from harness.mirage.protocol import ProfileName
from harness.mirage.scoring.metrics import (
    DELTA_METRICS,
    PROBE_INDICATORS,
    PROPORTIONS,
    RATE_METRICS,
    get_metric,
)
from harness.mirage.scoring.sources import clean_reference

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
class Grounding:
    """GC and VC counts of the parsed answerable probes in one group (a path, a visibility
    class), beside the group's recorded probes."""

    n: int = 0
    parsed_answerable: int = 0
    GC: int = 0
    VC: int = 0

    def add(self, record: ProbeRecord) -> None:
        self.n += 1
        if record.gold_answerable == "YES" and not record.pf:
            self.parsed_answerable += 1
            self.GC += record.GC or 0
            self.VC += record.VC or 0


def _paths() -> dict[str, Grounding]:
    return {path: Grounding() for path in RETRIEVAL_PATHS}


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
    r_none: int = 0
    vc_r_none: int = 0
    AC: int = 0
    SC: int = 0
    VC: int = 0
    GC: int = 0
    HR: int = 0
    WS: int = 0
    paths: dict[str, Grounding] = field(default_factory=_paths)
    path_sources: dict[str, int] = field(default_factory=dict)

    def add(self, record: ProbeRecord) -> None:
        if not record.scored:
            self.provider_errors += 1
            return
        self.n += 1
        self.r_tool += record.path == "R_tool"
        self.r_none += record.path == "R_none"
        self.vc_r_none += record.path == "R_none" and record.VC == 1
        self.paths[record.path].add(record)
        self.path_sources[record.path_source] = self.path_sources.get(record.path_source, 0) + 1
        answerable = record.gold_answerable == "YES"
        self.recorded_answerable += answerable
        if record.pf:
            self.pf += 1
            return
        self.parsed += 1
        self.parsed_answerable += answerable
        self.parsed_unanswerable += not answerable
        self.mirages += answerable and record.parsed.answerable == "YES" and record.GC == 0
        for name in PROBE_INDICATORS:
            setattr(self, name, getattr(self, name) + (getattr(record, name) or 0))

    def fraction(self, name: str) -> tuple[int, int]:
        """Numerator and denominator of a rate metric (not OG, which is a difference)."""
        rate = get_metric(name)
        if rate.numerator is None or rate.denominator is None:
            raise KeyError(name)
        return getattr(self, rate.numerator), getattr(self, rate.denominator)

    def rate(self, metric: str) -> float | None:
        if metric == "OG":
            vc, gc = self.rate("VC"), self.rate("GC")
            return None if vc is None or gc is None else vc - gc
        k, n = self.fraction(metric)
        return 100.0 * k / n if n else None

    def path_share(self, path: str) -> float | None:
        """Percent of the recorded probes whose retrieval path is ``path``."""
        return 100.0 * self.paths[path].n / self.n if self.n else None


def count(records: Iterable[ProbeRecord]) -> Counts:
    counts = Counts()
    for record in records:
        counts.add(record)
    return counts


def _percent(k: int, n: int) -> float | None:
    return 100.0 * k / n if n else None


class GroundingSummary(BaseModel):
    """GC and VC (pooled over runs: a group may be empty in a run) of the parsed answerable
    probes of one group, with their counts so a reader can check them."""

    n: int
    """Recorded probes of the group (PF included)."""
    parsed_answerable: int
    GC_k: int
    VC_k: int
    GC: float | None
    VC: float | None
    OG: float | None

    @classmethod
    def of(cls, counts: Grounding) -> GroundingSummary:
        gc = _percent(counts.GC, counts.parsed_answerable)
        vc = _percent(counts.VC, counts.parsed_answerable)
        return cls(
            n=counts.n,
            parsed_answerable=counts.parsed_answerable,
            GC_k=counts.GC,
            VC_k=counts.VC,
            GC=gc,
            VC=vc,
            OG=None if gc is None or vc is None else vc - gc,
        )


class PathSummary(GroundingSummary):
    """One retrieval path within a cell: its share of the recorded probes (mean over runs, as
    R_tool), its probes over all runs, and GC, VC and OG of its parsed answerable probes."""

    share: float | None


class CellSummary(BaseModel):
    """One state x condition cell of ``summary.json``: rates are means over runs (percent)."""

    AC: float | None
    SC: float | None
    VC: float | None
    GC: float | None
    HR: float | None
    WS: float | None
    PF: float
    PF_total: int
    MI: float | None
    OG: float | None
    R_tool: float | None
    R_none: float | None
    VC_R_none: float | None
    n: int
    runs: int
    paths: dict[str, PathSummary]
    path_sources: dict[str, int]
    """Records per ``path_source``: ``binary`` ones carry an older file's two-way label."""


class RunDetail(BaseModel):
    """One run (repeat) of a cell: its own rates, PF count and Wilson intervals."""

    repeat: int
    n: int
    PF: int
    provider_errors: int
    rates: dict[str, float | None]
    intervals: dict[str, Interval | None]


class CellDetail(BaseModel):
    """What a cell needs beyond the headline: pooled counts, per-run values, paths."""

    parsed: int
    parsed_answerable: int
    parsed_unanswerable: int
    recorded_answerable: int
    provider_errors: int
    path: dict[str, float | None]
    """Share (percent, mean over runs) of each retrieval path, keyed by the four labels."""
    path_sources: dict[str, int] = {}
    """How many recorded probes had their path decided where (``ProbeRecord.path_source``)."""
    intervals_pooled: dict[str, Interval | None]
    runs: list[RunDetail]
    repeats: dict[str, Spread | None]


class Diagnostics(BaseModel):
    """Cross-state indicators of one condition, in Table 2 units."""

    DS: float | None
    delta_comp: float | None
    Ret: float | None
    MI_d80k: float | None


class RetentionRun(BaseModel):
    repeat: int
    d0_correct: int
    kept: int
    Ret: float | None


class CrossStateDetail(BaseModel):
    """Pooled over runs (pairs are always within one run), with Ret per run."""

    ret_d0_correct: int
    ret_kept: int
    ret_runs: list[RetentionRun]
    drift_both_correct: int
    drift_changed: int
    source_drift: float | None
    transitions: dict[str, int]
    transitions_shared: int


class VisibilitySummary(BaseModel):
    """The visibility map as a report shows it: state -> artifact -> class, the states whose
    context was not readable (with the reason), and GC of the parsed answerable probes per
    class: per condition and state, and per condition over all states."""

    artifacts: list[str]
    grid: dict[str, dict[str, Visibility]]
    unavailable: dict[str, str]
    by_state: dict[str, dict[str, dict[str, GroundingSummary]]]
    by_class: dict[str, dict[str, GroundingSummary]]


def visibility_summary(records: Iterable[ProbeRecord], found: VisibilityMap) -> VisibilitySummary:
    """GC per visibility class: each scored probe joins the class of its gold artifact at its
    state (probes of a state the map lacks or could not read join none)."""
    by_state: dict[str, dict[str, dict[str, Grounding]]] = defaultdict(dict)
    by_class: dict[str, dict[str, Grounding]] = defaultdict(dict)
    for record in records:
        artifact = None if record.gold is None else record.gold.artifact or record.gold.source
        seen = found.of(record.state, artifact)
        if seen is None or not record.scored or record.gold_answerable != "YES":
            continue
        by_state[record.condition].setdefault(record.state, {}).setdefault(seen, Grounding())
        by_state[record.condition][record.state][seen].add(record)
        by_class[record.condition].setdefault(seen, Grounding()).add(record)

    def ordered(groups: dict[str, Grounding]) -> dict[str, GroundingSummary]:
        return {c: GroundingSummary.of(groups[c]) for c in VISIBILITY_CLASSES if c in groups}

    artifacts: list[str] = []
    for state in found.states.values():
        artifacts += [a for a in state.artifacts if a not in artifacts]
    return VisibilitySummary(
        artifacts=artifacts,
        grid=found.grid(),
        unavailable={s: v.unavailable for s, v in found.states.items() if v.unavailable},
        by_state={
            cond: {state: ordered(groups) for state, groups in states.items()}
            for cond, states in sorted(by_state.items())
        },
        by_class={cond: ordered(groups) for cond, groups in sorted(by_class.items())},
    )


class Aggregate(BaseModel):
    scoring: ProfileName | None
    runs: int
    roles: StateRoles
    states: dict[str, dict[str, CellSummary]]
    diagnostics: dict[str, Diagnostics]
    cells: dict[str, dict[str, CellDetail]]
    cross_state: dict[str, CrossStateDetail]
    deltas: dict[str, dict[str, float | None]]
    visibility: VisibilitySummary | None = None

    def summary(self) -> dict[str, object]:
        """The ``summary.json`` shape: issue 7's, plus the scoring profile, the run count and
        (when the run mapped its checkpoints) the visibility grid with GC per class."""
        visibility = {} if self.visibility is None else {"visibility": self.visibility.model_dump()}
        return {
            "scoring": self.scoring,
            "runs": self.runs,
            "states": {
                state: {cond: cell.model_dump() for cond, cell in conds.items()}
                for state, conds in self.states.items()
            },
            "diagnostics": {cond: d.model_dump() for cond, d in self.diagnostics.items()},
            **visibility,
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


def _by_run(records: Iterable[ProbeRecord]) -> dict[int, list[ProbeRecord]]:
    """Records grouped by run (repeat index), in run order."""
    runs: dict[int, list[ProbeRecord]] = defaultdict(list)
    for record in records:
        runs[record.repeat].append(record)
    return dict(sorted(runs.items()))


def _cell_summary(runs: dict[int, Counts], pooled: Counts) -> CellSummary:
    scored = [c for c in runs.values() if c.n]
    rates = {m: mean([c.rate(m) for c in scored]) for m in PROPORTIONS}
    vc, gc = rates["VC"], rates["GC"]
    paths: dict[str, PathSummary] = {
        path: PathSummary(
            share=mean([c.path_share(path) for c in scored]),
            **GroundingSummary.of(pooled.paths[path]).model_dump(),
        )
        for path in RETRIEVAL_PATHS
    }
    return CellSummary(
        **rates,
        OG=None if vc is None or gc is None else vc - gc,
        PF=mean([float(c.pf) for c in scored]) or 0.0,
        PF_total=sum(c.pf for c in runs.values()),
        n=sum(c.n for c in runs.values()),
        runs=len(scored),
        paths=paths,
        path_sources=dict(sorted(pooled.path_sources.items())),
    )


def _intervals(counts: Counts) -> dict[str, Interval | None]:
    return {metric: wilson_interval(*counts.fraction(metric)) for metric in PROPORTIONS}


def _run_detail(repeat: int, counts: Counts) -> RunDetail:
    return RunDetail(
        repeat=repeat,
        n=counts.n,
        PF=counts.pf,
        provider_errors=counts.provider_errors,
        rates={metric: counts.rate(metric) for metric in RATE_METRICS},
        intervals=_intervals(counts),
    )


def _cell_detail(runs: dict[int, Counts], pooled: Counts, summary: CellSummary) -> CellDetail:
    return CellDetail(
        parsed=pooled.parsed,
        parsed_answerable=pooled.parsed_answerable,
        parsed_unanswerable=pooled.parsed_unanswerable,
        recorded_answerable=pooled.recorded_answerable,
        provider_errors=pooled.provider_errors,
        path={path: cell.share for path, cell in summary.paths.items()},
        path_sources=summary.path_sources,
        intervals_pooled=_intervals(pooled),
        runs=[_run_detail(repeat, counts) for repeat, counts in runs.items()],
        repeats={m: spread([c.rate(m) for c in runs.values() if c.n]) for m in RATE_METRICS},
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


def _retention(
    d0: dict[tuple[str, int], ProbeRecord], deep: dict[tuple[str, int], ProbeRecord], ran: bool
) -> list[RetentionRun]:
    correct_by_run: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for key, record in d0.items():
        correct_by_run[key[1]] += [key] if _grounded(record) else []
    runs = []
    for repeat, correct in sorted(correct_by_run.items()):
        kept = [key for key in correct if _grounded(deep.get(key))]
        ret = 100.0 * len(kept) / len(correct) if correct and ran else None
        runs.append(RetentionRun(repeat=repeat, d0_correct=len(correct), kept=len(kept), Ret=ret))
    return runs


def _cross_state(grouped: Grouped, condition: str, roles: StateRoles) -> CrossStateDetail:
    def outcomes(state: str) -> dict[tuple[str, int], ProbeRecord]:
        return _answerable_outcomes(grouped.get(state, {}).get(condition, []))

    d0, deep, post = outcomes(roles.d0), outcomes(roles.deep), outcomes(roles.post)
    deep_ran = condition in grouped.get(roles.deep, {})
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
        ret_runs=_retention(d0, deep, deep_ran),
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
    ret = mean([run.Ret for run in cross.ret_runs])
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


class MixedProfilesError(ValueError):
    """Records scored under different profiles cannot be aggregated together."""


def scoring_profile(records: Sequence[ProbeRecord]) -> ProfileName | None:
    """The one profile every record was scored under (None for no records)."""
    profiles = sorted({record.scoring for record in records})
    if len(profiles) > 1:
        raise MixedProfilesError(
            f"records were scored under several profiles ({', '.join(profiles)}); rescore "
            "them under one (mirage rescore DIR --scoring PROFILE)"
        )
    return profiles[0] if profiles else None


def aggregate(
    records: Iterable[ProbeRecord],
    roles: StateRoles | None = None,
    visibility: VisibilityMap | None = None,
) -> Aggregate:
    """Every table, diagnostic and figure input of a report, from indicator fields only (and,
    given the run's ``visibility`` map, GC per visibility class)."""
    roles = roles or StateRoles()
    records = list(records)
    grouped = group_records(records, roles)
    states: dict[str, dict[str, CellSummary]] = {}
    cells: dict[str, dict[str, CellDetail]] = {}
    for state, conds in grouped.items():
        for condition, cell_records in conds.items():
            runs = {repeat: count(rs) for repeat, rs in _by_run(cell_records).items()}
            pooled = count(cell_records)
            summary = _cell_summary(runs, pooled)
            states.setdefault(state, {})[condition] = summary
            detail = _cell_detail(runs, pooled, summary)
            cells.setdefault(state, {})[condition] = detail
    conditions = sorted({c for conds in grouped.values() for c in conds})
    cross = {c: _cross_state(grouped, c, roles) for c in conditions}
    diagnostics = {c: _diagnostics(states, cross[c], c, roles) for c in conditions}
    return Aggregate(
        scoring=scoring_profile(records),
        runs=len({record.repeat for record in records}),
        roles=roles,
        states=states,
        diagnostics=diagnostics,
        cells=cells,
        cross_state=cross,
        deltas=_deltas(states),
        visibility=None if visibility is None else visibility_summary(records, visibility),
    )
