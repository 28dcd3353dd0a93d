"""Real ``mirage run`` processes that die — a native crash in the summarizer during the trunk, a
native crash in the answerer mid-probe, a SIGKILL mid-probe — and resume without losing or
duplicating a probe; then bad files in that run folder stop ``mirage run`` with one line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.trunk.checkpoints import FAMILY_FILE, MANIFEST
from mirage.cli import app
from tests.cli_errors import assert_one_line_error
from tests.harness.run_driver import LIMIT

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROBES = LIMIT * 4 * 2  # questions x states x conditions
RUN_ARGS = ["--model", "oracle", "--trunk-model", "scripted", "--summarizer", "summarizer"]


def _driver(out: Path, *options: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.harness.run_driver", str(out), *options],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finish(process: subprocess.Popen[bytes], timeout: float = 600) -> int:
    _, stderr = process.communicate(timeout=timeout)
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")
    return process.returncode


def _intact(data: bytes) -> bytes:
    """The complete lines of a results file (what a resume must keep byte for byte)."""
    return data[: data.rfind(b"\n") + 1]


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@dataclass
class Stops:
    out: Path
    family: Path
    after_trunk_crash: list[str] = field(default_factory=list)
    results_after_trunk_crash: bool = False
    after_model_crash: bytes = b""
    after_kill: bytes = b""
    final: bytes = b""


@pytest.fixture(scope="module")
def stops(tmp_path_factory: pytest.TempPathFactory) -> Stops:
    out = tmp_path_factory.mktemp("durability") / "run"
    results = out / "oracle" / "results.jsonl"

    assert _finish(_driver(out, "--crash", "summarizer")) == -signal.SIGSEGV
    (family,) = (p for p in (out / "checkpoints").iterdir() if p.is_dir())
    stops = Stops(out=out, family=family)
    stops.after_trunk_crash = sorted(p.parent.name for p in family.glob(f"*/{MANIFEST}"))
    stops.results_after_trunk_crash = results.exists()

    crashed = _driver(out, "--delay", "0.05", "--crash", "answerer", "--crash-after", "7")
    assert _finish(crashed) == -signal.SIGSEGV
    stops.after_model_crash = results.read_bytes()

    killed = _driver(out, "--delay", "0.2")
    target = _lines(results) + 3
    deadline = time.monotonic() + 300
    while _lines(results) < target and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    killed.send_signal(signal.SIGKILL)
    assert _finish(killed) == -signal.SIGKILL
    stops.after_kill = results.read_bytes()

    assert _finish(_driver(out)) == 0
    stops.final = results.read_bytes()
    return stops


def test_crashes_and_kills_lose_nothing_and_duplicate_nothing(stops: Stops) -> None:
    assert stops.after_trunk_crash == ["S1-d0", "S1-d50k", "S1-d80k"]  # crashed before S2
    assert not stops.results_after_trunk_crash

    crash_lines = _intact(stops.after_model_crash)
    kill_lines = _intact(stops.after_kill)
    assert 0 < crash_lines.count(b"\n") < kill_lines.count(b"\n") < PROBES
    assert kill_lines.startswith(crash_lines)  # earlier records byte-identical
    assert stops.final.startswith(kill_lines)

    records = read_records(stops.out / "oracle" / "results.jsonl", ProbeRecord)
    assert stops.final.count(b"\n") == len(records) == PROBES
    assert len({record.key for record in records}) == PROBES  # every probe key exactly once
    for record in records:
        assert record.restored_sha256 == record.checkpoint_sha256  # type: ignore[attr-defined]
    assert (stops.family / FAMILY_FILE).is_file()
    assert sorted(p.parent.name for p in stops.family.glob(f"*/{MANIFEST}")) == [
        "S1-d0",
        "S1-d50k",
        "S1-d80k",
        "S2@verbatim",
        "pre-compaction",
    ]


def _copy(stops: Stops, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(stops.out, copy, symlinks=True)
    return copy


def test_a_corrupt_checkpoint_stops_the_resume_with_the_file_and_the_fix(
    stops: Stops, tmp_path: Path
) -> None:
    copy = _copy(stops, tmp_path)
    family = copy / "checkpoints" / stops.family.name
    (snapshot,) = (family / "S1-d50k").glob("*.session")
    data = bytearray(snapshot.read_bytes())
    data[-10] ^= 0x01
    snapshot.write_bytes(bytes(data))
    result = CliRunner().invoke(app, ["run", *RUN_ARGS, "--limit", str(LIMIT), "--out", str(copy)])
    line = assert_one_line_error(result, "error: corrupt checkpoint", str(snapshot), exit_code=2)
    assert f"delete {family} to rebuild" in line


def test_a_corrupt_format_checkpoint_names_its_folder(stops: Stops, tmp_path: Path) -> None:
    copy = _copy(stops, tmp_path)
    family = copy / "checkpoints" / stops.family.name
    (snapshot,) = (family / "S2@verbatim").glob("*.session")
    snapshot.write_bytes(snapshot.read_bytes()[:-20])
    result = CliRunner().invoke(app, ["run", *RUN_ARGS, "--limit", str(LIMIT), "--out", str(copy)])
    line = assert_one_line_error(result, "error: corrupt checkpoint", str(snapshot), exit_code=2)
    assert f"delete S2@verbatim in {family} to rebuild" in line


def test_a_corrupt_results_line_stops_the_resume_and_keeps_the_file(
    stops: Stops, tmp_path: Path
) -> None:
    copy = _copy(stops, tmp_path)
    results = copy / "oracle" / "results.jsonl"
    lines = results.read_bytes().split(b"\n")
    lines[2] = b"#" + lines[2][1:]
    results.write_bytes(b"\n".join(lines))
    before = results.read_bytes()
    result = CliRunner().invoke(app, ["run", *RUN_ARGS, "--limit", str(LIMIT), "--out", str(copy)])
    assert_one_line_error(result, f"error: {results}:3: corrupt probe record", exit_code=2)
    assert results.read_bytes() == before
