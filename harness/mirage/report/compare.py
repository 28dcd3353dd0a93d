"""Several answerers side by side: ``comparison.md``, ``comparison.json`` and figures.

Above: ``mirage report DIR`` on a run with several answerers, or ``mirage report DIR1 DIR2 …``.
Below: one ``Aggregate`` per answerer (``harness.mirage.report.aggregate``), the run's ``run.json``
and the records' own depth coordinates.

Layout follows the paper (papers/mirage.txt, section 4.2): Table 1 with one block of state rows
per model, Table 2 with one row per model, per condition. The ranking orders the answerers by
DS and MI_d80k (lower is better) and by Δcomp and Ret (higher is better), with 95% intervals:
Wilson on the pooled counts for Ret and MI_d80k; for DS and Δcomp, which are functions of three
GC rates, a percentile bootstrap that resamples questions (all of a question's states and
repeats together, so the pairing across states is kept). Answerers whose runs differ in pack,
depth profile, scoring profile or depth coordinates (state names and their checkpoint EIT) are
refused, or with ``allow_incomparable`` written under a banner that says what differs. Summary
formats are an axis, not a difference: SC and GC at each format's compaction state are shown
side by side with the summaries (``harness.mirage.report.formats``).

Read in two minutes (``harness.mirage.report.sections``): ``comparison.md`` and
``comparison.html`` open with the verdict (what the rows show, in words), the headline figure
(GC by state per answerer, with intervals) and one compact table per answerer; every other table
and figure follows, each with a one-line reading (collapsed on the page), the full tables in
``comparison-appendix.md``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ValidationError

from compaction.config import split_format
from harness.kit.provenance import differing_fields
from harness.kit.report.tables import markdown_table
from harness.kit.results import RESULTS_FILE
from harness.kit.rundir import run_config_path
from harness.kit.stats import Interval, wilson_interval
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.probing.visibility import VisibilityMap, read_visibility
from harness.mirage.report import tables
from harness.mirage.report.aggregate import Aggregate, StateRoles, aggregate
from harness.mirage.report.figures import (
    CAPTIONS,
    HEADLINE_FIGURE,
    StateNames,
    draw_figures,
    state_names,
)
from harness.mirage.report.formats import (
    FormatRow,
    FormatSummary,
    format_rows,
    format_table,
    read_summaries,
    state_formats,
    summaries_markdown,
)
from harness.mirage.report.html import answerer_label, write_comparison_html
from harness.mirage.report.instrument import (
    InstrumentCheck,
    agreement_markdown,
    disagreements_markdown,
    instrument_check,
)
from harness.mirage.report.overview import READER, overview
from harness.mirage.report.sections import Section, appendix_markdown, report_markdown
from harness.mirage.report.summary_checks import (
    RetentionCheck,
    SummaryCheck,
    compaction_axis_markdown,
    degenerate_lines,
    degenerate_markdown,
    retention_checks,
    retention_markdown,
    summary_checks,
)
from harness.mirage.scoring.metrics import DIAGNOSTICS, TABLE1_COLUMNS, get_metric
from harness.mirage.trunk.checkpoints import FORMAT_SEPARATOR, base_state

COMPARISON_MD = "comparison.md"
COMPARISON_APPENDIX = "comparison-appendix.md"
COMPARISON_JSON = "comparison.json"
COMPARISON_HTML = "comparison.html"
COMPARISON_FIGURES = "comparison-figures"
COMPLIANCE_JSON = "compliance.json"
LOWER_IS_BETTER = {"DS": True, "delta_comp": False, "Ret": False, "MI_d80k": True}
COMPARED_FACTS = ("pack", "profile", "scoring", "depth")
BOOTSTRAP_SAMPLES = 2000


class ComparisonInputError(ValueError):
    """A file the comparison reads (``run.json``, ``compliance.json``) is unreadable."""


class NotComparableError(ValueError):
    """The runs differ in what makes their numbers comparable."""


class RunFacts(BaseModel):
    """What must agree between answerers for their numbers to be compared."""

    pack: str | None
    profile: str | None
    scoring: str | None
    depth: dict[str, int | None]
    summary_format: str | None


class Answerer(BaseModel):
    label: str
    directory: str
    facts: RunFacts


class Ranked(BaseModel):
    label: str
    value: float | None
    low: float | None
    high: float | None


class Comparison(BaseModel):
    comparable: bool
    differences: list[str]
    answerers: list[Answerer]
    ranking: dict[str, dict[str, list[Ranked]]]  # condition -> metric -> best first
    summaries: dict[str, dict[str, object]]  # label -> the answerer's summary.json
    compliance: list[dict[str, object]]
    summary_formats: dict[str, list[FormatRow]] = {}  # label -> SC/GC per format (appendix A.2)
    overview: str = ""  # what the rows show, in words (with reference agents)
    instrument: InstrumentCheck | None = None  # path labels against the references' declared
    provenance_differences: dict[str, dict[str, str]] = {}  # field -> result folder -> value
    summary_checks: list[SummaryCheck] = []  # every compaction state's summary, flagged or not
    retention_checks: list[RetentionCheck] = []  # visibility against declared retention
    compaction_axis: str = ""  # the context-reader's GC per format, and why (markdown)


def result_dirs(paths: Sequence[Path]) -> list[Path]:
    """Each path's result folder, or the answerer folders of a multi-answerer run."""
    found: list[Path] = []
    for path in paths:
        if (path / RESULTS_FILE).is_file():
            found.append(path)
            continue
        children = sorted(p for p in path.iterdir() if (p / RESULTS_FILE).is_file())
        if not children:
            raise FileNotFoundError(
                f"no results file at {path / RESULTS_FILE} nor in any folder inside {path}"
            )
        found += children
    return found


