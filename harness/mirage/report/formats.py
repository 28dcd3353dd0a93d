"""Summary formats side by side (the paper's appendix A.2, Table 5).

Above: ``write_report``, the HTML page and ``write_comparison``. Below: the aggregate (each
format's compaction state is a state of its own: ``S2`` for the run's first format,
``S2@<format>`` for the others, the format in every record's ``summary_format``) and
``summaries.json``, which ``mirage run`` writes into each result folder from the checkpoints: the
summary every format produced, so the report shows what the answerer read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from harness.kit.report.tables import fmt, markdown_table
from harness.kit.rundir import RunFileError
from harness.kit.stats import Interval
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.probing.visibility import REWRITE_HINT
from harness.mirage.report.aggregate import Aggregate
from harness.mirage.report.sections import quoted
from harness.mirage.trunk.checkpoints import Checkpoint
from runtime.snapshot import validation_problem

SUMMARIES_FILE = "summaries.json"


class FormatSummary(BaseModel):
    """The compaction summary a state's session starts with, and the format that wrote it."""

    model_config = ConfigDict(extra="forbid")

    state: str
    summary_format: str
    text: str
    tokens: int
    summarizer_model: str | None = Field(
        default=None, description="the model (or reference summarizer) that wrote it"
    )
    flush_notes: int = Field(
        default=0, description="notes the memory flushes of its compaction cycle appended"
    )


class FormatRow(BaseModel):
    """SC and GC at one format's compaction state (pooled over runs, Wilson 95%), and Δcomp =
    GC[state] − GC[deep state] as a proportion of the mean per-run rates."""

    summary_format: str
    state: str
    condition: str
    SC: Interval | None
    GC: Interval | None
    delta_comp: float | None
    n: int


_SUMMARIES = TypeAdapter(list[FormatSummary])


def collect_summaries(checkpoints: Mapping[str, Checkpoint]) -> list[FormatSummary]:
    """The summary of every checkpoint a summary format compacted (by record state)."""
    from compaction.flush import flush_records
    from compaction.transcript import previous_summary
    from runtime.snapshot import load_snapshot

    found = []
    for state, checkpoint in checkpoints.items():
        summary_format = checkpoint.manifest.summary_format
        if summary_format is None:
            continue
        session = load_snapshot(checkpoint.snapshot_path)
        text = previous_summary(session.messages[0]) if session.messages else None
        tokens = session.message_tokens[0] if text is not None else 0
        records = session.compaction.records
        cycle = session.compaction.count - 1
        notes = sum(f.appended for f in flush_records(session) if f.compaction_cycle == cycle)
        found.append(
            FormatSummary(
                state=state,
                summary_format=summary_format,
                text=text or "",
                tokens=tokens,
                summarizer_model=records[-1].summarizer_model if records else None,
                flush_notes=notes,
            )
        )
    return found


def write_summaries(directory: Path, summaries: Sequence[FormatSummary]) -> None:
    if summaries:
        (directory / SUMMARIES_FILE).write_bytes(_SUMMARIES.dump_json(list(summaries), indent=2))


def read_summaries(directory: Path) -> list[FormatSummary]:
    """``summaries.json`` of a result folder, read strictly; none when the run wrote none. A bad
    file raises ``RunFileError`` (one line naming it)."""
    path = directory / SUMMARIES_FILE
    if not path.is_file():
        return []
    try:
        return _SUMMARIES.validate_json(path.read_bytes(), strict=True)
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except ValidationError as exc:
        raise RunFileError(
            f"{path}: not a summaries file ({validation_problem(exc)}); {REWRITE_HINT}"
        ) from exc


