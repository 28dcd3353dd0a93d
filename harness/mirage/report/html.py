"""``report.html``: one self-contained page per run, opened from disk (no server, no network).

Above: the report writer (one answerer per result folder) and the comparison (every answerer).
Below: probe records, the memory server's call log (``calls.jsonl``, one line per tool call,
tagged with the probe's attribution tag), the pack's question wording, the report's tables and
figures. Everything is embedded: the probes as JSON in the page, figures as PNG data URIs, the
script and style inline; the template is rendered by jinja2 with autoescaping.

Outcomes (the page's filter): ``grounded`` (GC = 1); ``ungrounded-but-correct`` (VC = 1,
GC = 0); ``hallucinated`` (an answer claimed where it is wrong or where there is none: answerable
with ẑ = YES and VC = 0, or HR = 1); ``refused`` (ẑ = NO and no answer claimed); ``PF``;
``provider-error``.
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog
from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import ValidationError

from harness.kit.rundir import run_config_path
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report.aggregate import Aggregate
from harness.mirage.report.figures import CAPTIONS
from harness.mirage.report.sections import Section, markdown_html, markdown_inline_html
from harness.mirage.scoring.metrics import PROBE_INDICATORS, get_metric

log = structlog.get_logger(__name__)

HTML_FILE = "report.html"
CALL_LOG = "calls.jsonl"
TEMPLATE = "report.html.j2"
COMPARISON_TEMPLATE = "comparison.html.j2"


def outcome(record: ProbeRecord) -> str:
    if record.provider_error is not None:
        return "provider-error"
    if record.pf:
        return "PF"
    if record.GC == 1:
        return "grounded"
    if record.VC == 1:
        return "ungrounded-but-correct"
    if record.HR == 1 or (record.gold_answerable == "YES" and record.parsed.answerable == "YES"):
        return "hallucinated"
    return "refused"


def _indicator_rules(record: ProbeRecord) -> list[dict[str, Any]]:
    """Each indicator with its value and the rule that set it."""
    gold = record.gold
    facts = {
        "AC": f"ẑ = {record.parsed.answerable}, z* = {record.gold_answerable}",
        "SC": f"canon(src) = {record.canonical_source}, src* = {gold.source if gold else '?'}",
        "VC": f"ŷ = {record.parsed.answer}, y* = {gold.answer if gold else '?'}",
        "GC": f"SC = {record.SC}, VC = {record.VC}",
        "HR": f"ẑ = {record.parsed.answerable}, ŷ = {record.parsed.answer}",
        "WS": f"canon(src) = {record.canonical_source}, src* = {gold.source if gold else '?'}",
    }
    rules = []
    for name in PROBE_INDICATORS:
        spec = get_metric(name)
        value = getattr(record, name)
        applies = spec.applies_to in ("all", record.gold_answerable)
        why = facts.get(name, "") if applies and not record.pf else "not applicable"
        if record.pf:
            why = f"parse failure ({record.pf_reason or 'unparsed'}): every indicator is null"
        if record.provider_error is not None:
            why = "provider error: the probe is counted apart and enters no metric"
        rules.append({"name": name, "value": value, "rule": spec.definition, "facts": why})
    return rules


def read_call_log(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """The memory server's log lines of ``directory``, by attribution tag."""
    from memory_server.calllog import read_calls

    by_tag: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for call in read_calls(directory / CALL_LOG):
        if call.tag:
            by_tag[call.tag].append(call.model_dump(mode="json"))
    return by_tag


def question_texts(directory: Path) -> dict[str, str]:
    """Question wording from the run's pack (``run.json``); empty when it cannot be loaded."""
    from harness.kit.packfiles import PackFormatError
    from harness.mirage.packs import load_pack
    from harness.mirage.packs.schema import PackPathError

    candidate = run_config_path(directory)
    if candidate is not None:
        try:
            pack = json.loads(candidate.read_text(encoding="utf-8")).get("pack")
            return {q.id: q.question for q in load_pack(pack).questions} if pack else {}
        except (OSError, ValueError, PackFormatError, PackPathError, ValidationError) as exc:
            log.warning("report_html.pack_unavailable", path=str(candidate), error=str(exc))
            return {}
    return {}


