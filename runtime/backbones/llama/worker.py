"""The embedded model's worker process, seen from the parent: start it, call it, survive it.

Above: ``EmbeddedBackbone`` (``runtime/backbones/llama/backbone.py``) and ``mirage doctor``, through
``LlamaWorker.call``. Below: one ``llama_cpp.Llama`` in a child process
(``runtime/backbones/llama/child.py``, started as ``python -c`` calling ``serve_fd``), spoken to
with the pickled messages of ``runtime/backbones/llama/wire.py`` over a socket pair
(``multiprocessing.connection``). A plain subprocess rather than ``multiprocessing``'s spawn,
which re-runs the caller's main script and so fails in scripts without a main guard. The child
loads its model with llama.cpp's extra buffer types off (``runtime/backbones/llama/load.py``:
the AMX kernels that die with SIGILL on some virtual machines).

A native crash in llama.cpp (SIGILL from an instruction the CPU cannot execute, SIGSEGV, an
abort) ends only the child: the caller gets a ``ProviderError`` that names the signal and
``mirage doctor``, and the next call starts a fresh worker.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import structlog

from runtime.backbones.base import ProviderError, UnsupportedOption
from runtime.backbones.llama import child as llama_child
from runtime.backbones.llama.wire import (
    BatchRequest,
    BuildInfo,
    Failure,
    Generated,
    GenerateRequest,
    ModelSpec,
    Request,
    WorkerInfo,
)

log = structlog.get_logger(__name__)

MAX_CONSECUTIVE_CRASHES = 3
DOCTOR_HINT = "run `mirage doctor` to check this CPU against the installed llama.cpp build"
# llama.cpp's OpenMP threads spin at every barrier before they sleep (libgomp: 300k spins by
# default). On an idle machine a short spin nearly doubles decode over sleeping at once
# (probe-like calls 0.38 s against 0.70 s); when the machine is busy a spinning thread waits on
# a partner that is not running (decode fell from 18 to 1 token/s spinning 300k at load 14 on 2
# cores) and even 1,000 spins cost 38% at load ~4 (0.99 s against 0.72 s sleeping), 79% at
# load ~6.6 (2.85 s against 1.59 s; benchmarks/bench_backbones.py --sections spin). libgomp
# reads this once, at the worker's start, so how busy other processes keep the CPUs then picks
# one; the user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT always wins (libgomp lets
# GOMP_SPINCOUNT override OMP_WAIT_POLICY: neither is mixed in). Busy is measured over a short
# window, not by the 1-minute load average: right after `pip install` compiled llama.cpp, or
# after the run's own indexing, that average still says busy for a minute on an idle machine.
IDLE_WAIT = {"GOMP_SPINCOUNT": "1000"}
BUSY_WAIT = {"OMP_WAIT_POLICY": "PASSIVE"}
IDLE_LOAD_PER_CPU = 0.75  # busy share of each usable CPU under which the machine counts as idle
BUSY_WINDOW_S = 0.25


def usable_cpus() -> set[int]:
    """The CPUs this process may run on (elsewhere than Linux: every CPU)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def _cpu_jiffies(cpus: set[int]) -> tuple[int, int] | None:
    """(busy, total) clock ticks of ``cpus`` since boot, from /proc/stat (None elsewhere)."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    busy = total = 0
    for line in lines:
        name, *fields = line.split() or [""]
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        ticks = [int(field) for field in fields[:8]]  # user … steal (guest is inside user)
        idle = ticks[3] + ticks[4]  # idle, iowait
        busy += sum(ticks) - idle
        total += sum(ticks)
    return (busy, total) if total else None


def load_per_cpu(window_s: float = BUSY_WINDOW_S) -> float:
    """How busy other processes keep the CPUs this process may run on, now: their busy share
    of those CPUs over ``window_s`` (this process's own time taken out), from /proc/stat;
    elsewhere, the 1-minute load average per CPU."""
    cpus = usable_cpus()
    before, own_before = _cpu_jiffies(cpus), os.times()
    if before is None:
        return os.getloadavg()[0] / len(cpus)
    time.sleep(window_s)
    after, own_after = _cpu_jiffies(cpus), os.times()
    assert after is not None
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    own = (own_after.user + own_after.system - own_before.user - own_before.system) * ticks_per_s
    busy, total = after[0] - before[0], after[1] - before[1]
    return max(0.0, busy - own) / total if total > 0 else 0.0


def worker_environment(environ: Mapping[str, str], load: float) -> dict[str, str]:
    """``environ`` with the OpenMP wait for a machine at ``load`` (per CPU) added, unless the
    user chose a wait policy or spin count."""
    environment = dict(environ)
    if not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & environment.keys():
        environment.update(IDLE_WAIT if load < IDLE_LOAD_PER_CPU else BUSY_WAIT)
    return environment


def describe_exit(exitcode: int | None) -> str:
    """``SIGILL (Illegal instruction)`` for a signal death, else the exit code."""
    if exitcode is None:
        return "no exit status"
    if exitcode < 0:
        number = -exitcode
        try:
            name = signal.Signals(number).name
        except ValueError:
            return f"signal {number}"
        return f"{name} ({signal.strsignal(number)})"
    return f"exit code {exitcode}"


class WorkerCrashed(ProviderError):
    """The worker process died; ``signal_name`` is e.g. ``SIGILL`` when a signal ended it."""

    def __init__(self, message: str, exitcode: int | None) -> None:
        super().__init__("unknown", message)
        self.exitcode = exitcode

    @property
    def signal_name(self) -> str | None:
        if self.exitcode is None or self.exitcode >= 0:
            return None
        try:
            return signal.Signals(-self.exitcode).name
        except ValueError:
            return None


class LlamaWorker:
    """The parent's handle on one worker process; calls are serialised by a thread lock."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.info: WorkerInfo | None = None
        self.build: BuildInfo | None = None
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._crashes = 0
        self.openmp_wait: dict[str, str | None] = {}  # what the last start chose, and the load

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> WorkerInfo:
        with self._lock:
            return self._ensure_started()

    def call(self, request: Request) -> Any:
        """The worker's reply to ``request``; a ``Failure`` is raised as ``ProviderError``, or
        as ``UnsupportedOption`` when it names a request field."""
        with self._lock:
            self._ensure_started()
            assert self._conn is not None
            try:
                self._conn.send(request)
                reply = self._conn.recv()
            except (EOFError, OSError) as exc:
                raise self._crashed("while serving a call") from exc
            self._crashes = 0
        if isinstance(reply, Failure):
            raise _as_error(reply)
        return reply

    def call_batch(
        self, requests: Sequence[GenerateRequest]
    ) -> list[Generated | ProviderError | UnsupportedOption]:
        """Replies to ``requests`` decoded as one batch (``BatchRequest``), in order; a failed
        request's reply is the error to raise for it."""
        replies = self.call(BatchRequest(tuple(requests)))
        return [_as_error(r) if isinstance(r, Failure) else r for r in replies]

    def _ensure_started(self) -> WorkerInfo:
        if self._process is not None and self._process.poll() is not None:
            self._crashed("between calls")  # logged; no call was lost, so start a new one
        if self.info is not None and self._process is not None:
            return self.info
        if self._crashes >= MAX_CONSECUTIVE_CRASHES:
            raise WorkerCrashed(
                f"the embedded model's worker process crashed {self._crashes} times in a row; "
                f"not starting it again — {DOCTOR_HINT}",
                None,
            )
        process, conn, self.openmp_wait = _spawn(self.spec)
        self._process, self._conn, self.build = process, conn, None
        self.info = self._handshake(conn, process)
        return self.info

    def _handshake(self, conn: Connection, process: subprocess.Popen[bytes]) -> WorkerInfo:
        try:
            self.build = conn.recv()
            reply = conn.recv()
        except (EOFError, OSError) as exc:
            stage = "importing llama.cpp" if self.build is None else "loading the model"
            raise self._crashed(f"while {stage}") from exc
        if isinstance(reply, Failure):
            self._stop()
            raise ProviderError(reply.kind, reply.message)
        assert self.build is not None
        info = WorkerInfo(pid=process.pid, build=self.build, load=reply)
        log.info(
            "embedded_model_loaded",
            path=self.spec.path,
            n_ctx=self.spec.n_ctx,
            seconds=reply.seconds,
            worker_pid=process.pid,
        )
        return info

    def _crashed(self, stage: str) -> WorkerCrashed:
        process = self._process
        exitcode = None
        if process is not None:
            exitcode = _wait(process, timeout_s=10)
        self._crashes += 1
        self._stop()
        self.info = None
        cause = describe_exit(exitcode)
        log.error("embedded_model_crashed", stage=stage, exit=cause, crashes=self._crashes)
        after = (
            "the next call starts a new worker"
            if self._crashes < MAX_CONSECUTIVE_CRASHES
            else f"after {self._crashes} crashes in a row it is not restarted"
        )
        return WorkerCrashed(
            f"the embedded model's worker process died {stage} ({cause}); this process is "
            f"unharmed and {after} — {DOCTOR_HINT}",
            exitcode,
        )

    def _stop(self) -> None:
        conn, process = self._conn, self._process
        self._conn = self._process = None
        if conn is not None:
            with suppress(OSError):
                conn.send(None)
            conn.close()
        if process is not None and _wait(process, timeout_s=5) is None:
            process.kill()
            process.wait()

    def close(self) -> None:
        with self._lock:
            self._stop()
            self.info = None


# Not ``-m`` on the child's module: its classes would then unpickle as ``__main__.X``.
_CHILD_ENTRY = f"from {llama_child.__name__} import serve_fd; serve_fd"


def _spawn(
    spec: ModelSpec,
) -> tuple[subprocess.Popen[bytes], Connection, dict[str, str | None]]:
    """Start a worker process holding one end of a socket pair; send it ``spec``. Also returns
    the OpenMP wait it was given and the load that chose it."""
    ours, theirs = socket.socketpair()
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    load = load_per_cpu()
    environment = worker_environment(os.environ, load)
    waits = {name: environment.get(name) for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    log.info("llama_worker_openmp_wait", load_per_cpu=round(load, 2), **waits)
    with ours, theirs:
        process = subprocess.Popen(
            [sys.executable, "-c", f"{_CHILD_ENTRY}({theirs.fileno()})"],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=2,  # onto our stderr: the parent's stdout is for results
            env={**environment, "PYTHONPATH": path},
        )
        conn = Connection(ours.detach())
    conn.send(spec)
    return process, conn, {**waits, "load_per_cpu": f"{load:.2f}"}


def _as_error(failure: Failure) -> ProviderError | UnsupportedOption:
    """The exception a ``Failure`` stands for: ``UnsupportedOption`` when it names a field."""
    if failure.param is not None:
        return UnsupportedOption(failure.param, failure.message)
    return ProviderError(failure.kind, failure.message)


def _wait(process: subprocess.Popen[bytes], *, timeout_s: float) -> int | None:
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


_WORKERS: dict[ModelSpec, LlamaWorker] = {}
_WORKERS_LOCK = threading.Lock()


def worker_for(spec: ModelSpec) -> LlamaWorker:
    """The process-wide worker for ``spec`` (one model per spec, shared by every backbone)."""
    with _WORKERS_LOCK:
        worker = _WORKERS.get(spec)
        if worker is None:
            worker = _WORKERS[spec] = LlamaWorker(spec)
        return worker


def close_workers() -> None:
    with _WORKERS_LOCK:
        workers = list(_WORKERS.values())
        _WORKERS.clear()
    for worker in workers:
        worker.close()


atexit.register(close_workers)
