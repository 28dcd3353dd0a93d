"""``mirage run``'s progress when stderr is not a terminal (``mirage run > run.log 2>&1``):
plain lines at phase changes and at most every few seconds — the display on a clock we step
(fast), and a real scripted run through the CLI with a command agent (slow)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mirage.cli import app
from mirage.cli.run import PlainProgress
from tests.fakes.openai_server import FakeOpenAIServer


class SteppedClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _display() -> tuple[PlainProgress, list[str], SteppedClock]:
    lines: list[str] = []
    clock = SteppedClock()
    display = PlainProgress(lines.append, interval_s=5.0, heartbeat_s=60.0, clock=clock)
    return display, lines, clock


def test_lines_come_at_phase_changes_and_at_most_every_interval() -> None:
    progress, lines, clock = _display()
    with progress:
        trunk = progress.add_task("trunk (EIT)", total=8000)
        assert lines == ["[0:00] trunk (EIT): 0/8000 (0%)"]
        for second in range(1, 13):  # one update a second: a line every 5 s
            clock.now += 1
            progress.update(trunk, completed=second * 500, description=f"trunk turn {second}")
        assert lines[1:] == [
            "[0:05] trunk turn 5: 2500/8000 (31%), ETA 0:11",
            "[0:10] trunk turn 10: 5000/8000 (62%), ETA 0:06",
        ]
        clock.now += 1
        probes = progress.add_task("smollm2-135m · S1-d0", total=4)  # the trunk ends short
        assert lines[3:] == [
            "[0:13] trunk turn 12: 6000/8000 (75%), ETA 0:04",
            "[0:13] smollm2-135m · S1-d0: 0/4 (0%)",
        ]
        for _ in range(4):
            clock.now += 2
            progress.advance(probes)
    assert lines[5:] == [
        "[0:19] smollm2-135m · S1-d0: 3/4 (75%), ETA 0:02",
        "[0:21] smollm2-135m · S1-d0: 4/4 (100%), done in 0:08",
    ]


def test_a_phase_left_mid_way_is_flushed_at_the_end() -> None:
    progress, lines, clock = _display()
    with progress:
        task = progress.add_task("S2", total=10)
        progress.advance(task)
        clock.now += 1
        progress.advance(task)
    assert lines[-1] == "[0:01] S2: 2/10 (20%), ETA 0:04"


def test_a_phase_that_does_not_move_still_gets_a_line_every_heartbeat() -> None:
    progress, lines, clock = _display()
    trunk = progress.add_task("trunk (EIT)", total=8000)
    progress.update(trunk, completed=1000, description="trunk turn 1")
    clock.now += 59
    progress.heartbeat()
    assert len(lines) == 1  # the start line only: the update came within the interval
    clock.now += 1
    progress.heartbeat()
    assert lines[1:] == ["[1:00] trunk turn 1: 1000/8000 (12%), ETA 7:00"]
    clock.now += 30
    progress.heartbeat()
    assert len(lines) == 2


COMMAND_AGENT = """
import json, sys
json.load(sys.stdin)
print(json.dumps({"reply": "ANSWERABLE=NO\\nSOURCE=NONE\\nANSWER=NONE", "tool_calls": []}))
"""


@pytest.mark.slow
def test_a_run_into_a_log_file_prints_progress_lines(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(f"#!{sys.executable}\n{COMMAND_AGENT}")
    agent.chmod(0o755)
    out = str(tmp_path / "run")
    arguments = ["--trunk-model", "scripted", "--agent", f"cmd:{agent}", "--limit", "2"]
    result = CliRunner().invoke(app, ["run", *arguments, "--out", out])
    assert result.exit_code == 0, result.output
    progress = [line for line in result.output.splitlines() if re.match(r"\[\d+:\d\d\] ", line)]
    assert re.fullmatch(r"\[0:0\d\] workspace \+ index: 0/1 \(0%\)", progress[0]), progress[0]
    assert any(re.search(r"workspace \+ index: 1/1 \(100%\), done in", line) for line in progress)
    assert any("trunk" in line and "EIT" in line for line in progress)
    for state in ("S1-d0", "S1-d50k", "S1-d80k", "S2"):  # 2 questions x 2 conditions each
        assert any(f"· {state}: 4/4 (100%), done in" in line for line in progress), state
    assert "finished in" in result.output


@pytest.mark.slow
def test_a_model_failure_in_the_trunk_stops_the_run_with_one_line(tmp_path: Path) -> None:
    """A crash of the embedded model's worker in the trunk surfaces the same way: as a
    ProviderError, here from a trunk model whose endpoint answers every call with HTTP 500
    (one that refuses connections is refused before the run starts: test_run_access)."""
    out = str(tmp_path / "run")
    with FakeOpenAIServer() as server:  # nothing scripted: every call is a 500
        dead = ["--trunk-model", "openai/none", "--api-base", server.api_base]
        result = CliRunner().invoke(app, ["run", *dead, "--limit", "2", "--out", out])
    assert result.exit_code == 1, result.output
    [error] = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert error.endswith("results so far are kept, re-run to resume")
    assert "Traceback" not in result.output
