"""The run report: ``summary.json``, ``details.json``, ``report.md``, ``report.html``, figures.

Above: ``mirage report DIR`` and the end of ``mirage run``. Below:
``harness.mirage.report.aggregate`` over the records of ``DIR/results.jsonl``, and the kit's report
building blocks (``harness.kit.report``). ``summary.json`` has the shape of issue 7 plus
``failed_probes`` (every probe recorded with a provider or agent error, per state and condition:
``harness.mirage.probing.retry``) and ``usage``: tokens (input, cached read, cache write, output)
and cost per model (``harness.mirage.costs``), and with several summary formats ``summary_formats``
(``harness.mirage.report.formats``), and when the states start with compaction summaries
``summary_checks`` (degenerate summaries flagged) and ``retention_checks`` (reference
summarizers' declared retention against the visibility map:
``harness.mirage.report.summary_checks``); everything else
a report needs (Wilson intervals, repeats, paths, transitions, drift, deltas) goes to
``details.json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from harness.kit.provenance import (
    Provenance,
    provenance_lines,
    provenance_markdown,
    read_provenance,
)
from harness.kit.results import read_records
from harness.kit.rundir import run_config_path
from harness.mirage.costs import ModelUsage, model_usage, usage_markdown
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.probing.retry import FailureSummary, failure_summary, failures_section
from harness.mirage.probing.visibility import check_visibility, read_visibility
from harness.mirage.report import tables
from harness.mirage.report.aggregate import Aggregate, StateRoles, aggregate
from harness.mirage.report.figures import CAPTIONS, draw_figures
from harness.mirage.report.formats import (
    check_summaries,
    format_rows,
    formats_section,
    read_summaries,
)
from harness.mirage.report.html import HTML_FILE, answerer_label, write_html
from harness.mirage.report.instrument import check_section
from harness.mirage.report.summary_checks import (
    RetentionCheck,
    SummaryCheck,
    degenerate_lines,
    degenerate_markdown,
    retention_checks,
    retention_markdown,
    summary_checks,
)

SUMMARY_FILE = "summary.json"
DETAILS_FILE = "details.json"
REPORT_FILE = "report.md"
FIGURES_DIR = "figures"


class ReportFiles(BaseModel):
    summary: Path
    details: Path
    report: Path
    html: Path
    figures: list[Path]
    aggregate: Aggregate
    flagged: list[str] = []  # the degenerate compaction summaries, in words


def _write_json(path: Path, payload: object) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temp, path)


def details(agg: Aggregate) -> dict[str, object]:
    dumped = agg.model_dump(mode="json")
    keys = ("scoring", "runs", "roles", "cells", "cross_state", "deltas")
    return {k: dumped[k] for k in keys}


def scoring_line(agg: Aggregate) -> str:
    """Which scoring profile produced the numbers, in one sentence."""
    if agg.scoring is None:
        return "Scoring profile: none (no records)."
    from harness.mirage.scoring import get_profile

    profile = get_profile(agg.scoring)
    return f"Scoring profile: **{profile.name}** — {profile.summary} (docs/metrics.md)."


def render_markdown(
    agg: Aggregate,
    figures: Iterable[Path],
    title: str = "MIRAGE report",
    note: str | None = None,
    provenance: Provenance | None = None,
) -> str:
    """The body of ``report.md``: title, provenance, scoring line (and ``note``), Tables 1 and 2,
    intervals and repeats, transitions and drift, retrieval paths, the visibility map, the
    Cm − C0 deltas and the figures."""
    sections = [
        f"# {title}",
        provenance_markdown(provenance),
        scoring_line(agg) + (f" {note}" if note else ""),
        "All metrics are computed from the indicator fields of `results.jsonl` "
        f"(definitions: docs/metrics.md). Runs: {agg.runs}. Percentages are means of the "
        "per-run rates; PF is the mean count per run (per-run values and totals in "
        "details.json); n counts recorded probes over all runs.",
        *_state_sections(agg),
        *_transition_sections(agg),
        *_path_sections(agg),
        *_visibility_sections(agg),
        "## Cm − C0 (percentage points)",
        tables.deltas_table(agg) if agg.deltas else "No state ran both C0 and Cm.",
        "## Figures",
        "\n\n".join(
            f"![{p.stem}]({FIGURES_DIR}/{p.name})\n\n*{CAPTIONS.get(p.name, p.stem)}*"
            for p in figures
        )
        or "None.",
    ]
    return "\n\n".join(sections) + "\n"


def _state_sections(agg: Aggregate) -> list[str]:
    """Tables 1 and 2 (per state and condition, cross-state), Wilson intervals, repeats."""
    roles = agg.roles
    return [
        "## Table 1 — metrics per state and condition",
        "AC over parsed probes; SC, VC, GC, WS over parsed answerable probes; HR over parsed "
        "unanswerable probes; MI over all recorded answerable probes (PF counts as 0); "
        "OG = VC − GC (points); R_tool over all recorded probes.",
        tables.table1(agg),
        "## Table 2 — cross-state diagnostics",
        f"DS = 100·(GC[{roles.d0}] − GC[{roles.deep}])/GC[{roles.d0}]; "
        f"Δcomp = GC[{roles.post}] − GC[{roles.deep}]; Ret = share of "
        f"{roles.d0}-correct probes still correct at {roles.deep} (mean over runs); MI_d80k = MI "
        f"at {roles.deep}. Rates in percent, differences (Δcomp, OG) in percentage points: the "
        "paper prints Δcomp and OG as fractions (divide by 100).",
        tables.table2(agg),
        "## Wilson 95% intervals (per run; pooled rows labelled)",
        tables.intervals_table(agg),
        "## Mean ± SD over repeats",
        tables.repeats_table(agg),
    ]


def _transition_sections(agg: Aggregate) -> list[str]:
    """Grounding transitions across the three roles, then retention and source drift."""
    roles = agg.roles
    return [
        f"## Grounding transitions {roles.d0} → {roles.deep} → {roles.post}",
        "Answerable probes recorded in all three states, counted over all runs; ✓ grounded "
        "(GC=1), × not grounded or PF.",
        tables.transitions_table(agg),
        f"## Retention and source drift {roles.d0} → {roles.deep} (pooled over runs)",
        tables.drift_table(agg),
    ]


def _path_sections(agg: Aggregate) -> list[str]:
    """Retrieval-path composition, then GC, VC and OG per path."""
    return [
        "## Retrieval-path composition",
        "The four paths in priority order R_context > R_boot > R_tool > R_none (docs/metrics.md): "
        "share of recorded probes, mean over runs (probes over all runs in parentheses); "
        "`binary`: records of an older file whose path is the two-way label (R_tool if a "
        "retrieval call ran, else R_context), not the four-way one.",
        tables.paths_table(agg),
        "### GC, VC and OG by retrieval path",
        "Parsed answerable probes on each path, pooled over runs (counts in parentheses). VC on "
        "R_none is a right value with no access path (Table 1's VC∧R_none per run).",
        tables.path_grounding_table(agg),
    ]


def _visibility_sections(agg: Aggregate) -> list[str]:
    """The visibility map (where each artifact's content is per checkpoint), then GC per
    visibility class."""
    return [
        "## Visibility map — where each planted artifact's content is at each checkpoint",
        "verbatim: in the active context outside the compaction summary; summary only: only "
        "the compaction summary holds it; notes only: only the workspace notes (memory flush); "
        "nowhere. The context rule is the R_context rule (docs/metrics.md).",
        tables.visibility_grid(agg),
        "### GC per visibility class",
        "Each answerable probe joins the class of its gold artifact at its state (pooled over "
        "runs): it shows which evidence the compaction dropped behind Δcomp.",
        tables.visibility_gc_table(agg),
    ]


def _usage_section(usages: list[ModelUsage]) -> str:
    return (
        "\n## Tokens and cost\n\nEvery backbone call of the recorded probes (tool rounds "
        "included); cache reads and writes are parts of the input. Prices: litellm's local "
        "price map (unknown when the map has none).\n\n" + usage_markdown(usages) + "\n"
    )


def _attribution_section(directory: Path) -> str:
    """The memory-server attribution of an agent under test, when the run wrote one."""
    path = directory / "attribution.json"
    if not path.exists():
        return ""
    from harness.mirage.report.attribution import AttributionSummary, summary_text

    summary = AttributionSummary.model_validate_json(path.read_text(encoding="utf-8"))
    return "\n## Memory-server attribution (agent under test)\n\n" + summary_text(summary) + "\n"


def run_provenance_of(directory: Path) -> Provenance | None:
    """The provenance ``mirage run`` recorded for a result folder (its ``run.json``)."""
    path = run_config_path(directory)
    return read_provenance(path) if path is not None else None


def write_report(
    directory: str | os.PathLike[str],
    records: Iterable[ProbeRecord] | None = None,
    roles: StateRoles | None = None,
    note: str | None = None,
) -> ReportFiles:
    """Aggregate ``directory``'s results (or the given records) and write every report file;
    ``note`` (e.g. how the records were rescored) goes under the report's scoring line."""
    out = Path(directory)
    records = list(records if records is not None else read_records(out, ProbeRecord))
    visibility = read_visibility(out)  # every file read back is checked before any is written
    check_visibility(visibility, (r.state for r in records), out)
    summaries = read_summaries(out)
    check_summaries(summaries, records, out)
    checked = summary_checks(summaries, visibility)
    retention = retention_checks(summaries, visibility)
    provenance = run_provenance_of(out)
    agg = aggregate(records, roles, visibility)
    usages = model_usage(records)
    out.mkdir(parents=True, exist_ok=True)
    figures = draw_figures({"": agg}, out / FIGURES_DIR)
    files = ReportFiles(
        summary=out / SUMMARY_FILE,
        details=out / DETAILS_FILE,
        report=out / REPORT_FILE,
        html=out / HTML_FILE,
        figures=figures,
        aggregate=agg,
        flagged=degenerate_lines(checked),
    )
    failures = failure_summary(records)
    summary = _summary_payload(agg, records, usages, failures, provenance, checked, retention)
    _write_json(files.summary, summary)
    _write_json(files.details, details(agg))
    body = _report_body(out, agg, records, figures, note, provenance, failures, usages)
    preface = _preface(out, records, checked, retention)
    body += _attribution_section(out) + (f"\n{preface}\n" if preface else "")
    files.report.write_text(body, encoding="utf-8")
    label = answerer_label(out, records)
    write_html(
        files.html,
        f"MIRAGE report — {label}",
        {label: (out, records, agg)},
        figures,
        note or "",
        provenance_lines(provenance) if provenance else [],
        preface=preface,
    )
    return files


def _summary_payload(
    agg: Aggregate,
    records: list[ProbeRecord],
    usages: list[ModelUsage],
    failures: FailureSummary,
    provenance: Provenance | None,
    checked: list[SummaryCheck],
    retention: list[RetentionCheck],
) -> dict[str, object]:
    """What ``summary.json`` holds: the provenance (when recorded), the aggregate's summary,
    the failed probes, the usage, and when there are any the summary-format rows and the
    compaction summaries' checks."""
    usage = {"usage": [u.model_dump(mode="json") for u in usages]}
    rows = format_rows(agg, records)
    by_format = {"summary_formats": [r.model_dump(mode="json") for r in rows]} if rows else {}
    failed = {"failed_probes": failures.model_dump(mode="json")}
    block = {"provenance": provenance.model_dump(mode="json")} if provenance else {}
    compaction = (
        {
            "summary_checks": [{**c.model_dump(mode="json"), "line": c.line} for c in checked],
            "retention_checks": [c.model_dump(mode="json") for c in retention],
        }
        if checked
        else {}
    )
    return {**block, **agg.summary(), **failed, **usage, **by_format, **compaction}


def _report_body(
    out: Path,
    agg: Aggregate,
    records: list[ProbeRecord],
    figures: list[Path],
    note: str | None,
    provenance: Provenance | None,
    failures: FailureSummary,
    usages: list[ModelUsage],
) -> str:
    """``report.md`` up to the attribution: the rendered tables, then the failed probes, the
    summary formats, and tokens and cost."""
    sections = render_markdown(agg, figures, note=note, provenance=provenance)
    sections += failures_section(failures)
    sections += formats_section(out, agg, records)
    sections += _usage_section(usages)
    return sections


def _preface(
    out: Path,
    records: list[ProbeRecord],
    checked: list[SummaryCheck],
    retention: list[RetentionCheck],
) -> str:
    """The flagged checks as Markdown sections ("" when there are none): degenerate compaction
    summaries, reference summarizers' retention, the instrument check. They end ``report.md``
    and come first on the HTML page."""
    instrument, _ = check_section({answerer_label(out, records): records})
    flagged = "\n\n".join(
        part for part in (degenerate_markdown(checked), retention_markdown(retention)) if part
    )
    return "\n\n".join(part for part in (flagged, instrument) if part)
