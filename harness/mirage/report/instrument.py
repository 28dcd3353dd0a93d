"""The instrument check: the harness's retrieval-path labels against the paths the reference
agents declare (docs/references.md, "The instrument check").

Above: every report (``report.md`` of a reference's folder, ``comparison.md`` of a run with
references) and its JSON. Below: the records' ``path`` (the harness's label, with
``path_evidence`` when the records carry it) and ``declared_path`` (what a reference agent says
it did; None for every other agent and for a reference that abstained).

Agreement is counted per declared label; every disagreement is listed, grouped by answerer,
state, condition and the two labels, with its question ids and the harness's reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from harness.kit.report.tables import markdown_table
from harness.mirage.probing.records import ProbeRecord

AVAILABLE_NOT_USED = (
    "R_none declared where the harness says R_context: the evidence was in the active context "
    "(the released classifier's rule: its content keywords, no retrieval call), but the agent "
    "did not read it. The path label tells where the evidence was within reach, not whether "
    "the answer used it; SC and GC tell the rest."
)


class LabelAgreement(BaseModel):
    label: str
    declared: int
    agreed: int

    @property
    def rate(self) -> float:
        return 100.0 * self.agreed / self.declared if self.declared else 0.0


class Disagreement(BaseModel):
    """Probes where the harness labelled ``labelled`` and the reference declared ``declared``."""

    answerer: str
    state: str
    condition: str
    declared: str
    labelled: str
    question_ids: list[str]
    reasons: list[str] = []


class InstrumentCheck(BaseModel):
    declared: int
    agreed: int
    abstained: int
    labels: list[LabelAgreement]
    disagreements: list[Disagreement]

    @property
    def rate(self) -> float:
        return 100.0 * self.agreed / self.declared if self.declared else 0.0


def _reason(record: ProbeRecord) -> str | None:
    """The harness's reason for its label, numbers left out (they differ per question)."""
    evidence = record.path_evidence
    if evidence is None or not evidence.reason:
        return None
    return re.sub(r"\d+ of \d+", "n of m", re.sub(r"\s*\(need \d+\)", "", evidence.reason)).strip()


def is_reference_record(record: ProbeRecord) -> bool:
    """A record of a reference agent (its trace carries the reference's account)."""
    trace = record.trace
    return isinstance(trace, dict) and "reference" in trace


def instrument_check(answerers: Mapping[str, Sequence[ProbeRecord]]) -> InstrumentCheck | None:
    """The check over the scored records of every answerer (label -> records); None when no
    record is a reference's."""
    labels: dict[str, LabelAgreement] = {}
    groups: dict[tuple[str, str, str, str, str], Disagreement] = {}
    abstained = 0
    seen = False
    for answerer, records in answerers.items():
        for record in records:
            if not record.scored or not is_reference_record(record):
                continue
            seen = True
            declared = record.declared_path
            if declared is None:
                abstained += 1
                continue
            row = labels.setdefault(declared, LabelAgreement(label=declared, declared=0, agreed=0))
            row.declared += 1
            if record.path == declared:
                row.agreed += 1
                continue
            key = (answerer, record.state, record.condition, declared, record.path)
            group = groups.setdefault(
                key,
                Disagreement(
                    answerer=answerer,
                    state=record.state,
                    condition=record.condition,
                    declared=declared,
                    labelled=record.path,
                    question_ids=[],
                ),
            )
            group.question_ids.append(record.question_id)
            reason = _reason(record)
            if reason and reason not in group.reasons:
                group.reasons.append(reason)
    if not seen:
        return None
    rows = sorted(labels.values(), key=lambda r: r.label)
    return InstrumentCheck(
        declared=sum(r.declared for r in rows),
        agreed=sum(r.agreed for r in rows),
        abstained=abstained,
        labels=rows,
        disagreements=list(groups.values()),
    )


def agreement_markdown(check: InstrumentCheck) -> str:
    """How often the harness's label agrees with the declared path, per declared label."""
    intro = (
        f"The harness's path label agrees with the reference agents' declared path on "
        f"**{check.agreed} of {check.declared}** declared probes ({check.rate:.0f}%); "
        f"{check.abstained} probe(s) had no declaration (the context-reader abstained)."
    )
    table = markdown_table(
        ["Declared", "Probes", "Harness agrees", "Agreement %"],
        [[r.label, str(r.declared), str(r.agreed), f"{r.rate:.0f}"] for r in check.labels],
    )
    return f"{intro}\n\n{table}"


def disagreements_markdown(check: InstrumentCheck) -> str:
    """Every disagreement, grouped, with its questions and the harness's reason."""
    if not check.disagreements:
        return "No disagreements."
    rows = [
        [
            g.answerer,
            g.state,
            g.condition,
            g.declared,
            g.labelled,
            str(len(g.question_ids)),
            ", ".join(g.question_ids),
            "; ".join(g.reasons) or "—",
        ]
        for g in check.disagreements
    ]
    header = ["Answerer", "State", "Cond", "Declared", "Harness", "n", "Questions", "Reason"]
    listed = f"Every disagreement:\n\n{markdown_table(header, rows)}"
    if any(g.declared == "R_none" and g.labelled == "R_context" for g in check.disagreements):
        listed += "\n\n" + AVAILABLE_NOT_USED
    return listed


def check_markdown(check: InstrumentCheck) -> str:
    """The check as a report section (no heading)."""
    return f"{agreement_markdown(check)}\n\n{disagreements_markdown(check)}"


def check_section(
    answerers: Mapping[str, Sequence[ProbeRecord]],
) -> tuple[str, InstrumentCheck | None]:
    """The report section (heading included; empty without reference records) and the check."""
    check = instrument_check(answerers)
    if check is None:
        return "", None
    return "## Instrument check — path labels against the reference agents\n\n" + check_markdown(
        check
    ), check