def answerer_label(directory: Path, records: Sequence[ProbeRecord]) -> str:
    """The records' model when they name one, else the folder's name."""
    models = sorted({r.model for r in records if r.model})
    return models[0] if len(models) == 1 else directory.name


PATH_SOURCES = {
    "probe": "decided from what the probe itself had (its context, start-of-session material "
    "and calls)",
    "checkpoint": "decided by mirage rescore from the checkpoint's restored context and the "
    "recorded calls",
    "binary": "an older file's two-way label (R_tool if a retrieval call ran, else R_context), "
    "kept as it was: not the four-way path, no evidence",
}


def visibility_of(agg: Aggregate, record: ProbeRecord) -> str | None:
    """The visibility class of the record's gold artifact at its state, or why it has none."""
    seen = agg.visibility
    if seen is None:
        return None
    if record.state in seen.unavailable:
        return "not available"
    artifact = None if record.gold is None else record.gold.artifact or record.gold.source
    return seen.grid.get(record.state, {}).get(artifact or "")


def probe_view(
    record: ProbeRecord,
    model: str,
    calls: dict[str, list[dict[str, Any]]],
    questions: dict[str, str],
    visibility: str | None = None,
) -> dict[str, Any]:
    tag = record.tag
    evidence = record.path_evidence
    return {
        "id": "|".join([model, *(str(part) for part in record.key)]),
        "model": model,
        "state": record.state,
        "condition": record.condition,
        "question_id": record.question_id,
        "repeat": record.repeat,
        "question": questions.get(record.question_id),
        "answerability": record.gold_answerable,
        "outcome": outcome(record),
        "gold": record.gold.model_dump(mode="json") if record.gold else None,
        "raw_output": record.raw_output,
        "parsed": record.parsed.model_dump(mode="json"),
        "pf_reason": record.pf_reason,
        "provider_error": record.provider_error,
        "finish_reason": record.finish_reason,
        "indicators": {name: getattr(record, name) for name in PROBE_INDICATORS},
        "rules": _indicator_rules(record),
        "path": record.path,
        "path_source": record.path_source,
        "path_source_text": PATH_SOURCES[record.path_source],
        "path_evidence": None if evidence is None else evidence.model_dump(mode="json"),
        "visibility": visibility,
        "tool_calls": [c.model_dump(mode="json") for c in record.tool_calls],
        "server_log": calls.get(str(tag), []) if tag else [],
        "tag": tag,
        "eit": record.usage.eit,
        "cached_tokens": record.usage.cached_tokens,
        "output_tokens": record.usage.output_tokens,
        "latency_s": record.latency_s,
        "state_eit": record.state_eit,
        "scoring": record.scoring,
    }