def check_summaries(
    summaries: Sequence[FormatSummary], records: Iterable[ProbeRecord], directory: Path
) -> None:
    """Each summary's state is compacted by the format the records of that state name."""
    formats = state_formats(records)
    for summary in summaries:
        recorded = formats.get(summary.state)
        if recorded is not None and recorded != summary.summary_format:
            raise RunFileError(
                f"{directory / SUMMARIES_FILE}: says {summary.state} was compacted by "
                f"{summary.summary_format}, its records say {recorded}; {REWRITE_HINT}"
            )


def state_formats(records: Iterable[ProbeRecord]) -> dict[str, str]:
    """Record state → summary format, for the states a format compacted."""
    return {r.state: r.summary_format for r in records if r.summary_format is not None}


def format_rows(
    agg: Aggregate, records: Sequence[ProbeRecord], *, single: bool = False
) -> list[FormatRow]:
    """One row per format, compaction state and condition; none when fewer than two formats
    ran (the tables already show the single one) unless ``single`` (a comparison of runs of
    one format each)."""
    formats = state_formats(records)
    if len(set(formats.values())) < (1 if single else 2):
        return []
    rows = []
    for state, summary_format in formats.items():
        for condition, cell in agg.states.get(state, {}).items():
            detail = agg.cells[state][condition]
            deep = agg.states.get(agg.roles.deep, {}).get(condition)
            delta = None
            if cell.GC is not None and deep is not None and deep.GC is not None:
                delta = (cell.GC - deep.GC) / 100
            rows.append(
                FormatRow(
                    summary_format=summary_format,
                    state=state,
                    condition=condition,
                    SC=detail.intervals_pooled.get("SC"),
                    GC=detail.intervals_pooled.get("GC"),
                    delta_comp=delta,
                    n=cell.n,
                )
            )
    return sorted(rows, key=lambda row: (row.condition, list(formats).index(row.state)))


def _interval(interval: Interval | None) -> str:
    if interval is None:
        return "–"
    return (
        f"{interval.rate:.1f} [{interval.low:.1f}, {interval.high:.1f}] ({interval.k}/{interval.n})"
    )


def format_table(rows: Sequence[FormatRow], deep: str, label: str | None = None) -> str:
    """SC and GC in percent with their intervals and counts (k of the parsed answerable
    probes), Δcomp in percentage points, and the state's recorded probes."""
    header = [
        "Cond.", "Format", "State", "SC % [95% CI] (k/answerable)",
        "GC % [95% CI] (k/answerable)", f"Δcomp pp vs {deep}", "probes recorded",
    ]  # fmt: skip
    body = [
        [
            row.condition,
            row.summary_format,
            row.state,
            _interval(row.SC),
            _interval(row.GC),
            fmt(None if row.delta_comp is None else 100 * row.delta_comp, signed=True),
            str(row.n),
        ]
        for row in rows
    ]
    if label is not None:
        header, body = ["Model", *header], [[label, *line] for line in body]
    return markdown_table(header, body)


def summaries_markdown(summaries: Sequence[FormatSummary]) -> str:
    """Each summary under its own heading, quoted: its text is the summarizer's, never the
    report's Markdown (a summary's ``## Goal`` stays inside its block)."""
    return "\n\n".join(
        f"### {summary.summary_format} (`{summary.state}`, {summary.tokens} tokens)\n\n"
        + quoted(summary.text)
        for summary in summaries
    )


def formats_section(directory: Path, agg: Aggregate, records: Sequence[ProbeRecord]) -> str:
    """The report's section on summary formats, or "" for a run of one format."""
    rows = format_rows(agg, records)
    if not rows:
        return ""
    summaries = read_summaries(directory)
    parts = [
        "\n## Summary formats at the compaction state (appendix A.2)",
        "Every format compacted the same pre-compaction state of one trunk; SC and GC pooled "
        "over runs with Wilson 95% intervals, Δcomp from the mean per-run GC.",
        format_table(rows, agg.roles.deep),
    ]
    if summaries:
        parts += ["## The summaries", summaries_markdown(summaries)]
    return "\n\n".join(parts) + "\n"
