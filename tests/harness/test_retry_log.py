"""The retry side log and ``ResultsLog.replace``: a retried record replaces its failed one in
one atomic swap; a retry stopped half-way leaves ``results.jsonl`` whole and is settled by the
next run; a process killed (SIGKILL) at random moments of a swap never leaves a torn file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.kit.results import RESULTS_FILE, ResultsLog, ResultsLogError, read_records
from harness.mirage.probing.records import ProbeRecord, RecordKey
from harness.mirage.probing.retry import RETRY_FILE, failure_summary, pending_keys, probe_target

KEYS = [RecordKey("S2", "C0", f"q{i}", 0) for i in range(6)]
FAILED = {KEYS[1], KEYS[4]}


def _record(
    key: RecordKey, raw: str | None = "ANSWERABLE=NO", error: str | None = None
) -> ProbeRecord:
    return ProbeRecord(**key._asdict(), gold_answerable="NO", raw_output=raw, provider_error=error)


def _first_run(folder: Path) -> bytes:
    with ResultsLog(folder / RESULTS_FILE, ProbeRecord) as results:
        for key in KEYS:
            failed = key in FAILED
            results.append(
                _record(
                    key, None if failed else "first", "agent_error: http 500" if failed else None
                )
            )
    return (folder / RESULTS_FILE).read_bytes()


def test_retry_runs_exactly_the_failed_probes_and_swaps_them_in(tmp_path: Path) -> None:
    before = _first_run(tmp_path)
    assert failure_summary(read_records(tmp_path, ProbeRecord)).total == 2
    assert set(pending_keys(tmp_path, KEYS, retry_errors=True)) == FAILED
    assert pending_keys(tmp_path, KEYS, retry_errors=False) == []
    with probe_target(tmp_path, True, set(KEYS)) as target:
        wanted = [key for key in KEYS if target.wanted(key)]
        assert set(wanted) == FAILED
        for key in wanted:
            target.log.append(_record(key, "retried"))
        assert (tmp_path / RESULTS_FILE).read_bytes() == before  # untouched until the swap
    records = read_records(tmp_path, ProbeRecord)
    assert [r.key for r in records] == KEYS  # same keys, same order
    assert {r.raw_output for r in records if r.key in FAILED} == {"retried"}
    assert {r.raw_output for r in records if r.key not in FAILED} == {"first"}
    kept = [line for line in before.splitlines() if b'"first"' in line]
    assert all(line in (tmp_path / RESULTS_FILE).read_bytes().splitlines() for line in kept)
    assert not (tmp_path / RETRY_FILE).exists()
    assert failure_summary(records).total == 0


def test_a_retry_stopped_half_way_is_settled_by_the_next_run(tmp_path: Path) -> None:
    before = _first_run(tmp_path)
    first_failed = sorted(FAILED)[0]
    with pytest.raises(KeyboardInterrupt), probe_target(tmp_path, True, set(KEYS)) as target:
        target.log.append(_record(first_failed, "retried"))
        raise KeyboardInterrupt
    assert (tmp_path / RESULTS_FILE).read_bytes() == before  # whole: the old file
    assert len(read_records(tmp_path / RETRY_FILE, ProbeRecord)) == 1
    assert set(pending_keys(tmp_path, KEYS, retry_errors=True)) == FAILED - {first_failed}
    with probe_target(tmp_path, True, set(KEYS)) as target:  # the retry resumed
        assert [key for key in KEYS if target.wanted(key)] == sorted(FAILED - {first_failed})
    records = {r.key: r for r in read_records(tmp_path, ProbeRecord)}
    assert records[first_failed].raw_output == "retried" and len(records) == len(KEYS)
    assert not (tmp_path / RETRY_FILE).exists()


def test_replace_keeps_the_lock_and_refuses_a_second_writer(tmp_path: Path) -> None:
    _first_run(tmp_path)
    with ResultsLog(tmp_path / RESULTS_FILE, ProbeRecord) as results:
        assert results.replace([_record(KEYS[1], "new")]) == 1
        with pytest.raises(ResultsLogError, match="being written by another run"):
            ResultsLog(tmp_path / RESULTS_FILE, ProbeRecord)
        assert results.append(_record(RecordKey("S2", "Cm", "q0", 0), "appended"))
    records = read_records(tmp_path, ProbeRecord)
    assert len(records) == len(KEYS) + 1 and records[1].raw_output == "new"


SWAPPER = """
import sys
from harness.kit.results import ResultsLog
from harness.mirage.probing.records import ProbeRecord
path, count = sys.argv[1], int(sys.argv[2])
def version(tag):
    return [ProbeRecord(state="S2", condition="C0", question_id=f"q{i}", repeat=0,
                        gold_answerable="NO", raw_output=tag * 200) for i in range(count)]
with ResultsLog(path, ProbeRecord) as log:
    for record in version("A"):
        log.append(record)
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        log.replace(version("B" if n % 2 else "A"))
"""


@pytest.mark.slow
def test_a_kill_during_swaps_never_tears_the_file(tmp_path: Path) -> None:
    count, rng = 2000, random.Random(7)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for attempt in range(6):
        path = tmp_path / f"{attempt}.jsonl"
        child = subprocess.Popen(
            [sys.executable, "-c", SWAPPER, str(path), str(count)],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.05, 0.6))
        child.send_signal(signal.SIGKILL)
        child.wait()
        data = path.read_bytes()
        assert data.endswith(b"\n")
        records = read_records(path, ProbeRecord)
        assert len(records) == count
        assert len({r.raw_output for r in records}) == 1  # wholly version A or wholly B
        with ResultsLog(path, ProbeRecord) as reopened:  # a stale .tmp is no obstacle
            assert reopened.replace([records[0]]) == 1
