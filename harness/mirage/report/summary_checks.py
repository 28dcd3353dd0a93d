"""Checks of the compaction summaries a run's states start with (docs/references.md).

- **Degenerate summaries**: a summary that holds none of the planted artifacts' content
  keywords, or is mostly one repeated pattern (``[1] [2] [3] …``: a token pattern, digits
  ignored, making up at least ``REPEAT_SHARE`` of its tokens), is flagged in words
  (``SummaryCheck.line``) wherever its state's figures appear: the console, ``summary.json``,
  ``report.md``/``report.html`` and the comparison; its metrics are kept, never hidden, but
  never shown without the flag.
- **Declared retention** (the instrument check on the compaction axis): for a state whose
  summary a reference summarizer wrote (``compaction.references``), the visibility map's class
  of every artifact against the class its declaration predicts, every disagreement with the
  reason the visibility evidence gives.

Above: ``write_report`` and ``write_comparison``. Below: ``summaries.json``
(``harness.mirage.report.formats``) and ``visibility.json`` (``harness.mirage.probing.visibility``),
both written by ``mirage run`` into each result folder.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from compaction.config import split_format
from compaction.references import is_reference_summarizer, reference_spec
from harness.kit.report.tables import markdown_table
from harness.mirage.probing.visibility import ArtifactVisibility, StateVisibility, VisibilityMap
from harness.mirage.protocol.keywords import matched
from harness.mirage.report.formats import FormatSummary

REPEAT_SHARE = 0.5
MIN_REPEATS = 8
_DIGITS = re.compile(r"\d+")


class SummaryCheck(BaseModel):
    """What one state's summary keeps of the planted artifacts' keywords, and its repetition."""

    state: str
    summary_format: str
    summarizer_model: str | None
    keywords_kept: int
    keywords_total: int
    repeated_pattern: str | None
    repeats: int
    degenerate: bool

    @property
    def line(self) -> str:
        who = self.summarizer_model or "its summarizer"
        text = (
            f"the {self.state} summary of {who} keeps {self.keywords_kept} of "
            f"{self.keywords_total} keywords"
        )
        if self.repeated_pattern is not None:
            text += f" and repeats one pattern {self.repeats} times ({self.repeated_pattern!r})"
        return text + (": degenerate, its figures measure no summary" if self.degenerate else "")


def summarizer_of(summary: FormatSummary) -> str | None:
    """Who wrote ``summary``: as recorded, else its format's own (``FORMAT~SUMMARIZER``; a
    summaries.json written before the summarizer was recorded)."""
    return summary.summarizer_model or split_format(summary.summary_format)[1]


def repetition(text: str) -> tuple[str | None, int]:
    """The token pattern (digits as ``N``) making up at least ``REPEAT_SHARE`` of ``text``'s
    tokens, repeated at least ``MIN_REPEATS`` times, and its count; (None, count) otherwise."""
    tokens = [_DIGITS.sub("N", token) for token in text.split()]
    if not tokens:
        return None, 0
    pattern, count = Counter(tokens).most_common(1)[0]
    if count >= MIN_REPEATS and count >= REPEAT_SHARE * len(tokens):
        return pattern, count
    return None, count


def check_summary(summary: FormatSummary, state: StateVisibility | None) -> SummaryCheck:
    """The check of one summary against the keywords of its state's planted artifacts."""
    keywords = [k for seen in (state.artifacts.values() if state else []) for k in seen.keywords]
    kept = len(set(matched(summary.text, keywords)))
    pattern, repeats = repetition(summary.text)
    return SummaryCheck(
        state=summary.state,
        summary_format=summary.summary_format,
        summarizer_model=summarizer_of(summary),
        keywords_kept=kept,
        keywords_total=len(set(keywords)),
        repeated_pattern=pattern,
        repeats=repeats,
        degenerate=pattern is not None or (bool(keywords) and kept == 0),
    )