def markdown_to_html_table(markdown: str) -> str:
    """The pipe tables of ``harness.mirage.report.tables`` as HTML (cells escaped)."""
    from markupsafe import escape

    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    if len(lines) < 2:
        return f"<p>{escape(markdown)}</p>"

    def cells(line: str) -> list[str]:
        return [cell.strip() for cell in line.strip().strip("|").split("|")]

    head = "".join(f"<th>{escape(c)}</th>" for c in cells(lines[0]))
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells(line)) + "</tr>"
        for line in lines[2:]
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def visibility_section(agg: Aggregate) -> dict[str, Any]:
    """The visibility grid (one CSS class per cell, so the page can colour it), the states whose
    context was not readable, and GC per class as an HTML table."""
    from harness.mirage.report import tables

    seen = agg.visibility
    if seen is None:
        return {"grid": None, "missing": tables.visibility_grid(agg)}
    rows = [
        (state, [(row.get(a), tables.VISIBILITY_LABELS.get(row.get(a) or "", tables.NOT_AVAILABLE))
                 for a in seen.artifacts])
        for state, row in seen.grid.items()
    ]  # fmt: skip
    return {
        "grid": {"artifacts": seen.artifacts, "rows": rows, "unavailable": seen.unavailable},
        "gc": markdown_to_html_table(tables.visibility_gc_table(agg)),
    }


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _embedded_json(payload: object) -> str:
    """JSON safe inside a <script> element."""
    text = json.dumps(payload, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("harness.mirage.report", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
    )


def probe_views(
    answerers: Mapping[str, tuple[Path, Sequence[ProbeRecord], Aggregate]],
) -> list[dict[str, Any]]:
    """Every probe of every answerer as the page's explorer shows it."""
    probes = []
    for label, (directory, records, agg) in answerers.items():
        calls, questions = read_call_log(directory), question_texts(directory)
        probes += [probe_view(r, label, calls, questions, visibility_of(agg, r)) for r in records]
    return probes


FILTERS = ["model", "state", "condition", "answerability", "outcome", "path", "visibility"]


def render_html(
    title: str,
    answerers: Mapping[str, tuple[Path, Sequence[ProbeRecord], Aggregate]],
    figures: Sequence[Path],
    note: str = "",
    provenance: Sequence[str] = (),
    preface: str = "",
) -> str:
    """The page for ``answerers`` (label -> result folder, records, aggregate); ``preface``:
    markdown sections shown above the answerers' (the comparison's overview, the instrument
    check)."""
    from harness.mirage.probing.retry import failure_summary, failures_table
    from harness.mirage.report import tables
    from harness.mirage.report.formats import format_rows, format_table, read_summaries

    probes = probe_views(answerers)
    sections = []
    for label, (directory, records, agg) in answerers.items():
        named = [
            ("Table 1 — metrics per state and condition", tables.table1(agg)),
            ("Table 2 — cross-state diagnostics", tables.table2(agg)),
            ("Retrieval-path composition", tables.paths_table(agg)),
            ("GC, VC and OG by retrieval path", tables.path_grounding_table(agg)),
        ]
        failures = failure_summary(records)
        if failures.total:
            named.append(("Failed probes (provider and agent errors)", failures_table(failures)))
        rows = format_rows(agg, records)
        if rows:
            named.append(
                ("Summary formats at the compaction state", format_table(rows, agg.roles.deep))
            )
        sections.append(
            {
                "label": label,
                "tables": [(name, markdown_to_html_table(md)) for name, md in named],
                "summaries": read_summaries(directory) if rows else [],
                "visibility": visibility_section(agg),
            }
        )
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            title=title,
            note=note,
            provenance=list(provenance),
            preface=markdown_html(preface),
            sections=sections,
            figures=[(p.stem, _data_uri(p), CAPTIONS.get(p.name, "")) for p in figures],
            data=_embedded_json({"probes": probes}),
            filters=FILTERS,
        )
    )


def write_html(
    path: Path,
    title: str,
    answerers: Mapping[str, tuple[Path, Sequence[ProbeRecord], Aggregate]],
    figures: Sequence[Path],
    note: str = "",
    provenance: Sequence[str] = (),
    preface: str = "",
) -> Path:
    """``provenance``: the run's provenance lines, shown under the title; ``preface``: as for
    ``render_html``."""
    page = render_html(title, answerers, figures, note, provenance, preface)
    path.write_text(page, encoding="utf-8")
    return path


def write_comparison_html(
    path: Path,
    title: str,
    answerers: Mapping[str, tuple[Path, Sequence[ProbeRecord], Aggregate]],
    *,
    verdict: str,
    banner: str,
    headline: Path | None,
    headline_caption: str,
    table: str,
    table_reading: str,
    sections: Sequence[Section],
) -> Path:
    """``comparison.html``: the verdict, the headline figure and the compact table on the first
    screen; every section below it collapsed, its heading and one-line reading showing; then
    the probes of every answerer (``render_html``'s explorer)."""
    shown = [
        {
            "id": section.anchor,
            "title": section.title,
            "reading": markdown_inline_html(section.reading),
            "figure": None if section.figure is None else _data_uri(section.figure),
            "html": markdown_html("\n\n".join(p for p in (section.body, section.appendix) if p)),
        }
        for section in sections
    ]
    page = (
        _environment()
        .get_template(COMPARISON_TEMPLATE)
        .render(
            title=title,
            note=banner,
            verdict=markdown_html(verdict),
            headline=None if headline is None else _data_uri(headline),
            headline_caption=markdown_inline_html(headline_caption),
            table=markdown_html(table),
            table_reading=markdown_inline_html(table_reading),
            sections=shown,
            provenance=[],
            preface="",
            figures=[],
            data=_embedded_json({"probes": probe_views(answerers)}),
            filters=FILTERS,
        )
    )
    path.write_text(page, encoding="utf-8")
    return path
