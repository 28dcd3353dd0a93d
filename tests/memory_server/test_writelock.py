"""The writer lock between threads of one process (the cross-process cases, kill -9 included,
run real processes in test_processes.py)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from memory_server.writelock import WriterBusyError, WriterLock, read_holder


def test_reentrant_in_a_thread_exclusive_between_threads(tmp_path: Path) -> None:
    lock = WriterLock.for_path(tmp_path / "writer.lock", "a test index")
    assert WriterLock.for_path(tmp_path / "writer.lock", "same file") is lock
    outcome: list[str] = []

    def contender() -> None:
        try:
            with lock.hold(0.2):
                outcome.append("acquired")
        except WriterBusyError as exc:
            outcome.append(str(exc))

    with lock.hold(0), lock.hold(0):  # the holder's own thread may nest
        holder = read_holder(tmp_path / "writer.lock")
        thread = threading.Thread(target=contender)
        thread.start()
        thread.join()
    assert holder is not None and holder.pid == os.getpid()
    assert len(outcome) == 1
    assert outcome[0].startswith(f"a test index is being written by pid {os.getpid()}")
    assert "waited 0.2 s" in outcome[0]
    assert read_holder(tmp_path / "writer.lock") is None
    contender()
    assert outcome[-1] == "acquired"


def test_a_waiting_writer_gets_the_lock_when_it_is_released(tmp_path: Path) -> None:
    lock = WriterLock.for_path(tmp_path / "writer.lock", "a test index")
    taken = threading.Event()

    def hold_briefly() -> None:
        with lock.hold(0):
            taken.set()
            time.sleep(0.3)

    holder = threading.Thread(target=hold_briefly)
    holder.start()
    taken.wait()
    with pytest.raises(WriterBusyError):
        lock.acquire(0)
    started = time.monotonic()
    with lock.hold(10):
        waited = time.monotonic() - started
    holder.join()
    assert 0.05 < waited < 5
