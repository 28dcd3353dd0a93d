"""``mirage export inspect``: a result folder as an Inspect eval log, read back with Inspect's own
``read_eval_log`` — one sample per probe, every figure of ``summary.json`` — and the one-line
refusals (a folder that is not a mirage run, a schema-1 run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report import write_report
from mirage.cli import app
from tests.cli_errors import assert_one_line_error
from tests.harness.report_support import write_result_folder

inspect_log = pytest.importorskip("inspect_ai.log")


def _invoke(*arguments: str) -> Result:
    return CliRunner().invoke(app, ["export", "inspect", *arguments])


def _export(*arguments: str) -> tuple[int, str]:
    result = _invoke(*arguments)
    return result.exit_code, result.output


def test_a_result_folder_exports_to_a_log_inspect_reads_with_every_figure(tmp_path: Path) -> None:
    folder = write_result_folder(tmp_path / "run")
    write_report(folder)
    summary = json.loads((folder / "summary.json").read_text())
    records = read_records(folder, ProbeRecord)

    code, output = _export(str(tmp_path / "run"), "--to", str(tmp_path / "logs"))
    assert code == 0, output
    [path] = sorted((tmp_path / "logs").glob("*.eval"))
    log = inspect_log.read_eval_log(str(path))

    assert log.status == "success" and log.eval.task == "mirage/probe"
    assert log.samples is not None and len(log.samples) == len(records)
    assert log.results is not None and log.results.total_samples == len(records)
    by_name = {score.name: score for score in log.results.scores}
    for state, conditions in summary["states"].items():
        for condition, cell in conditions.items():
            for name in ("AC", "SC", "VC", "GC", "HR", "WS", "PF", "MI", "OG", "R_tool", "n"):
                metric = by_name[name].metrics.get(f"{state}/{condition}")
                assert (metric.value if metric else None) == cell[name], (state, condition, name)
    for condition, figures in summary["diagnostics"].items():
        for name, value in figures.items():
            metric = by_name["diagnostics"].metrics.get(f"{condition}/{name}")
            assert (metric.value if metric else None) == value
    assert log.results.metadata is not None
    assert log.results.metadata["summary"]["states"] == summary["states"]


def test_each_sample_carries_its_probe(tmp_path: Path) -> None:
    folder = write_result_folder(tmp_path / "run")
    code, output = _export(str(folder), "--to", str(tmp_path / "logs"))
    assert code == 0, output
    [path] = (tmp_path / "logs").glob("*.eval")
    log = inspect_log.read_eval_log(str(path))
    assert log.samples is not None
    samples = {(s.id, s.epoch): s for s in log.samples}
    for record in read_records(folder, ProbeRecord):
        sample = samples[(record.tag, 1)]
        assert sample.metadata["state"] == record.state
        assert sample.metadata["condition"] == record.condition
        assert sample.metadata["question_id"] == record.question_id
        assert sample.metadata["repeat"] == record.repeat
        assert sample.output.completion == (record.raw_output or "")
        assert isinstance(sample.input, str) and "Return exactly:" in sample.input
        assert sample.scores is not None
        score = sample.scores["mirage"]
        assert isinstance(score.value, dict)
        for name in ("AC", "SC", "VC", "GC", "WS", "HR"):
            assert score.value[name] == getattr(record, name), name
        assert score.value["path"] == record.path
        assert score.metadata is not None
        assert score.metadata["path_evidence"] == record.model_dump(mode="json")["path_evidence"]
        assert [c["name"] for c in score.metadata["tool_calls"]] == [
            c.name for c in record.tool_calls
        ]


def test_a_folder_that_is_not_a_mirage_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = _invoke(str(tmp_path / "empty"), "--to", str(tmp_path / "logs"))
    assert_one_line_error(result, "error: ", "not a mirage run", exit_code=2)
    assert not (tmp_path / "logs").exists()


def test_a_schema_1_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    folder = write_result_folder(tmp_path / "run")
    lines = (folder / "results.jsonl").read_text().splitlines()
    old = json.loads(lines[0])
    for field in ("schema_version", "scoring", "prompt_template"):
        old.pop(field)
    (folder / "results.jsonl").write_text("\n".join([json.dumps(old), *lines[1:]]) + "\n")
    result = _invoke(str(folder), "--to", str(tmp_path / "logs"))
    assert_one_line_error(result, "error: ", "schema-1", "mirage rescore", exit_code=2)
    assert not (tmp_path / "logs").exists()
