"""Degenerate compaction summaries are flagged in words; reference summarizers' declared
retention is checked against the visibility map (harness.mirage.report.summary_checks)."""

from __future__ import annotations

from harness.mirage.probing.retrieval_paths import ContextEvidence
from harness.mirage.probing.visibility import ArtifactVisibility, StateVisibility, VisibilityMap
from harness.mirage.report.formats import FormatSummary
from harness.mirage.report.summary_checks import (
    check_summary,
    degenerate_markdown,
    repetition,
    retention_checks,
)

CHART = ArtifactVisibility(
    visibility="summary_only",
    keywords=["Compost", "34.5", "2021"],
    threshold=2,
    context=ContextEvidence(summary=["Compost", "34.5"]),
)
UI = ArtifactVisibility(
    visibility="nowhere", keywords=["Dentist", "13:00"], threshold=1, context=ContextEvidence()
)


def _state(name: str, **artifacts: ArtifactVisibility) -> StateVisibility:
    return StateVisibility(state=name, compaction_count=1, messages=3, artifacts=artifacts)


def test_a_numbered_run_is_one_repeated_pattern() -> None:
    text = " ".join(f"[{i}]" for i in range(1, 109))
    assert repetition(text) == ("[N]", 108)
    assert repetition("Compost 34.5 in 2021, bins turned weekly.")[0] is None


def test_the_smollm_summary_is_flagged_in_words() -> None:
    summary = FormatSummary(
        state="S2",
        summary_format="verbatim",
        text=" ".join(f"[{i}]" for i in range(1, 109)),
        tokens=300,
        summarizer_model="local/smollm2-135m",
    )
    check = check_summary(summary, _state("S2", chart_1121ed9b=CHART, ui_9bd5e7db=UI))
    assert check.degenerate
    assert check.line.startswith(
        "the S2 summary of local/smollm2-135m keeps 0 of 5 keywords and repeats one pattern "
        "108 times"
    )
    assert "**Flagged:** the S2 summary" in degenerate_markdown([check])


def test_a_summary_with_the_evidence_is_not_flagged() -> None:
    summary = FormatSummary(
        state="S2", summary_format="verbatim", text="Compost was 34.5 t in 2021.", tokens=9
    )
    check = check_summary(summary, _state("S2", chart_1121ed9b=CHART))
    assert not check.degenerate and check.keywords_kept == 3
    assert degenerate_markdown([check]) == ""


def test_declared_retention_against_the_visibility_map() -> None:
    state = "S2@verbatim.reference-keep-charts"
    summary = FormatSummary(
        state=state,
        summary_format="verbatim~reference/keep-charts",
        text="## Critical context\nCompost 34.5",
        tokens=9,
        flush_notes=0,
    )
    visibility = VisibilityMap(states={state: _state(state, chart_1121ed9b=CHART, ui_9bd5e7db=UI)})
    [check] = retention_checks([summary], visibility)
    assert (check.summarizer_model, check.agreed, check.artifacts) == (
        "reference/keep-charts",
        2,
        2,
    )
    flushed = summary.model_copy(update={"flush_notes": 2})  # the notes were written: notes only
    [check] = retention_checks([flushed], visibility)
    assert check.agreed == 1
    [disagreement] = check.disagreements
    assert (disagreement.artifact_id, disagreement.declared, disagreement.seen) == (
        "ui_9bd5e7db",
        "notes_only",
        "nowhere",
    )
    assert "notes hold 0 of its keywords" in disagreement.reason
