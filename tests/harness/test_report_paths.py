"""Reports with the four retrieval paths and the visibility map: numbers on records whose paths
the real classifier decided from constructed contexts, an older file's binary label shown as
such, and the state x artifact grid with GC per visibility class in every report file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.kit.agents.base import ToolCallRecord
from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record
from harness.mirage.probing.retrieval_paths import BootItem, ContextMessage, ProbeContext
from harness.mirage.probing.visibility import (
    StateVisibility,
    VisibilityMap,
    artifact_visibility,
    write_visibility,
)
from harness.mirage.report import write_report
from harness.mirage.report.aggregate import aggregate
from harness.mirage.report.compare import write_comparison
from harness.mirage.report.tables import paths_table, visibility_grid
from harness.mirage.scoring import Gold, KnownIdResolver

KEYWORDS = {"chart_1": ("Elmbrook", "Harlow", "28.7"), "chart_2": ("Rosewood", "Ferncliff")}
RESOLVER = KnownIdResolver(list(KEYWORDS))
GROUNDED = "ANSWERABLE=YES\nSOURCE=chart_1\nANSWER=42"
RIGHT_VALUE_NO_SOURCE = "ANSWERABLE=YES\nSOURCE=NONE\nANSWER=42"
WRONG = "ANSWERABLE=YES\nSOURCE=chart_2\nANSWER=7"
REFUSAL = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
SEEN = ContextMessage(role="user", text="Elmbrook harvest at Harlow: 28.7 t")
EMPTY = ProbeContext(source="restored_session", messages=())
CONTEXTS = {
    "R_context": ProbeContext(source="restored_session", messages=(SEEN,)),
    "R_boot": ProbeContext(
        source="restored_session", messages=(), boot=(BootItem(source="MEMORY.md", text="chart_1"),)
    ),
    "R_tool": EMPTY,
    "R_none": EMPTY,
}


def gold(artifact: str = "chart_1", answerable: bool = True) -> Gold:
    if not answerable:
        return Gold(answerable="NO", artifact=artifact, keywords=KEYWORDS[artifact])
    return Gold(
        answerable="YES", source=artifact, answer="42", answer_type="numeric",
        artifact=artifact, keywords=KEYWORDS[artifact],
    )  # fmt: skip


def rec(state: str, qid: str, reply: str, path: str, g: Gold | None = None) -> ProbeRecord:
    calls = [ToolCallRecord(name="artifact_recall", executed=True).model_dump()]
    record = build_record(
        RecordKey(state, "C0", qid, 0), reply, g or gold(), RESOLVER,
        context=CONTEXTS[path], tool_calls=calls if path == "R_tool" else [],
    )  # fmt: skip
    assert record.path == path and record.path_evidence is not None, record.path_evidence
    return record


def binary(record: ProbeRecord) -> ProbeRecord:
    """The record as a schema-2 file stored it: two-way path, no evidence."""
    line = record.model_dump(mode="json", exclude={"path_evidence", "path_source"})
    return ProbeRecord.from_line(json.dumps({**line, "schema_version": 2, "path": "R_context"}))


def cell_records() -> list[ProbeRecord]:
    return [
        rec("S2", "a1", GROUNDED, "R_context"),
        rec("S2", "a2", RIGHT_VALUE_NO_SOURCE, "R_none"),  # right value, no access path
        rec("S2", "a3", WRONG, "R_none"),
        rec("S2", "a4", GROUNDED, "R_tool"),
        rec("S2", "a5", "no format at all", "R_boot"),  # PF
        rec("S2", "u1", REFUSAL, "R_none", gold(answerable=False)),
    ]


def test_four_path_shares_and_grounding_split_by_path() -> None:
    cell = aggregate(cell_records()).states["S2"]["C0"]
    shares = {path: p.share for path, p in cell.paths.items()}
    assert shares == pytest.approx(
        {"R_context": 100 / 6, "R_boot": 100 / 6, "R_tool": 100 / 6, "R_none": 50.0}
    )
    assert cell.R_none == pytest.approx(50.0) and cell.R_tool == pytest.approx(100 / 6)
    none = cell.paths["R_none"]
    assert (none.n, none.parsed_answerable, none.GC_k, none.VC_k) == (3, 2, 0, 1)
    assert (none.GC, none.VC, none.OG) == (0.0, 50.0, 50.0)
    context = cell.paths["R_context"]
    assert (context.GC, context.VC, context.OG) == (100.0, 100.0, 0.0)
    assert cell.paths["R_boot"].parsed_answerable == 0 and cell.paths["R_boot"].GC is None
    assert cell.VC_R_none == pytest.approx(25.0)  # 1 of 4 parsed answerable
    assert cell.path_sources == {"probe": 6}


def test_binary_records_are_counted_and_shown_as_such(tmp_path: Path) -> None:
    records = [*cell_records(), binary(rec("S1-d0", "a1", GROUNDED, "R_none"))]
    agg = aggregate(records)
    old = agg.states["S1-d0"]["C0"]
    assert old.path_sources == {"binary": 1} and old.paths["R_context"].share == 100.0
    assert "| C0 | S1-d0 | 100.0 (1) | 0.0 (0) | 0.0 (0) | 0.0 (0) | 1 |" in paths_table(agg)
    files = write_report(tmp_path, records)
    page = files.html.read_text()
    assert '"path_source": "binary"' in page and "(binary)" in page
    summary = json.loads(files.summary.read_text())
    cell = summary["states"]["S2"]["C0"]
    assert cell["VC_R_none"] == 25.0 and cell["paths"]["R_none"]["VC_k"] == 1
    assert summary["states"]["S1-d0"]["C0"]["path_sources"] == {"binary": 1}
    assert "VC∧R_none" in files.report.read_text()


def test_drill_down_carries_each_probes_evidence(tmp_path: Path) -> None:
    page = write_report(tmp_path, cell_records()).html.read_text()
    data = json.loads(page.split('id="report-data">')[1].split("</script>")[0])
    probes = {p["question_id"]: p for p in data["probes"]}
    evidence = probes["a1"]["path_evidence"]
    assert evidence["context"]["verbatim"] == ["Elmbrook", "Harlow", "28.7"]
    assert evidence["reason"].startswith("R_context: 3 of 3 content keywords")
    assert probes["a4"]["path_evidence"]["calls"][0]["retrieval"] is True
    assert probes["a5"]["path_evidence"]["boot"][0]["source"] == "MEMORY.md"
    assert probes["a2"]["path_evidence"]["reason"].startswith("R_none")
    assert 'id="filter-path"' in page and 'id="filter-visibility"' in page


def visibility() -> VisibilityMap:
    summary = ContextMessage(role="user", text="Summary: Elmbrook, Harlow", summary=True)
    found = VisibilityMap()
    for state, context in (("S1-d80k", [SEEN]), ("S2", [summary])):
        found.add(
            StateVisibility(
                state=state, compaction_count=int(state == "S2"), messages=len(context),
                artifacts={a: artifact_visibility(context, [], a, k) for a, k in KEYWORDS.items()},
            )
        )  # fmt: skip
    reason = "OpenClaw checkpoint: the active context is OpenClaw session 'x'"
    found.add(StateVisibility(state="S3", compaction_count=2, messages=0, unavailable=reason))
    return found


def visibility_records() -> list[ProbeRecord]:
    return [
        rec("S1-d80k", "a1", GROUNDED, "R_context"),
        rec("S2", "a1", GROUNDED, "R_context"),
        rec("S2", "b1", RIGHT_VALUE_NO_SOURCE, "R_none", gold("chart_2")),
        rec("S2", "b2", GROUNDED.replace("chart_1", "chart_2"), "R_none", gold("chart_2")),
        rec("S3", "a1", GROUNDED, "R_none"),  # its state is not mapped: joins no class
    ]


def test_gc_per_visibility_class() -> None:
    seen = aggregate(visibility_records(), visibility=visibility()).visibility
    assert seen is not None
    assert seen.grid["S2"] == {"chart_1": "summary_only", "chart_2": "nowhere"}
    assert seen.grid["S1-d80k"] == {"chart_1": "verbatim", "chart_2": "nowhere"}
    assert seen.unavailable == {
        "S3": "OpenClaw checkpoint: the active context is OpenClaw session 'x'"
    }
    s2 = seen.by_state["C0"]["S2"]
    assert list(s2) == ["summary_only", "nowhere"]
    assert (s2["nowhere"].parsed_answerable, s2["nowhere"].GC, s2["nowhere"].VC) == (2, 50.0, 100.0)
    assert seen.by_class["C0"]["summary_only"].GC == 100.0
    assert sum(c.n for c in seen.by_class["C0"].values()) == 4  # S3's probe joined none


def test_grid_in_report_md_html_summary_and_comparison(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "tester"
    folder.mkdir(parents=True)
    write_visibility(folder, visibility())
    files = write_report(folder, visibility_records())
    report = files.report.read_text()
    assert "## Visibility map" in report
    assert "| State | chart_1 | chart_2 |" in report
    assert "| S2 | summary only | nowhere |" in report
    assert "| S3 | not available | not available |" in report  # its context was not readable
    assert "- S3: not available — OpenClaw checkpoint" in report
    assert "| C0 | S2 | nowhere | 2 | 2 | 50.0 (1) | 100.0 (2) | 50.0 |" in report
    page = files.html.read_text()
    assert '<td class="v-summary_only">summary only</td>' in page
    assert "S3: not available — OpenClaw checkpoint" in page
    summary = json.loads(files.summary.read_text())
    assert summary["visibility"]["grid"]["S2"]["chart_1"] == "summary_only"
    compared = write_comparison({folder: visibility_records()}, tmp_path / "cmp")
    assert "| S2 | summary only | nowhere |" in compared.appendix.read_text()  # full tables
    data = json.loads(compared.data.read_text())
    assert data["summaries"]["tester"]["visibility"]["by_class"]["C0"]["nowhere"]["VC_k"] == 2


def test_a_report_without_a_map_says_so(tmp_path: Path) -> None:
    files = write_report(tmp_path, cell_records())
    assert "Not available: the run wrote no visibility.json" in files.report.read_text()
    assert "visibility" not in json.loads(files.summary.read_text())
    assert visibility_grid(aggregate([])).startswith("Not available")


def test_an_openclaw_checkpoint_is_not_available_with_the_reason(tmp_path: Path) -> None:
    """An OpenClaw checkpoint names a session in OpenClaw's store and holds no context: with
    the OpenClaw strategy's reason its state says so, never a guessed class; a damaged snapshot
    gets its error, with that reason or the default one."""
    from harness.kit.agents.openclaw.state import OpenClawCheckpoint
    from harness.mirage.openclaw.run import unreadable_context
    from harness.mirage.probing.visibility import checkpoint_visibility
    from harness.mirage.trunk.checkpoints import Checkpoint, CheckpointManifest
    from memory_server.workspace import Workspace

    claw = OpenClawCheckpoint(
        session="agent:main:s2", memory_sha256="0" * 64, eit=9000, compaction_count=1,
        openclaw_version="2026.1.1",
    )  # fmt: skip
    (tmp_path / "S2").mkdir()
    (tmp_path / "S2" / "openclaw-checkpoint.json").write_text(claw.model_dump_json())
    (tmp_path / "S1" / "x.session").parent.mkdir()
    (tmp_path / "S1" / "x.session").write_text("not a snapshot")
    workspace = Workspace.open(tmp_path / "ws", create=True)
    for state, name in (("S2", "openclaw-checkpoint.json"), ("S1", "x.session")):
        manifest = CheckpointManifest.model_construct(
            state=state, snapshot=name, compaction_count=1, workspace_version=None
        )
        point = Checkpoint.model_construct(directory=tmp_path / state, manifest=manifest)
        default = checkpoint_visibility(state, point, workspace, KEYWORDS)
        assert default.artifacts == {} and default.unavailable
        assert "snapshot" in default.unavailable and "OpenClaw" not in default.unavailable
        seen = checkpoint_visibility(state, point, workspace, KEYWORDS, unreadable_context)
        assert seen.artifacts == {} and seen.unavailable
        if state == "S2":
            assert "OpenClaw session 'agent:main:s2'" in seen.unavailable
        else:
            assert "not a mirage session snapshot" in seen.unavailable
