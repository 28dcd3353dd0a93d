"""Ctrl-C during ``mirage run`` (issue 37): a real process and a real SIGINT to its process
group, as a terminal sends it. One line says how many probes are kept and how to go on, the exit
status is 130, and the same command resumes exactly: nothing lost, nothing run twice."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from tests.harness.run_driver import LIMIT

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROBES = LIMIT * 4 * 2  # questions x states x conditions


def _driver(out: Path, *options: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.harness.run_driver", str(out), "--cli", *options],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, which the "terminal" interrupts
    )


def test_ctrl_c_says_what_is_kept_exits_130_and_the_rerun_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    results = out / "oracle" / "results.jsonl"
    running = _driver(out, "--delay", "0.3")
    deadline = time.monotonic() + 600
    while not (results.is_file() and results.read_bytes().count(b"\n") >= 5):
        assert running.poll() is None, running.communicate()[1]
        assert time.monotonic() < deadline, "no probe recorded in time"
        time.sleep(0.1)
    os.killpg(running.pid, signal.SIGINT)
    _, stderr = running.communicate(timeout=120)
    assert running.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("interrupted")]
    said = re.fullmatch(
        rf"interrupted: (\d+) of {PROBES} probes kept in {re.escape(str(out))}; run the same "
        "command to resume",
        line,
    )
    assert said is not None, line
    kept = read_records(results, ProbeRecord)
    assert int(said[1]) == len(kept) and 5 <= len(kept) < PROBES
    before = results.read_bytes()

    resumed = _driver(out)
    _, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr
    assert results.read_bytes().startswith(before)  # the kept probes, byte for byte
    records = read_records(results, ProbeRecord)
    assert len(records) == len({r.key for r in records}) == PROBES
