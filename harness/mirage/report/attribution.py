"""How a run's R_tool labels were established, per result folder (``attribution.json``).

Above: the end of ``mirage run`` with an agent we did not write (written before the report,
which cites it) and ``mirage run``'s closing lines. Below: the records' ``trace.attribution``
that the kit's ``AttributedAgent`` (``harness.kit.attribution``) leaves on every probe.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from harness.kit.attribution import ProbeAttribution
from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord

ATTRIBUTION_FILE = "attribution.json"


class AttributionSummary(BaseModel):
    """Per-run counts of how R_tool labels were established (``attribution.json``)."""

    probes: int = 0
    agent_errors: int = 0
    r_tool: int = 0
    tagged_calls: int = 0
    window_calls: int = 0
    agent_reported: int = Field(default=0, description="probes whose reply reported tool calls")
    disagreements: int = Field(default=0, description="probes whose report differs from the log")
    path_disagreements: int = Field(
        default=0, description="probes where the report disagrees on whether a retrieval call ran"
    )
    disagreeing_tags: list[str] = Field(default_factory=list)


def attribution_summary(records: Iterable[ProbeRecord]) -> AttributionSummary:
    summary = AttributionSummary()
    for record in records:
        summary.probes += 1
        summary.agent_errors += record.provider_error is not None
        summary.r_tool += record.path == "R_tool"
        trace = record.trace or {}
        attribution = trace.get("attribution") if isinstance(trace, dict) else None
        if not isinstance(attribution, dict):
            continue
        info = ProbeAttribution.model_validate(attribution)
        summary.tagged_calls += info.tagged_calls
        summary.window_calls += info.window_calls
        summary.agent_reported += info.agent_reported
        if info.disagreement is not None:
            summary.disagreements += 1
            summary.path_disagreements += info.disagreement.path_differs
            summary.disagreeing_tags.append(info.tag)
    return summary


def write_attribution_summary(folder: Path) -> AttributionSummary:
    summary = attribution_summary(read_records(folder, ProbeRecord))
    (folder / ATTRIBUTION_FILE).write_text(summary.model_dump_json(indent=2) + "\n")
    return summary


def summary_text(summary: AttributionSummary) -> str:
    lines = [
        f"memory-server attribution: {summary.r_tool}/{summary.probes} probes R_tool "
        f"({summary.tagged_calls} calls by per-probe URL, {summary.window_calls} by time window); "
        f"{summary.agent_errors} agent errors",
        f"agent-reported tool calls on {summary.agent_reported} probes; disagreements with the "
        f"server log: {summary.disagreements} ({summary.path_disagreements} change the path)",
    ]
    return "\n".join(lines)
