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
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ValidationError

from harness.kit.provenance import differing_fields
from harness.kit.report.tables import fmt, markdown_table
from harness.kit.results import RESULTS_FILE
from harness.kit.rundir import run_config_path
from harness.kit.stats import Interval, wilson_interval
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.probing.visibility import VisibilityMap, read_visibility
from harness.mirage.report import tables
from harness.mirage.report.aggregate import Aggregate, StateRoles, aggregate
from harness.mirage.report.figures import draw_figures
from harness.mirage.report.formats import (
    FormatRow,
    FormatSummary,
    format_rows,
    format_table,
    read_summaries,
    state_formats,
    summaries_markdown,
)
from harness.mirage.report.html import answerer_label, write_html
from harness.mirage.report.instrument import InstrumentCheck, check_section
from harness.mirage.report.overview import READER, overview
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
from harness.mirage.trunk.checkpoints import base_state

COMPARISON_MD = "comparison.md"
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
                cells = [get_metric(c).render(values[c]) for c in TABLE1_COLUMNS]
                rows.append([label if first else "", state, *cells])
                first = False
        tables[condition] = markdown_table(
            ["Model", "State", *(get_metric(c).title for c in TABLE1_COLUMNS)], rows
        )
    return tables


def table2_rows(aggregates: dict[str, Aggregate]) -> dict[str, str]:
    """Per condition: Table 2 with one row per model (OG per state as a proportion)."""
    states: list[str] = []
    for agg in aggregates.values():
        states += [s for s in agg.states if s not in states]
    conditions = sorted({c for agg in aggregates.values() for c in agg.diagnostics})
    tables = {}
    for condition in conditions:
        rows = []
        for label, agg in aggregates.items():
            diag = agg.diagnostics.get(condition)
            if diag is None:
                continue
            values = diag.model_dump()
            cells = [get_metric(n).render(values[n]) for n in DIAGNOSTICS]
            ogs = [agg.states.get(s, {}).get(condition) for s in states]
            og = [fmt(None if c is None or c.OG is None else c.OG / 100, 2) for c in ogs]
            rows.append([label, *cells, *og])
        titles = [get_metric(n).title for n in DIAGNOSTICS]
        tables[condition] = markdown_table(["Model", *titles, *(f"OG {s}" for s in states)], rows)
    return tables


def _interval_text(row: Ranked, name: str) -> str:
    metric = get_metric(name)
    if row.low is None or row.high is None:
        return "—"
    return f"[{metric.render(row.low)}, {metric.render(row.high)}]"


