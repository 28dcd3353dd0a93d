"""The single-writer lock of a workspace's index: one process at a time writes its stores.

Above: ``HybridIndex``, which holds the lock for each write (a batch of new units, a garbage
collection, a rebuild, reopening the embedded chroma store after another process wrote it);
searches never take it. Below: ``fcntl.flock`` on ``<workspace>/.mirage/index/writer.lock``.

The kernel releases a flock when the process holding it exits in any way, kill -9 included, so
the lock itself is never stale. The file also holds a record of the holder (pid, command,
since when), written after the lock is taken and cleared before it is released: a writer that
has to wait, or gives up, names the holder; a record found on taking the lock was left by a
holder that died without releasing it, which is logged and overwritten.

Hand-written on ``fcntl`` rather than on the ``filelock`` package: the holder record has to
live in the locked file itself without a waiter's open truncating it, and the lock has to be
reentrant per thread yet exclusive between the threads of one process.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import structlog
from pydantic import BaseModel, ValidationError

from memory_server.errors import MemoryServerError

log = structlog.get_logger(__name__)

POLL_SECONDS = 0.1
_MAX_COMMAND_CHARS = 200


class LockHolder(BaseModel):
    """Who holds (or last held) a writer lock."""

    pid: int
    command: str
    since: str
    host: str

    @classmethod
    def of_this_process(cls) -> LockHolder:
        return cls(
            pid=os.getpid(),
            command=_command_line(),
            since=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            host=socket.gethostname(),
        )

    def describe(self) -> str:
        started = dt.datetime.fromisoformat(self.since)
        held = int((dt.datetime.now(dt.UTC) - started).total_seconds())
        return f"pid {self.pid} on {self.host} ({self.command}), since {self.since} ({held} s ago)"


class WriterBusyError(MemoryServerError):
    """Another process (or thread) held the writer lock for longer than the caller would wait."""

    def __init__(self, message: str, holder: LockHolder | None) -> None:
        super().__init__(message)
        self.holder = holder


def _command_line() -> str:
    argv = list(sys.argv) or ["python"]
    program = Path(argv[0])
    if program.name == "__main__.py":
        argv[0] = f"python -m {program.parent.name}"
    elif argv[0] == "-c":
        argv[0] = "python -c"
    else:
        argv[0] = program.name
    command = " ".join(argv)
    return command if len(command) <= _MAX_COMMAND_CHARS else command[:_MAX_COMMAND_CHARS] + "…"


def read_holder(path: Path) -> LockHolder | None:
    """The record in a lock file, or None when it is empty or unreadable."""
    try:
        return LockHolder.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


class WriterLock:
    """An exclusive lock across processes and threads on one file; reentrant per thread. Use
    ``WriterLock.for_path`` so every index of a process shares one instance per file."""

    _instances: ClassVar[dict[str, WriterLock]] = {}
    _instances_guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path, guarded: str) -> None:
        self.path = path
        self.guarded = guarded
        self._threads = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @classmethod
    def for_path(cls, path: Path, guarded: str) -> WriterLock:
        """The process's lock on ``path``; ``guarded`` names what it protects in errors."""
        key = os.path.realpath(path)
        with cls._instances_guard:
            lock = cls._instances.get(key)
            if lock is None:
                lock = cls._instances[key] = cls(path, guarded)
            return lock

    @contextmanager
    def hold(self, timeout: float) -> Iterator[None]:
        """Hold the lock, waiting at most ``timeout`` seconds (0: one attempt) for it."""
        self.acquire(timeout)
        try:
            yield
        finally:
            self.release()

    def acquire(self, timeout: float) -> None:
        deadline = time.monotonic() + max(0.0, timeout)
        if not self._threads.acquire(timeout=max(0.0, timeout)):
            raise self._busy(timeout)
        try:
            if self._depth == 0:
                self._fd = self._lock_file(deadline, timeout)
            self._depth += 1
        except BaseException:
            self._threads.release()
            raise

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._threads.release()

    def _lock_file(self, deadline: float, timeout: float) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        waiting = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise self._busy(timeout) from None
                    if not waiting:
                        waiting = True
                        holder = read_holder(self.path)
                        log.info("index.writer_wait", holder=holder.describe() if holder else None)
                    time.sleep(POLL_SECONDS)
            self._write_record(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _write_record(self, fd: int) -> None:
        left = read_holder(self.path)
        if left is not None:
            log.warning("index.writer_lock_recovered", previous=left.describe())
        record = LockHolder.of_this_process().model_dump_json().encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)

    def _busy(self, timeout: float) -> WriterBusyError:
        holder = read_holder(self.path)
        who = holder.describe() if holder else "another process"
        waited = f"waited {timeout:g} s; " if timeout > 0 else ""
        return WriterBusyError(
            f"{self.guarded} is being written by {who}; {waited}"
            "wait for it to finish, or give a longer --lock-timeout",
            holder,
        )