def summary_checks(
    summaries: Sequence[FormatSummary], visibility: VisibilityMap | None
) -> list[SummaryCheck]:
    states = visibility.states if visibility is not None else {}
    return [check_summary(summary, states.get(summary.state)) for summary in summaries]


def degenerate_lines(checks: Sequence[SummaryCheck]) -> list[str]:
    return [check.line for check in checks if check.degenerate]


class RetentionDisagreement(BaseModel):
    state: str
    artifact_id: str
    declared: str
    seen: str
    reason: str


class RetentionCheck(BaseModel):
    """The visibility classes of one reference-summarized state against its declaration."""

    state: str
    summarizer_model: str
    summary_format: str
    artifacts: int
    agreed: int
    disagreements: list[RetentionDisagreement]


def _reason(seen: ArtifactVisibility, declared: str) -> str:
    context, need = seen.context, seen.threshold
    if seen.visibility == "verbatim":
        return (
            f"still in the active context outside the summary ({len(context.verbatim)} "
            f"keywords{', its image' if context.images else ''}): the verbatim tail kept it"
        )
    if declared == "summary_only":
        return (
            f"the summary holds {len(context.summary)} of {len(seen.keywords)} keywords "
            f"(needs {need})"
        )
    if seen.visibility == "summary_only":
        return (
            f"the summary holds its keywords {', '.join(context.summary)} (from another "
            "artifact's facts or a title)"
        )
    if declared == "notes_only":
        return f"the notes hold {len(seen.notes)} of its keywords (needs {need})"
    return (
        f"notes the declaration does not write hold {', '.join(h.keyword for h in seen.notes)} "
        f"({', '.join(sorted({h.path for h in seen.notes}))}: an earlier flush, e.g. the "
        "trunk model's)"
    )


def retention_checks(
    summaries: Sequence[FormatSummary], visibility: VisibilityMap | None
) -> list[RetentionCheck]:
    """One check per state whose summary a reference summarizer wrote."""
    if visibility is None:
        return []
    checks = []
    for summary in summaries:
        model = summarizer_of(summary)
        state = visibility.states.get(summary.state)
        if model is None or not is_reference_summarizer(model) or state is None:
            continue
        spec = reference_spec(model)
        disagreements = []
        for artifact_id, seen in state.artifacts.items():
            declared = spec.declared_class(artifact_id, flushed=summary.flush_notes > 0)
            if seen.visibility != declared:
                disagreements.append(
                    RetentionDisagreement(
                        state=summary.state,
                        artifact_id=artifact_id,
                        declared=declared,
                        seen=seen.visibility,
                        reason=_reason(seen, declared),
                    )
                )
        checks.append(
            RetentionCheck(
                state=summary.state,
                summarizer_model=model,
                summary_format=split_format(summary.summary_format)[0],
                artifacts=len(state.artifacts),
                agreed=len(state.artifacts) - len(disagreements),
                disagreements=disagreements,
            )
        )
    return checks


def retention_markdown(checks: Sequence[RetentionCheck]) -> str:
    """The compaction axis of the instrument check as a report section (heading included)."""
    if not checks:
        return ""
    agreed = sum(c.agreed for c in checks)
    total = sum(c.artifacts for c in checks)
    rows = [
        [
            c.state,
            c.summarizer_model,
            c.summary_format,
            f"{c.agreed} of {c.artifacts}",
        ]
        for c in checks
    ]
    parts = [
        "## Instrument check — visibility against the reference summarizers' declared retention",
        f"The visibility map agrees with the declared retention on **{agreed} of {total}** "
        "artifact × state cells (facts → summary only; notes, once the flush wrote them → "
        "notes only; names and nothing → nowhere; docs/references.md).",
        markdown_table(["State", "Summarizer", "Format", "Agree"], rows),
    ]
    listed = [d for c in checks for d in c.disagreements]
    if listed:
        parts.append("Every disagreement:")
        parts.append(
            markdown_table(
                ["State", "Artifact", "Declared", "Seen", "Reason"],
                [[d.state, d.artifact_id, d.declared, d.seen, d.reason] for d in listed],
            )
        )
    else:
        parts.append("No disagreements.")
    return "\n\n".join(parts)


