"""The report from a small results file: summary.json, details.json, report.md, PNG figures, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from PIL import Image
from typer.testing import CliRunner

from harness.kit.results import ResultsLog, read_records
from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record
from harness.mirage.report import write_report
from harness.mirage.scoring import Gold, KnownIdResolver
from mirage.cli.report import register

RESOLVER = KnownIdResolver(["chart_1", "ui_2"])
GOLDS = {
    "a1": Gold(answerable="YES", source="chart_1", answer="42", answer_type="numeric"),
    "a2": Gold(answerable="YES", source="ui_2", answer="leelin", answer_type="string"),
    "u1": Gold(answerable="NO", artifact="chart_1"),
}
REPLIES = {
    "a1": ["ANSWERABLE=YES\nSOURCE=chart_1\nANSWER=42", "ANSWERABLE=YES\nSOURCE=NONE\nANSWER=42"],
    "a2": ["**ANSWERABLE**: YES\n**SOURCE**: ui_2.png\n**ANSWER**: LeeLin", "no idea"],
    "u1": ["ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE", "ANSWERABLE=YES\nSOURCE=chart_1\nANSWER=3"],
}
STATES = ("S1-d0", "S1-d50k", "S1-d80k", "S2")


def _write_results(directory: Path) -> None:
    with ResultsLog(directory / "results.jsonl", ProbeRecord) as results:
        for s_index, state in enumerate(STATES):
            for cond in ("C0", "Cm"):
                for repeat in range(2):
                    for question, gold in GOLDS.items():
                        choice = (s_index + repeat + (cond == "Cm")) % 2
                        tool = cond == "Cm" and choice == 0
                        calls = [{"name": "artifact_recall", "executed": True}] if tool else []
                        key = RecordKey(state, cond, question, repeat)
                        results.append(
                            build_record(
                                key, REPLIES[question][choice], gold, RESOLVER, tool_calls=calls
                            )
                        )


def _workspace(directory: Path) -> Path:
    """A real workspace whose manifest knows chart_1 and ui_2."""
    (directory / "artifacts").mkdir(parents=True)
    (directory / "artifacts" / "chart_1.png").write_bytes(b"\x89PNG chart")
    (directory / "artifacts" / "ui_2.png").write_bytes(b"\x89PNG screen")
    return directory


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    _write_results(tmp_path)
    _workspace(tmp_path / "workspace")
    return tmp_path


def test_write_report_files(run_dir: Path) -> None:
    files = write_report(run_dir)
    summary = json.loads(files.summary.read_text())
    assert set(summary) == {"scoring", "runs", "states", "diagnostics", "failed_probes", "usage"}
    assert summary["failed_probes"] == {"total": 0, "cells": {}, "probes": []}
    assert (summary["scoring"], summary["runs"]) == ("paper", 2)
    assert list(summary["states"]) == list(STATES)
    for conds in summary["states"].values():
        assert set(conds) == {"C0", "Cm"}
        for cell in conds.values():
            assert set(cell) == {
                "AC",
                "SC",
                "VC",
                "GC",
                "HR",
                "WS",
                "PF",
                "PF_total",
                "MI",
                "OG",
                "R_tool",
                "R_none",
                "VC_R_none",
                "n",
                "runs",
                "paths",
                "path_sources",
            }
            assert cell["n"] == 6 and cell["runs"] == 2
    assert set(summary["diagnostics"]["C0"]) == {"DS", "delta_comp", "Ret", "MI_d80k"}
    details = json.loads(files.details.read_text())
    assert {"scoring", "runs", "cells", "cross_state", "deltas", "roles"} <= set(details)
    cell = details["cells"]["S1-d0"]["C0"]
    assert cell["intervals_pooled"]["AC"]["n"] > 0
    assert [run["repeat"] for run in cell["runs"]] == [0, 1]  # per-run values are kept
    assert all(run["intervals"]["AC"]["n"] > 0 for run in cell["runs"])

    markdown = files.report.read_text()
    assert "Scoring profile: **paper**" in markdown and "means of the per-run rates" in markdown
    assert "(run 1)" in markdown and "(pooled)" in markdown
    for heading in ("Table 1", "Table 2", "Wilson", "transitions", "Cm − C0", "Figures"):
        assert heading in markdown
    assert "| C0 | S1-d0 |" in markdown

    assert sorted(p.name for p in files.figures) == [
        "cm_minus_c0.png", "gc_by_state.png", "mi_by_state.png", "path_composition.png",
        "transitions.png",
    ]  # fmt: skip
    for figure in files.figures:
        with Image.open(figure) as image:
            assert image.format == "PNG" and image.size[0] > 300


def test_report_without_cm_skips_the_delta_figure(tmp_path: Path) -> None:
    records = [
        r for r in read_records(_write_and_return(tmp_path), ProbeRecord) if r.condition == "C0"
    ]
    files = write_report(tmp_path / "out", records)
    assert "cm_minus_c0.png" not in {p.name for p in files.figures}
    assert "No state ran both C0 and Cm." in files.report.read_text()


def _write_and_return(directory: Path) -> Path:
    _write_results(directory)
    return directory / "results.jsonl"


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_cli_report_prints_table1(run_dir: Path) -> None:
    result = CliRunner().invoke(_app(), ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "| C0 | S1-d0 |" in result.output and "DS" in result.output
    assert (run_dir / "summary.json").is_file()


def test_cli_rescore_rewrites_stale_indicators(run_dir: Path) -> None:
    path = run_dir / "results.jsonl"
    records = read_records(path, ProbeRecord)
    stale = [r.model_copy(update={"AC": 0}) if r.AC == 1 else r for r in records]
    path.write_text("".join(r.model_dump_json() + "\n" for r in stale))
    result = CliRunner().invoke(_app(), ["rescore", str(run_dir)])
    assert result.exit_code == 0, result.output
    changed = sum(r.AC == 1 for r in records)
    assert (
        f"rescored {len(records)} records" in result.output
        and f"{changed} changed" in result.output
    )
    assert read_records(path, ProbeRecord) == records


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    result = CliRunner().invoke(_app(), ["report", str(tmp_path)])
    assert result.exit_code != 0 and "no results file" in result.output


def test_cli_rescore_needs_the_run_workspace(tmp_path: Path) -> None:
    _write_results(tmp_path)
    result = CliRunner().invoke(_app(), ["rescore", str(tmp_path)])
    assert result.exit_code != 0 and "no workspace found" in result.output
    assert "--workspace" in result.output


def test_cli_rescore_finds_the_workspace_of_a_mirage_run_layout(tmp_path: Path) -> None:
    """``mirage run --out OUT`` puts the workspace at OUT/workspace and results in OUT/<model>:
    rescoring OUT/<model> canonicalises with OUT/workspace (through the workspace link)."""
    from harness.kit.rundir import write_workspace_link

    model_dir = tmp_path / "out" / "local_smollm2-135m"
    model_dir.mkdir(parents=True)
    _write_results(model_dir)
    workspace = _workspace(tmp_path / "out" / "workspace")
    write_workspace_link(model_dir, workspace)
    records = read_records(model_dir, ProbeRecord)
    # A SOURCE only the manifest resolves: the file path of chart_1's original.
    stale = [
        r.model_copy(
            update={"raw_output": "ANSWERABLE=YES\nSOURCE=artifacts/chart_1.png\nANSWER=42"}
        )
        if r.question_id == "a1"
        else r
        for r in records
    ]
    (model_dir / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in stale))
    result = CliRunner().invoke(_app(), ["rescore", str(model_dir)])
    assert result.exit_code == 0, result.output
    assert "under scoring paper" in result.output
    rescored = [r for r in read_records(model_dir, ProbeRecord) if r.question_id == "a1"]
    assert {(r.canonical_source, r.SC) for r in rescored} == {("chart_1", 1)}


def test_cli_rescore_and_report_under_lenient(run_dir: Path) -> None:
    result = CliRunner().invoke(_app(), ["report", str(run_dir), "--scoring", "lenient"])
    assert result.exit_code == 0, result.output
    assert "rescored them in memory under lenient" in result.output
    assert "Scoring profile: **lenient**" in (run_dir / "report.md").read_text()
    assert {r.scoring for r in read_records(run_dir, ProbeRecord)} == {
        "paper"
    }  # the file is unchanged
    result = CliRunner().invoke(_app(), ["rescore", str(run_dir), "--scoring", "lenient"])
    assert result.exit_code == 0 and "under scoring lenient" in result.output
    records = read_records(run_dir, ProbeRecord)
    assert {r.scoring for r in records} == {"lenient"}
    # The markdown reply of a2 is a PF under paper but parsed under lenient.
    a2 = [r for r in records if r.question_id == "a2" and (r.raw_output or "").startswith("**")]
    assert a2 and not any(r.pf for r in a2)


def test_cli_rejects_an_unknown_profile(run_dir: Path) -> None:
    result = CliRunner().invoke(_app(), ["report", str(run_dir), "--scoring", "strict"])
    assert result.exit_code != 0 and "unknown scoring profile 'strict'" in result.output


def test_cli_report_of_old_lenient_records_without_a_workspace_says_what_to_do(
    tmp_path: Path,
) -> None:
    _write_results(tmp_path)
    workspace = _workspace(tmp_path.parent / f"{tmp_path.name}-workspace")
    rescore = ["rescore", str(tmp_path), "--scoring", "lenient", "-w", str(workspace)]
    assert CliRunner().invoke(_app(), rescore).exit_code == 0
    result = CliRunner().invoke(_app(), ["report", str(tmp_path)])
    assert result.exit_code != 0
    assert "no workspace found" in result.output and "--scoring lenient" in result.output
    as_scored = CliRunner().invoke(_app(), ["report", str(tmp_path), "--scoring", "lenient"])
    assert as_scored.exit_code == 0
