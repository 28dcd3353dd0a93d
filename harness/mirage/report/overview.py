"""The opening of a comparison with reference agents: what the rows show, in words, and the
model under test stated plainly (docs/references.md, "The report").

Above: ``comparison.md`` and the end of ``mirage run``. Below: one ``Aggregate`` per answerer
(label -> aggregate); the references are the answerers labelled ``reference/<kind>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from harness.mirage.references import REFERENCE_PREFIX
from harness.mirage.report.aggregate import Aggregate, CellSummary

RETRIEVER = REFERENCE_PREFIX + "retriever"
READER = REFERENCE_PREFIX + "context-reader"
CONFABULATOR = REFERENCE_PREFIX + "confabulator"
CONDITION = "C0"
HOLDS_WITHIN = 10.0  # percentage points
UNCOMPARED = "cannot be compared"


def _cell(agg: Aggregate, state: str) -> CellSummary | None:
    return agg.states.get(state, {}).get(CONDITION)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}%"


def _trend(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return UNCOMPARED
    if after < before - HOLDS_WITHIN:
        return "falls"
    if after > before + HOLDS_WITHIN:
        return "rises"
    return "holds"


class GcCourse(NamedTuple):
    """How one answerer's GC goes from d0 to after compaction: its trend (a verb) and numbers."""

    label: str
    trend: str
    numbers: str

    def said(self, verb: str | None = None) -> str:
        return f"{self.label}'s GC {verb or self.trend} {self.numbers}"


def _gc_course(label: str, agg: Aggregate) -> GcCourse | None:
    roles = agg.roles
    first, last = _cell(agg, roles.d0), _cell(agg, roles.post)
    if first is None or last is None:
        return None
    numbers = f"({_pct(first.GC)} at {roles.d0}, {_pct(last.GC)} at {roles.post} after compaction)"
    return GcCourse(label, _trend(first.GC, last.GC), numbers)


def joined_courses(courses: Sequence[GcCourse]) -> str:
    """Two answerers' GC courses in one clause: "while" where they differ, "likewise" where they
    behave alike."""
    if len(courses) == 1:
        return courses[0].said()
    first, second = courses
    if first.trend != second.trend:
        return f"{first.said()}, while {second.said()}"
    alike = (
        "cannot be compared either" if second.trend == UNCOMPARED else f"likewise {second.trend}"
    )
    return f"{first.said()}, and {second.said(alike)}"


def _pooled(agg: Aggregate, metric: str) -> float | None:
    values = [
        getattr(cell, metric)
        for conds in agg.states.values()
        if (cell := conds.get(CONDITION)) and getattr(cell, metric) is not None
    ]
    return sum(values) / len(values) if values else None


def references_paragraph(aggregates: Mapping[str, Aggregate]) -> str:
    """What the reference rows show (empty when there are none)."""
    sentences = []
    courses = [
        course
        for label in (READER, RETRIEVER)
        if label in aggregates and (course := _gc_course(label, aggregates[label]))
    ]
    if courses:
        sentences.append(
            f"Under {CONDITION}, {joined_courses(courses)}: the context-reader answers only from "
            "what is still in the conversation; the retriever looks every question up with "
            "artifact_recall."
        )
    if CONFABULATOR in aggregates:
        agg = aggregates[CONFABULATOR]
        sentences.append(
            f"{CONFABULATOR}, which always answers YES without reading any evidence, has AC "
            f"{_pct(_pooled(agg, 'AC'))} next to GC {_pct(_pooled(agg, 'GC'))} and HR "
            f"{_pct(_pooled(agg, 'HR'))} (means over states): outcome-only scoring credits "
            "answers nothing grounds, which SC, GC and the retrieval path expose."
        )
    if not sentences:
        return ""
    lead = (
        "The reference agents behave in ways known in advance, so their rows show what the "
        "metrics read when grounding is present, lost with the context, or absent."
    )
    return " ".join([lead, *sentences])


def model_paragraph(label: str, agg: Aggregate) -> str:
    """One answerer that is not a reference, its protocol failures first."""
    cells = [cell for conds in agg.states.values() for cell in conds.values()]
    failed = sum(cell.PF_total for cell in cells)
    probes = sum(cell.n for cell in cells)
    if probes and failed == probes:
        return (
            f"{label}: every one of its {probes} replies failed the protocol (PF {failed} of "
            f"{probes}), so none of its other metrics can be computed — it did not answer in the "
            "ANSWERABLE/SOURCE/ANSWER format at all."
        )
    roles = agg.roles
    first, last = _cell(agg, roles.d0), _cell(agg, roles.post)
    course = ""
    if first is not None and last is not None:
        course = (
            f"; under {CONDITION} its GC is {_pct(first.GC)} at {roles.d0} and "
            f"{_pct(last.GC)} at {roles.post}"
        )
    return (
        f"{label}: {failed} of its {probes} replies failed the protocol (PF){course}; AC "
        f"{_pct(_pooled(agg, 'AC'))}, GC {_pct(_pooled(agg, 'GC'))} (means over states)."
    )


def overview(aggregates: Mapping[str, Aggregate]) -> str:
    """The opening paragraphs: the references in words, then each model under test; empty
    when no answerer is a reference."""
    lead = references_paragraph(aggregates)
    if not lead:
        return ""
    models = [
        model_paragraph(label, agg)
        for label, agg in aggregates.items()
        if not label.startswith(REFERENCE_PREFIX)
    ]
    return "\n\n".join([lead, *models])