def _run_config(directory: Path) -> dict[str, object]:
    candidate = run_config_path(directory)
    if candidate is not None:
        try:
            loaded = json.loads(candidate.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ComparisonInputError(
                f"{candidate}: not valid JSON ({exc.msg}, line {exc.lineno}); restore the "
                "run's configuration or delete the file"
            ) from exc
        return loaded if isinstance(loaded, dict) else {}
    return {}


def run_facts(directory: Path, records: Sequence[ProbeRecord]) -> RunFacts:
    config = _run_config(directory)
    depth: dict[str, int | None] = {}
    for record in records:
        eit = record.state_eit
        state = base_state(record.state)  # S2@<format> is S2 under another format
        if depth.get(state) is None:
            depth[state] = eit if isinstance(eit, int) else None
    scorings = sorted({r.scoring for r in records})

    def text(key: str) -> str | None:
        value = config.get(key)
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        return None if value is None else str(value)

    return RunFacts(
        pack=text("pack"),
        profile=text("profile"),
        scoring=", ".join(scorings) or None,
        depth=dict(sorted(depth.items())),
        summary_format=text("summary_formats") or text("summary_format"),
    )


def unique_labels(answerers: Sequence[tuple[Path, str]]) -> list[str]:
    """Labels, made unique by their run folder where two answerers share a model name."""
    counts: dict[str, int] = defaultdict(int)
    for _, label in answerers:
        counts[label] += 1
    return [
        label if counts[label] == 1 else f"{directory.parent.name}/{label}"
        for directory, label in answerers
    ]


def differences(answerers: Sequence[Answerer]) -> list[str]:
    """One line per fact on which the answerers disagree."""
    lines = []
    for fact in COMPARED_FACTS:
        values = {a.label: getattr(a.facts, fact) for a in answerers}
        if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
            shown = "; ".join(f"{label}: {value}" for label, value in values.items())
            lines.append(f"{fact} differs ({shown})")
    return lines


def _question_gc(
    records: Sequence[ProbeRecord], condition: str, states: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Per question x state: grounded count and parsed answerable count (over repeats)."""
    questions = sorted({r.question_id for r in records if r.gold_answerable == "YES"})
    row = {q: i for i, q in enumerate(questions)}
    grounded = np.zeros((len(questions), len(states)))
    parsed = np.zeros((len(questions), len(states)))
    for r in records:
        if r.condition != condition or r.state not in states or r.question_id not in row:
            continue
        if r.scored and not r.pf:
            column = states.index(r.state)
            parsed[row[r.question_id], column] += 1
            grounded[row[r.question_id], column] += r.GC or 0
    return grounded, parsed


def bootstrap_cross_state(
    records: Sequence[ProbeRecord], condition: str, roles: StateRoles, seed: int = 0
) -> dict[str, tuple[float, float] | None]:
    """95% percentile intervals of DS (percent) and delta_comp (proportion)."""
    grounded, parsed = _question_gc(records, condition, [roles.d0, roles.deep, roles.post])
    if grounded.shape[0] == 0:
        return {"DS": None, "delta_comp": None}
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, grounded.shape[0], size=(BOOTSTRAP_SAMPLES, grounded.shape[0]))
    with np.errstate(divide="ignore", invalid="ignore"):
        gc = grounded[picks].sum(axis=1) / parsed[picks].sum(axis=1)
        ds = 100.0 * (gc[:, 0] - gc[:, 1]) / gc[:, 0]
        ds[gc[:, 0] == 0] = np.nan
        delta = gc[:, 2] - gc[:, 1]
    return {"DS": _percentiles(ds), "delta_comp": _percentiles(delta)}


def _percentiles(values: np.ndarray) -> tuple[float, float] | None:
    finite = values[np.isfinite(values)]
    if finite.size < BOOTSTRAP_SAMPLES // 2:  # undefined in most resamples
        return None
    low, high = np.percentile(finite, [2.5, 97.5])
    return float(low), float(high)


def _interval_bounds(interval: Interval | None) -> tuple[float, float] | None:
    return None if interval is None else (interval.low, interval.high)


def diagnostic_intervals(
    agg: Aggregate, records: Sequence[ProbeRecord], condition: str
) -> dict[str, tuple[float, float] | None]:
    cross = agg.cross_state.get(condition)
    deep = agg.cells.get(agg.roles.deep, {}).get(condition)
    ret = None if cross is None else wilson_interval(cross.ret_kept, cross.ret_d0_correct)
    mi = None if deep is None else deep.intervals_pooled["MI"]
    return {
        **bootstrap_cross_state(records, condition, agg.roles),
        "Ret": _interval_bounds(ret),
        "MI_d80k": _interval_bounds(mi),
    }


def ranking(
    aggregates: dict[str, Aggregate], records: dict[str, list[ProbeRecord]]
) -> dict[str, dict[str, list[Ranked]]]:
    conditions = sorted({c for agg in aggregates.values() for c in agg.diagnostics})
    ranked: dict[str, dict[str, list[Ranked]]] = {}
    for condition in conditions:
        rows: dict[str, list[Ranked]] = {name: [] for name in DIAGNOSTICS}
        for label, agg in aggregates.items():
            diag = agg.diagnostics.get(condition)
            if diag is None:
                continue
            bounds = diagnostic_intervals(agg, records[label], condition)
            for name in DIAGNOSTICS:
                low, high = bounds[name] or (None, None)
                rows[name].append(
                    Ranked(label=label, value=getattr(diag, name), low=low, high=high)
                )
        ranked[condition] = {name: _ordered(name, rows[name]) for name in DIAGNOSTICS}
    return ranked


def _ordered(name: str, rows: list[Ranked]) -> list[Ranked]:
    sign = 1.0 if LOWER_IS_BETTER[name] else -1.0
    return sorted(rows, key=lambda r: (r.value is None, sign * (r.value or 0.0), r.label))


def table1_blocks(aggregates: dict[str, Aggregate]) -> dict[str, str]:
    """Per condition: Table 1 with one block of state rows per model (paper layout)."""
    conditions = sorted({c for agg in aggregates.values() for s in agg.states.values() for c in s})
    tables = {}
    for condition in conditions:
        rows = []
        for label, agg in aggregates.items():
            first = True
            for state, conds in agg.states.items():
                if condition not in conds:
                    continue
                values = conds[condition].model_dump()
                cells = [get_metric(c).render_percent(values[c]) for c in TABLE1_COLUMNS]
                rows.append([label if first else "", state, *cells])
                first = False
        tables[condition] = markdown_table(
            ["Model", "State", *(get_metric(c).heading for c in TABLE1_COLUMNS)], rows
        )
    return tables


def _conditions(aggregates: dict[str, Aggregate]) -> list[str]:
    return sorted({c for agg in aggregates.values() for c in agg.diagnostics})


def og_rows(aggregates: dict[str, Aggregate]) -> dict[str, str]:
    """Per condition: OG (VC − GC, percentage points) per model and state."""
    states: list[str] = []
    for agg in aggregates.values():
        states += [s for s in agg.states if s not in states]
    og = get_metric("OG")
    tables = {}
    for condition in _conditions(aggregates):
        rows = [
            [label, *(og.render_percent(_og(agg, s, condition)) for s in states)]
            for label, agg in aggregates.items()
            if condition in agg.diagnostics
        ]
        tables[condition] = markdown_table(["Model", *(f"OG pp {s}" for s in states)], rows)
    return tables


def _og(agg: Aggregate, state: str, condition: str) -> float | None:
    cell = agg.states.get(state, {}).get(condition)
    return None if cell is None else cell.OG


def _interval_text(row: Ranked, name: str) -> str:
    metric = get_metric(name)
    if row.low is None or row.high is None:
        return "—"
    return f"[{metric.render_percent(row.low)}, {metric.render_percent(row.high)}]"


def diagnostics_tables(comparison: Comparison) -> dict[str, str]:
    """Per condition: Table 2 (DS, Δcomp, Ret, MI_d80k) per model with 95% intervals, on one
    scale (percent; Δcomp in percentage points), the models in the comparison's order."""
    order = [a.label for a in comparison.answerers]
    tables = {}
    for condition, by_metric in comparison.ranking.items():
        cells: dict[str, dict[str, Ranked]] = defaultdict(dict)
        for name, rows in by_metric.items():
            for row in rows:
                cells[row.label][name] = row
        body = []
        for label in [o for o in order if o in cells]:
            line = [label]
            for name in DIAGNOSTICS:
                found = cells[label].get(name)
                value = None if found is None else found.value
                interval = "" if found is None or found.low is None else _interval_text(found, name)
                line.append(f"{get_metric(name).render_percent(value)} {interval}".strip())
            body.append(line)
        header = ["Model", *(f"{get_metric(n).heading} [95% CI]" for n in DIAGNOSTICS)]
        tables[condition] = markdown_table(header, body)
    return tables


def ranking_tables(ranked: dict[str, dict[str, list[Ranked]]]) -> str:
    sections = []
    for condition, by_metric in ranked.items():
        for name, rows in by_metric.items():
            metric = get_metric(name)
            better = "lower" if LOWER_IS_BETTER[name] else "higher"
            table = markdown_table(
                ["Rank", "Model", metric.heading, "95% interval"],
                [
                    [str(i + 1), r.label, metric.render_percent(r.value), _interval_text(r, name)]
                    for i, r in enumerate(rows)
                ],
            )
            sections.append(f"### {condition} · {metric.title} ({better} is better)\n\n{table}")
    return "\n\n".join(sections)


def find_compliance(places: Sequence[Path]) -> list[dict[str, object]]:
    """Rows of a ``mirage compliance`` report found beside the runs, if any."""
    from runtime.compliance import ComplianceReport

    for place in places:
        for candidate in (place / COMPLIANCE_JSON, place / "compliance" / COMPLIANCE_JSON):
            if not candidate.is_file():
                continue
            try:
                report = ComplianceReport.model_validate_json(candidate.read_text("utf-8"))
            except ValidationError as exc:
                raise ComparisonInputError(
                    f"{candidate}: not a mirage compliance report ({exc.errors()[0]['msg']}); "
                    "re-run mirage compliance or move the file away"
                ) from exc
            return [row.model_dump(mode="json") for row in report.rows]
    return []


def _facts_table(answerers: Sequence[Answerer]) -> str:
    rows = [
        [
            a.label,
            a.directory,
            a.facts.pack or "?",
            a.facts.profile or "?",
            a.facts.scoring or "?",
            a.facts.summary_format or "?",
            ", ".join(f"{s}@{eit if eit is not None else '?'}" for s, eit in a.facts.depth.items()),
        ]
        for a in answerers
    ]
    header = ["Model", "Folder", "Pack", "Profile", "Scoring", "Summary", "States @ EIT"]
    return markdown_table(header, rows)


def compared_formats(
    aggregates: dict[str, Aggregate], records: dict[str, list[ProbeRecord]]
) -> dict[str, list[FormatRow]]:
    """SC/GC per summary format for every answerer, when the answerers ran two or more
    formats between them (in one run or across runs)."""
    formats = {f for rs in records.values() for f in state_formats(rs).values()}
    if len(formats) < 2:
        return {}
    return {label: format_rows(aggregates[label], records[label], single=True) for label in records}


def profile_states(aggregates: dict[str, Aggregate]) -> list[str]:
    """The depth profile's states (not a summary format's ``S2@<format>``), in run order."""
    states: list[str] = []
    for agg in aggregates.values():
        states += [s for s in agg.states if s not in states and FORMAT_SEPARATOR not in s]
    return states


def _whole_percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def _whole_points(value: float | None) -> str:
    if value is None:
        return "—"
    return "0" if round(value) == 0 else f"{value:+.0f}"


PATH_SHORT = {"R_context": "ctx", "R_boot": "boot", "R_tool": "tool", "R_none": "none"}


def path_mix(agg: Aggregate, states: Sequence[str], condition: str) -> str:
    """The share of each access path among the recorded probes of ``states`` (pooled), the
    paths no probe took left out."""
    cells = [c for s in states if (c := agg.states.get(s, {}).get(condition)) is not None]
    total = sum(c.n for c in cells)
    if not total:
        return "—"
    shares = {p: sum(c.paths[p].n for c in cells if p in c.paths) for p in PATH_SHORT}
    return " · ".join(f"{PATH_SHORT[p]} {100 * n / total:.0f}" for p, n in shares.items() if n)


def headline_table(aggregates: dict[str, Aggregate]) -> str:
    """Per answerer and condition: GC at each profile state, Δcomp, MI at the deep state,
    protocol failures and the path mix, all in percent (Δcomp in percentage points)."""
    states = profile_states(aggregates)
    deep = next(iter(aggregates.values())).roles.deep if aggregates else StateRoles().deep
    header = [
        "Answerer", "Cond.", *(f"GC % {s}" for s in states), "Δcomp pp",
        f"MI % {deep}", "PF / probes", "Path mix %",
    ]  # fmt: skip
    rows = []
    for label, agg in aggregates.items():
        first = True
        for condition, diag in sorted(agg.diagnostics.items()):
            cells = [agg.states.get(s, {}).get(condition) for s in states]
            recorded = [c for c in cells if c is not None]
            rows.append(
                [
                    label if first else "",
                    condition,
                    *(_whole_percent(None if c is None else c.GC) for c in cells),
                    _whole_points(None if diag.delta_comp is None else 100 * diag.delta_comp),
                    _whole_percent(diag.MI_d80k),
                    f"{sum(c.PF_total for c in recorded)}/{sum(c.n for c in recorded)}",
                    path_mix(agg, states, condition),
                ]
            )
            first = False
    return markdown_table(header, rows)


def headline_reading(aggregates: dict[str, Aggregate]) -> str:
    roles = next(iter(aggregates.values())).roles if aggregates else StateRoles()
    return (
        f"GC and MI in percent; Δcomp = GC at {roles.post} − GC at {roles.deep} in percentage "
        "points (below zero: compaction lost grounding); PF = replies that failed the protocol; "
        "path mix = share of probes per access path (ctx: in the active context, boot: loaded "
        "at start, tool: a retrieval call, none: no path). Every other number is below."
    )


def described_states(summaries: Sequence[FormatSummary]) -> dict[str, str]:
    """Compaction state -> what wrote its summary (``verbatim by reference/keep-charts``)."""
    from harness.mirage.report.summary_checks import summarizer_of

    described: dict[str, str] = {}
    first: dict[str, str] = {}
    for summary in summaries:
        plain = split_format(summary.summary_format)[0]
        who = summarizer_of(summary)
        arm = f"{plain} by {who}" if who else plain
        same = first.setdefault(arm, summary.state)
        described[summary.state] = (
            arm if same == summary.state else f"{arm}, the same arm as {same}"
        )
    return described


def format_gc_table(
    aggregates: dict[str, Aggregate], names: StateNames, described: dict[str, str]
) -> str:
    """GC (percent) of every answerer at every compaction state, one column per state, with
    the key of the short state names."""
    states: list[str] = []
    for agg in aggregates.values():
        states += [
            s for s in agg.states if s not in states and (FORMAT_SEPARATOR in s or s in described)
        ]
    rows = []
    for label, agg in aggregates.items():
        for condition in sorted({c for conds in agg.states.values() for c in conds}):
            cells = [agg.states.get(s, {}).get(condition) for s in states]
            if all(c is None for c in cells):
                continue
            gc = [_whole_percent(None if c is None else c.GC) for c in cells]
            rows.append([label, condition, *gc])
    table = markdown_table(["Answerer", "Cond.", *(f"GC % {names.of(s)}" for s in states)], rows)
    key = [
        f"- {names.of(s)}: {described.get(s, s)}" + (f" (`{s}`)" if names.of(s) != s else "")
        for s in states
    ]
    return table + "\n\n" + "\n".join(key)


def _paths_appendix(aggregates: dict[str, Aggregate]) -> str:
    """Per model: the four path shares, GC/VC/OG by path, the visibility grid, GC per class."""
    parts = []
    for label, agg in aggregates.items():
        parts += [
            f"### {label} · retrieval-path composition",
            tables.paths_table(agg),
            f"### {label} · GC, VC and OG by retrieval path",
            tables.path_grounding_table(agg),
            f"### {label} · visibility map",
            tables.visibility_grid(agg),
            f"### {label} · GC per visibility class",
            tables.visibility_gc_table(agg),
        ]
    return "\n\n".join(parts)


def provenance_differences(directories: Sequence[Path]) -> dict[str, dict[str, str]]:
    """Where the runs' recorded provenance differs (software, models, pack, machine): field ->
    result folder -> value (folders, not labels: two runs' labels can coincide)."""
    from harness.mirage.report import run_provenance_of

    return differing_fields({str(d): run_provenance_of(d) for d in directories})


def _provenance_section(comparison: Comparison) -> Section:
    rows = comparison.provenance_differences
    if not rows:
        return Section(
            title="Provenance",
            reading="The runs' provenance agrees (mirage, commit, pack, models, libraries, "
            "Python, CPU).",
        )
    people = comparison.answerers
    header = ["field", *(f"{a.label} ({a.directory})" for a in people)]
    table = markdown_table(
        header, [[key, *(row.get(a.directory, "") for a in people)] for key, row in rows.items()]
    )
    return Section(
        title="Provenance differences",
        reading=f"Where the runs' recorded provenance differs ({', '.join(rows)}): numbers from "
        "different software or machines may differ for that reason alone.",
        body=table,
    )


def _split_heading(markdown: str) -> tuple[str, str, str]:
    """A section written with its own ``## `` heading: (title, first paragraph, the rest)."""
    heading, _, rest = markdown.partition("\n\n")
    first, _, remainder = rest.partition("\n\n")
    return heading.removeprefix("## ").strip(), first.strip(), remainder.strip()


def _compaction_axis(
    comparison: Comparison, folders: dict[str, Path], aggregates: dict[str, Aggregate]
) -> list[FormatSummary]:
    """The compaction axis added to ``comparison`` (summary checks, the declared-retention
    check, the context-reader's GC per format); the degenerate summaries also open the
    overview. Returns the summaries the states start with."""
    summaries: dict[str, FormatSummary] = {}
    visibility: VisibilityMap | None = None
    for folder in folders.values():
        for summary in read_summaries(folder):
            summaries.setdefault(summary.state, summary)
        found = read_visibility(folder)
        if found is not None and (visibility is None or len(found.states) > len(visibility.states)):
            visibility = found
    listed = list(summaries.values())
    comparison.summary_checks = summary_checks(listed, visibility)
    comparison.retention_checks = retention_checks(listed, visibility)
    reader = aggregates.get(READER)
    if reader is not None:
        gc = {
            state: {condition: cell.GC for condition, cell in cells.items()}
            for state, cells in reader.states.items()
        }
        comparison.compaction_axis = compaction_axis_markdown(
            gc, listed, visibility, reader.roles.deep
        )
    return listed


def _compaction_sections(comparison: Comparison) -> list[Section]:
    sections = []
    flagged = degenerate_markdown(comparison.summary_checks)
    if flagged:
        title, first, rest = _split_heading(flagged)
        sections.append(
            Section(
                title=title,
                reading="A summary that keeps none of the planted evidence, or repeats one "
                "pattern, measures no summary: its state's numbers stay, flagged.",
                body="\n\n".join((first, rest)),
            )
        )
    if comparison.compaction_axis:
        title, first, rest = _split_heading(comparison.compaction_axis)
        sections.append(Section(title=title, reading=first, body=rest))
    retention = retention_markdown(comparison.retention_checks)
    if retention:
        title, first, rest = _split_heading(retention)
        sections.append(Section(title=title, reading=first, appendix=rest))
    return sections


def _instrument_section(check: InstrumentCheck | None) -> list[Section]:
    if check is None:
        return []
    return [
        Section(
            title=INSTRUMENT_TITLE,
            reading="The reference agents declare the path they took; where the harness's "
            "label says otherwise the instrument, not the agent, is in question.",
            body=agreement_markdown(check),
            appendix=disagreements_markdown(check),
        )
    ]


def _formats_section(
    comparison: Comparison,
    aggregates: dict[str, Aggregate],
    summaries: Sequence[FormatSummary],
    names: StateNames,
) -> list[Section]:
    described = described_states(summaries)
    if not comparison.summary_formats and len(described) < 2:
        return []
    deep = StateRoles().deep
    full = [format_table(rows, deep, label) for label, rows in comparison.summary_formats.items()]
    unique: dict[tuple[str, str], FormatSummary] = {}
    for summary in summaries:
        unique.setdefault((summary.summary_format, summary.text), summary)
    parts = [
        "SC and GC pooled over runs with Wilson 95% intervals; Δcomp from the mean per-run GC.",
        *full,
    ]
    if unique:
        parts += ["### The summaries", summaries_markdown(list(unique.values()))]
    return [
        Section(
            title=FORMATS_TITLE,
            reading="GC at each summary format's compaction state (one column per state: what "
            "wrote its summary is in the key); compare a column with the answerer's GC at "
            f"{deep} for what that summary kept.",
            body=format_gc_table(aggregates, names, described),
            appendix="\n\n".join(parts),
        )
    ]


def _figure_sections(figures: Sequence[Path]) -> list[Section]:
    return [
        Section(title=FIGURE_TITLES.get(p.name, p.stem), reading=CAPTIONS.get(p.name, ""), figure=p)
        for p in figures
        if p.name != HEADLINE_FIGURE
    ]


def _failures_section(records: dict[str, list[ProbeRecord]]) -> list[Section]:
    from harness.mirage.probing.retry import failure_summary, failures_table

    found = {label: failure_summary(rs) for label, rs in records.items()}
    failed = {label: summary for label, summary in found.items() if summary.total}
    if not failed:
        return []
    return [
        Section(
            title="Failed probes (provider and agent errors)",
            reading="Probes recorded with a provider or agent error enter no metric: "
            + ", ".join(f"{label} {summary.total}" for label, summary in failed.items())
            + ".",
            appendix="\n\n".join(
                f"### {label}\n\n{failures_table(summary)}" for label, summary in failed.items()
            ),
        )
    ]


INSTRUMENT_TITLE = "Instrument check — path labels against the reference agents"
FORMATS_TITLE = "Summary formats at the compaction state (appendix A.2)"
FIGURE_TITLES = {
    "gc_by_state.png": "Figure — GC by state, every state",
    "mi_by_state.png": "Figure 3 — Mirage Index by state",
    "transitions.png": "Figure 4 — grounding transitions",
    "path_composition.png": "Figure 5 — retrieval-path composition",
    "cm_minus_c0.png": "Figure 6 — effect of retrieval pressure (Cm − C0)",
}


def _diagnostics_section(comparison: Comparison, aggregates: dict[str, Aggregate]) -> Section:
    """Table 2: each answerer's cross-state diagnostics, the full tables and the ranking below."""
    roles = next(iter(aggregates.values())).roles if aggregates else StateRoles()
    diagnostics = [f"### {c}\n\n{t}" for c, t in diagnostics_tables(comparison).items()]
    og = [f"### OG per state · {c}\n\n{t}" for c, t in og_rows(aggregates).items()]
    return Section(
        title="Table 2 — cross-state diagnostics per model",
        reading=f"DS: how much GC falls from {roles.d0} to {roles.deep} (%); Δcomp: GC "
        f"after compaction − before (pp); Ret: {roles.d0}-grounded probes still grounded "
        f"at {roles.deep}; MI at {roles.deep}. Lower DS and MI, higher Δcomp and Ret are "
        "better; overlapping intervals leave the order open.",
        body="\n\n".join(diagnostics),
        appendix="\n\n".join(
            [
                "DS and Δcomp intervals: percentile bootstrap over questions "
                f"({BOOTSTRAP_SAMPLES} resamples, pooled over runs); Ret and MI_d80k: Wilson "
                "on the pooled counts. OG = VC − GC in percentage points.",
                *og,
                "### Ranking",
                ranking_tables(comparison.ranking),
            ]
        ),
    )


def comparison_sections(
    comparison: Comparison,
    aggregates: dict[str, Aggregate],
    records: dict[str, list[ProbeRecord]],
    figures: Sequence[Path],
    summaries: Sequence[FormatSummary],
    names: StateNames,
) -> list[Section]:
    """Everything below the headline, in the order both the Markdown and the page show it."""
    sections = [
        _diagnostics_section(comparison, aggregates),
        *_instrument_section(comparison.instrument),
        *_compaction_sections(comparison),
        *_formats_section(comparison, aggregates, summaries, names),
        *_figure_sections(figures),
        Section(
            title="Table 1 — metrics per model, state and condition",
            reading="Every metric of every answerer at every state under each condition, in "
            "percent (OG in percentage points; PF the mean count per run, n the probes).",
            appendix="\n\n".join(f"### {c}\n\n{t}" for c, t in table1_blocks(aggregates).items()),
        ),
        Section(
            title="Retrieval paths and visibility per model",
            reading="Per answerer: the share of each access path, GC/VC/OG on each path, where "
            "each planted artifact's content was at each checkpoint, and GC per visibility class.",
            appendix=_paths_appendix(aggregates),
        ),
        *_failures_section(records),
    ]
    return [*sections, *_runs_sections(comparison)]


def _runs_sections(comparison: Comparison) -> list[Section]:
    """The tool-compliance table when one lies beside the runs, then the runs themselves and
    where their provenance differs."""
    from runtime.compliance import ComplianceRow, render_markdown

    sections = []
    if comparison.compliance:
        rows = [ComplianceRow.model_validate(r) for r in comparison.compliance]
        sections.append(
            Section(
                title="Tool compliance (mirage compliance)",
                reading="Whether each backbone calls the tool when asked to, beside the runs.",
                body=render_markdown(rows),
            )
        )
    banner = (
        "All answerers ran the same pack, depth profile, scoring profile and depth coordinates."
        if comparison.comparable
        else "**NOT COMPARABLE** — the runs differ: " + "; ".join(comparison.differences) + "."
    )
    sections += [
        Section(
            title="Runs compared",
            reading="Each answerer's result folder, pack, profile, scoring, summary format and "
            "state depths.",
            body=banner + "\n\n" + _facts_table(comparison.answerers),
        ),
        _provenance_section(comparison),
    ]
    return sections


def comparison_opening(
    comparison: Comparison, aggregates: dict[str, Aggregate], headline: Path | None
) -> list[str]:
    """The first screen: title, the banner when the runs are not comparable, the verdict, the
    headline figure and the compact table."""
    parts = ["# MIRAGE comparison"]
    if not comparison.comparable:
        parts.append(
            "**NOT COMPARABLE** — the runs differ: " + "; ".join(comparison.differences) + "."
        )
    parts.append(comparison.overview)
    if headline is not None:
        parts += [
            f"![GC by state per answerer]({COMPARISON_FIGURES}/{headline.name})",
            f"*{CAPTIONS[HEADLINE_FIGURE]}*",
        ]
    parts += [
        "**Per answerer at a glance**",
        headline_table(aggregates),
        f"*{headline_reading(aggregates)}*",
        f"Full tables: [{COMPARISON_APPENDIX}]({COMPARISON_APPENDIX}); every probe, filterable, "
        f"in {COMPARISON_HTML}.",
    ]
    return parts


class ComparisonFiles(BaseModel):
    markdown: Path
    appendix: Path
    data: Path
    html: Path
    figures: list[Path]
    comparison: Comparison


def write_comparison(
    answerers: dict[Path, list[ProbeRecord]],
    out: Path,
    allow_incomparable: bool = False,
    roles: StateRoles | None = None,
) -> ComparisonFiles:
    """Compare the answerers (result folder -> records) into ``out``; raises
    ``NotComparableError`` when they differ in what makes them comparable, unless allowed."""
    folders = _labelled(answerers)
    people = [
        Answerer(label=label, directory=str(d), facts=run_facts(d, answerers[d]))
        for label, d in folders.items()
    ]
    found = differences(people)
    if found and not allow_incomparable:
        raise NotComparableError(
            "runs are not comparable: " + "; ".join(found) + " (compare runs of one pack, "
            "profile, scoring and depth, or pass --allow-incomparable to mark them so)"
        )
    records = {label: answerers[d] for label, d in folders.items()}
    aggregates = {
        label: aggregate(rs, roles, read_visibility(folders[label]))
        for label, rs in records.items()
    }
    comparison = Comparison(
        comparable=not found,
        differences=found,
        answerers=people,
        ranking=ranking(aggregates, records),
        summaries={label: agg.summary() for label, agg in aggregates.items()},
        compliance=find_compliance([out, *answerers, *(d.parent for d in answerers)]),
        summary_formats=compared_formats(aggregates, records),
        overview=overview(aggregates),
        provenance_differences=provenance_differences(list(answerers)),
    )
    comparison.instrument = instrument_check(records)
    summaries = _compaction_axis(comparison, folders, aggregates)
    lines = degenerate_lines(comparison.summary_checks)
    if lines and comparison.overview:
        comparison.overview += "\n\nFlagged: " + "; ".join(lines) + "."
    out.mkdir(parents=True, exist_ok=True)
    described = described_states(summaries)
    figures = draw_figures(aggregates, out / COMPARISON_FIGURES, described)
    names = state_names([s for agg in aggregates.values() for s in agg.states], described)
    headline = next((p for p in figures if p.name == HEADLINE_FIGURE), None)
    opening = comparison_opening(comparison, aggregates, headline)
    sections = comparison_sections(comparison, aggregates, records, figures, summaries, names)
    files = ComparisonFiles(
        markdown=out / COMPARISON_MD, appendix=out / COMPARISON_APPENDIX,
        data=out / COMPARISON_JSON, html=out / COMPARISON_HTML, figures=figures,
        comparison=comparison,
    )  # fmt: skip
    pages = {label: (d, answerers[d], aggregates[label]) for label, d in folders.items()}
    _write_files(files, opening, sections, pages, headline)
    return files


def _labelled(answerers: dict[Path, list[ProbeRecord]]) -> dict[str, Path]:
    """Each answerer's label, unique among them, and its result folder, in the given order."""
    labelled = [(d, answerer_label(d, rs)) for d, rs in answerers.items()]
    labels = unique_labels(labelled)
    return {label: d for (d, _), label in zip(labelled, labels, strict=True)}


def _write_files(
    files: ComparisonFiles,
    opening: list[str],
    sections: list[Section],
    pages: dict[str, tuple[Path, list[ProbeRecord], Aggregate]],
    headline: Path | None,
) -> None:
    """comparison.md, its appendix, comparison.json and comparison.html."""
    comparison = files.comparison
    aggregates = {label: agg for label, (_, _, agg) in pages.items()}
    differ = "; ".join(comparison.differences)
    files.markdown.write_text(
        report_markdown(opening, sections, COMPARISON_APPENDIX, COMPARISON_FIGURES), "utf-8"
    )
    files.appendix.write_text(
        appendix_markdown("MIRAGE comparison — appendix", COMPARISON_MD, sections), "utf-8"
    )
    files.data.write_text(comparison.model_dump_json(indent=2) + "\n", "utf-8")
    write_comparison_html(
        files.html,
        "MIRAGE comparison",
        pages,
        verdict=comparison.overview,
        banner="" if comparison.comparable else "NOT COMPARABLE: " + differ,
        headline=headline,
        headline_caption=CAPTIONS[HEADLINE_FIGURE],
        table=headline_table(aggregates),
        table_reading=headline_reading(aggregates),
        sections=sections,
    )
