"""One run per output folder: ``OUT/.mirage-run.lock`` holds the pid of the run writing there.

Taken before any work (indexing the workspace, building the trunk), so a second run on the
same ``--out`` is refused at once with the first run's pid instead of after minutes of
duplicated work. The lock is an ``flock`` on that file: the kernel releases it when its process
dies, so the file a killed run leaves behind (a stale pid) is simply taken over, with a warning.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog

from harness.kit.paths import folder_problem

log = structlog.get_logger(__name__)

LOCK_FILE = ".mirage-run.lock"


class OutLockedError(RuntimeError):
    """Another live process holds the output folder, or it cannot be one (a file is there)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def _recorded_pid(fd: int) -> int | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


@contextmanager
def out_lock(out: Path) -> Iterator[Path]:
    """Hold ``out``'s run lock for the block; ``OutLockedError`` (one line, with the holder's
    pid and what to do) when a live process holds it, or naming what is in the way when ``out``
    cannot be a folder."""
    problem = folder_problem(out)
    if problem is not None:
        raise OutLockedError(f"the output folder cannot be made: {problem}; give another --out")
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            holder = _recorded_pid(fd)
            who = f"pid {holder}" if holder is not None else "another process"
            raise OutLockedError(
                f"{out} is in use by another mirage run ({who}, lock {path}); wait for it to "
                "finish or give another --out"
            ) from exc
        stale = _recorded_pid(fd)
        if stale is not None and stale != os.getpid() and not _pid_alive(stale):
            log.warning("outlock.stale_lock_taken_over", path=str(path), dead_pid=stale)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)  # an exit, clean or by an error, leaves no pid behind
    finally:
        os.close(fd)