def ranking_tables(ranked: dict[str, dict[str, list[Ranked]]]) -> str:
    sections = []
    for condition, by_metric in ranked.items():
        for name, rows in by_metric.items():
            metric = get_metric(name)
            better = "lower" if LOWER_IS_BETTER[name] else "higher"
            table = markdown_table(
                ["Rank", "Model", metric.title, "95% interval"],
                [
                    [str(i + 1), r.label, metric.render(r.value), _interval_text(r, name)]
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


def _formats_section(comparison: Comparison) -> str:
    if not comparison.summary_formats:
        return ""
    deep = StateRoles().deep
    tables = [format_table(rows, deep, label) for label, rows in comparison.summary_formats.items()]
    summaries: dict[tuple[str, str], FormatSummary] = {}
    for answerer in comparison.answerers:
        for summary in read_summaries(Path(answerer.directory)):
            summaries.setdefault((summary.summary_format, summary.text), summary)
    parts = [
        "## Summary formats at the compaction state (appendix A.2)",
        "SC and GC pooled over runs with Wilson 95% intervals; Δcomp from the mean per-run GC.",
        *tables,
    ]
    if summaries:
        parts += ["## The summaries", summaries_markdown(list(summaries.values()))]
    return "\n\n".join(parts)


def _paths_section(aggregates: dict[str, Aggregate]) -> str:
    """Per model: the four path shares, GC/VC/OG by path, the visibility grid, GC per class."""
    parts = ["## Retrieval paths and visibility per model"]
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


def _provenance_section(comparison: Comparison) -> str:
    rows = comparison.provenance_differences
    if not rows:
        return (
            "## Provenance\n\nThe runs' provenance agrees (mirage, commit, pack, models, "
            "libraries, Python, CPU)."
        )
    people = comparison.answerers
    header = ["field", *(f"{a.label} ({a.directory})" for a in people)]
    table = markdown_table(
        header, [[key, *(row.get(a.directory, "") for a in people)] for key, row in rows.items()]
    )
    return "## Provenance differences\n\nWhere the runs' `provenance` blocks differ:\n\n" + table


def _compaction_sections(
    comparison: Comparison,
    folders: dict[str, Path],
    aggregates: dict[str, Aggregate],
    instrument: str,
) -> str:
    """The compaction axis added to ``comparison`` (summary checks, the declared-retention
    check, the context-reader's GC per format); the degenerate summaries also open the
    overview. Returns the instrument sections with the compaction ones before them."""
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
    flagged = degenerate_markdown(comparison.summary_checks)
    lines = degenerate_lines(comparison.summary_checks)
    if lines and comparison.overview:
        comparison.overview += "\n\nFlagged: " + "; ".join(lines) + "."
    parts = [
        flagged,
        retention_markdown(comparison.retention_checks),
        comparison.compaction_axis,
        instrument,
    ]
    return "\n\n".join(part for part in parts if part)


def render_comparison(
    comparison: Comparison,
    aggregates: dict[str, Aggregate],
    figures: Sequence[Path],
    instrument: str = "",
) -> str:
    """``instrument``: the instrument-check section (``check_section``), if any."""
    from runtime.compliance import ComplianceRow, render_markdown

    banner = (
        "All answerers ran the same pack, depth profile, scoring profile and depth coordinates."
        if comparison.comparable
        else "**NOT COMPARABLE** — the runs differ: " + "; ".join(comparison.differences) + "."
    )
    sections = ["# MIRAGE comparison", comparison.overview, banner]
    sections.append(_facts_table(comparison.answerers))
    sections.append(_provenance_section(comparison))
    sections.append("## Table 1 — metrics per model, state and condition")
    sections += [f"### {c}\n\n{t}" for c, t in table1_blocks(aggregates).items()]
    sections.append("## Table 2 — cross-state diagnostics per model")
    sections += [f"### {c}\n\n{t}" for c, t in table2_rows(aggregates).items()]
    sections.append(instrument)
    sections.append(
        "## Ranking\n\nDS and Δcomp intervals: percentile bootstrap over questions "
        f"({BOOTSTRAP_SAMPLES} resamples, pooled over runs); Ret and MI_d80k: Wilson on the "
        "pooled counts. Overlapping intervals mean the order is not established."
    )
    sections.append(ranking_tables(comparison.ranking))
    sections.append(_paths_section(aggregates))
    sections.append(_formats_section(comparison))
    if comparison.compliance:
        rows = [ComplianceRow.model_validate(r) for r in comparison.compliance]
        sections.append("## Tool compliance (mirage compliance)\n\n" + render_markdown(rows))
    sections.append("## Figures")
    sections.append(
        "\n".join(f"![{p.stem}]({COMPARISON_FIGURES}/{p.name})" for p in figures) or "None."
    )
    return "\n\n".join(s.strip() for s in sections if s.strip()) + "\n"


class ComparisonFiles(BaseModel):
    markdown: Path
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
    labelled = [(d, answerer_label(d, rs)) for d, rs in answerers.items()]
    labels = unique_labels(labelled)
    people = [
        Answerer(label=label, directory=str(d), facts=run_facts(d, answerers[d]))
        for (d, _), label in zip(labelled, labels, strict=True)
    ]
    found = differences(people)
    if found and not allow_incomparable:
        raise NotComparableError(
            "runs are not comparable: " + "; ".join(found) + " (compare runs of one pack, "
            "profile, scoring and depth, or pass --allow-incomparable to mark them so)"
        )
    folders = {label: d for (d, _), label in zip(labelled, labels, strict=True)}
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
    instrument, comparison.instrument = check_section(records)
    instrument = _compaction_sections(comparison, folders, aggregates, instrument)
    out.mkdir(parents=True, exist_ok=True)
    figures = draw_figures(aggregates, out / COMPARISON_FIGURES)
    files = ComparisonFiles(
        markdown=out / COMPARISON_MD, data=out / COMPARISON_JSON, html=out / COMPARISON_HTML,
        figures=figures,
        comparison=comparison,
    )  # fmt: skip
    files.markdown.write_text(
        render_comparison(comparison, aggregates, figures, instrument), "utf-8"
    )
    files.data.write_text(comparison.model_dump_json(indent=2) + "\n", "utf-8")
    pages = {
        label: (d, answerers[d], aggregates[label])
        for (d, _), label in zip(labelled, labels, strict=True)
    }
    banner = "" if comparison.comparable else "NOT COMPARABLE: " + "; ".join(found)
    preface = "\n\n".join(block for block in (comparison.overview, instrument) if block)
    write_html(files.html, "MIRAGE comparison", pages, figures, banner, preface=preface)
    return files