def degenerate_markdown(checks: Sequence[SummaryCheck]) -> str:
    """The flagged summaries as a report section (heading included); "" when none is."""
    lines = degenerate_lines(checks)
    if not lines:
        return ""
    return "## Degenerate compaction summaries\n\n" + "\n".join(
        f"- **Flagged:** {line}." for line in lines
    )


def _why(summary: FormatSummary, check: SummaryCheck, state: StateVisibility | None) -> str:
    """Why the context-reader's GC at a compaction state is what it is, from the summary's
    declaration (a reference summarizer) or, for a model's summary, the visibility map."""
    if check.degenerate:
        return f"{check.line}"
    model = summarizer_of(summary)
    artifacts = list(state.artifacts) if state is not None else []
    if model is not None and is_reference_summarizer(model):
        spec = reference_spec(model)
        plain = split_format(summary.summary_format)[0]
        by_kind: dict[str, list[str]] = {}
        for artifact_id in artifacts:
            by_kind.setdefault(artifact_id.partition("_")[0], []).append(artifact_id)
        said = []
        for kind, ids in by_kind.items():
            retention = spec.retention_of(ids[0])
            if retention == "facts" and spec.keeps_ids(ids[0], plain):
                said.append(f"the {kind} facts are kept with their ids (kept → GC holds)")
            elif retention == "facts":
                said.append(
                    f"the {kind} values are kept without their ids, as {plain} prose: visible "
                    "but not citable (GC falls)"
                )
            elif retention == "names":
                said.append(f"only the {kind} ids and titles are kept (dropped → GC falls)")
            elif retention == "notes" and summary.flush_notes:
                said.append(
                    f"the {kind} artifacts are in the notes only (only Cm and the retriever "
                    "recover them)"
                )
            else:
                said.append(f"the {kind} artifacts are dropped (GC falls)")
        return f"{model} declares: " + "; ".join(said)
    seen = [
        a
        for a in artifacts
        if state is not None and state.artifacts[a].visibility in ("verbatim", "summary_only")
    ]
    return (
        f"{len(seen)} of {len(artifacts)} artifacts still visible in the context (visibility "
        f"map); the summary keeps {check.keywords_kept} of {check.keywords_total} keywords"
    )


def compaction_axis_markdown(
    reader: Mapping[str, Mapping[str, float | None]],
    summaries: Sequence[FormatSummary],
    visibility: VisibilityMap | None,
    deep: str,
) -> str:
    """Per compaction state (so per format and summarizer): the context-reader's GC under C0
    there and at ``deep``, and why (heading included); "" without summaries. ``reader``:
    state -> condition -> GC of the context-reader."""
    if not summaries:
        return ""
    states = visibility.states if visibility is not None else {}
    rows = []
    for summary in summaries:
        state = states.get(summary.state)
        check = check_summary(summary, state)
        gc = reader.get(summary.state, {}).get("C0")
        before = reader.get(deep, {}).get("C0")
        shown = "—" if gc is None else f"{gc:.0f}%"
        rows.append(
            [
                summary.state,
                split_format(summary.summary_format)[0],
                summarizer_of(summary) or "—",
                shown,
                "—" if before is None else f"{before:.0f}%",
                _why(summary, check, state),
            ]
        )
    header = ["State", "Format", "Summarizer", "context-reader GC (C0)", f"at {deep}", "Why"]
    return (
        "## The compaction axis — what each format's summary kept, read by the context-reader\n\n"
        "The context-reader answers only from the active context, so its GC at a compaction "
        "state measures what that summary kept: kept → holds, dropped → falls, notes only → "
        "only Cm and the retriever recover it.\n\n" + markdown_table(header, rows)
    )
