"""One `mirage run` per --out: a second one is refused before any work with the first one's pid,
and the lock a dead run left behind is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.kit.outlock import LOCK_FILE, OutLockedError, out_lock

ROOT = Path(__file__).resolve().parents[2]
HOLD = (
    "import sys, time; from pathlib import Path; from harness.kit.outlock import out_lock\n"
    "with out_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(120)\n"
)


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _holder(out: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_a_second_run_on_one_out_is_refused_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "run"
    holder = _holder(out)
    try:
        started = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "mirage", "run", "--trunk-model", "scripted", "--limit", "2",
             "--out", str(out)],
            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert second.returncode == 2, second.stderr
    assert "Traceback" not in second.stderr
    assert second.stderr.strip().splitlines() == [
        f"error: {out} is in use by another mirage run (pid {holder.pid}, lock {out / LOCK_FILE}); "
        "wait for it to finish or give another --out"
    ]
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # no workspace, no run.json
    assert elapsed < 120


def test_the_lock_of_a_killed_run_is_taken_over(tmp_path: Path) -> None:
    out = tmp_path / "run"
    holder = _holder(out)
    with pytest.raises(OutLockedError, match=f"pid {holder.pid}"), out_lock(out):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert (out / LOCK_FILE).read_text().strip() == str(holder.pid)  # stale: its pid is left
    with out_lock(out) as path:
        assert path.read_text().strip() == str(os.getpid())
    assert path.read_text() == ""


def test_an_out_that_cannot_be_a_folder_is_refused_without_writing(tmp_path: Path) -> None:
    """A run started from the API (no command line to check --out first)."""
    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n")
    for out in (taken, taken / "run"):
        with pytest.raises(OutLockedError, match=f"{taken} is a file"), out_lock(out):
            pass
    assert taken.read_text() == "mine\n"
