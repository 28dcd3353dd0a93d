"""The ``mirage/probe`` Inspect task: a scripted solver answers the probes of a scripted-trunk
family and the task writes the records ``mirage run --agent cmd:`` writes with the same replies
(all but latency); ``inspect eval mirage/probe`` finds the task through the entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report import write_report
from tests.inspect.support import AGENT_MODEL, command_run, recalls, reply_for, write_agent

pytest.importorskip("inspect_ai")

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def command_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the command agent (``mirage run --agent cmd: --trunk-model scripted
    --limit 2``): its checkpoint family and its records."""
    import asyncio

    tmp = tmp_path_factory.mktemp("cmd")
    return asyncio.run(command_run(tmp / "run", write_agent(tmp)))


def _scripted_solver() -> object:
    from tests.inspect.scripted_solver import scripted

    return scripted()


def _comparable(record: ProbeRecord) -> dict[str, object]:
    return record.model_dump(mode="json", exclude={"latency_s"})


def test_the_task_writes_the_records_the_command_agent_run_writes(
    command_folder: Path, tmp_path: Path
) -> None:
    from inspect_ai import eval as inspect_eval

    from mirage.inspect_tasks import probe

    expected = read_records(command_folder, ProbeRecord)
    name = expected[0].model
    assert name is not None and name.startswith("cmd:")
    out = tmp_path / "inspect-results"
    task = probe(run=str(command_folder.parent), name=name, out=str(out))
    [log] = inspect_eval(
        task, solver=_scripted_solver(), model="mockllm/model", log_dir=str(tmp_path / "logs"),
        display="none",
    )  # fmt: skip
    assert log.status == "success", log.error
    assert log.samples is not None and len(log.samples) == len(expected)

    written = {r.key: r for r in read_records(out, ProbeRecord)}
    assert len(written) == len(expected)
    for record in expected:
        assert _comparable(written[record.key]) == _comparable(record), record.tag
    assert {r.path for r in expected} >= {"R_context", "R_tool"}
    assert any(r.pf for r in expected) and any(r.AC == 1 for r in expected)
    assert sum(bool(r.tool_calls) for r in expected) == sum(recalls(r.tag or "") for r in expected)

    # its metrics are summary.json's cells, as mirage report computes them from the records
    summary = json.loads(write_report(out).summary.read_text())
    assert log.results is not None
    [score] = log.results.scores
    for state, conditions in summary["states"].items():
        for condition, cell in conditions.items():
            for name in ("AC", "GC", "PF", "R_tool"):
                metric = score.metrics.get(f"{name}/{state}/{condition}")
                assert (metric.value if metric else None) == cell[name], (name, state, condition)

    # the log's samples carry the same scores
    for sample in log.samples:
        assert sample.scores is not None
        value = sample.scores["mirage"].value
        record = written[next(r.key for r in expected if r.tag == sample.id)]
        assert isinstance(value, dict) and value["GC"] == record.GC and value["path"] == record.path


def _entry_point(site: Path) -> None:
    """A distribution on ``site`` declaring pyproject.toml's ``inspect_ai`` entry point (the
    editable install of this checkout may predate it)."""
    info = site / "mirage_inspect_entry-0.dist-info"
    info.mkdir(parents=True)
    metadata = "Metadata-Version: 2.1\nName: mirage-inspect-entry\nVersion: 0\n"
    (info / "METADATA").write_text(metadata)
    (info / "entry_points.txt").write_text("[inspect_ai]\nmirage = mirage.inspect_tasks\n")


def test_inspect_eval_finds_mirage_probe(command_folder: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    _entry_point(site)
    solver = Path(__file__).with_name("scripted_solver.py")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "inspect_ai", "eval", "mirage/probe",
        "-T", f"run={command_folder.parent}", "-T", f"name={AGENT_MODEL}", "-T", f"out={out}",
        "--solver", f"{solver}@scripted", "--model", "mockllm/model",
        "--log-dir", str(tmp_path / "logs"), "--display", "plain",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    records = read_records(out, ProbeRecord)
    assert len(records) == len(read_records(command_folder, ProbeRecord))
    assert all(r.raw_output == reply_for(r.tag or "") for r in records)
    assert {r.model for r in records} == {AGENT_MODEL}
