"""The embedded model's worker process: one llama.cpp model in a child process.

Above: ``EmbeddedBackbone`` (``runtime/backbones/local.py``) and ``mirage doctor``, through
``LlamaWorker.call``. Below: one ``llama_cpp.Llama`` in a child process
(``python -c`` calling ``serve_fd``), spoken to with pickled messages over a socket
pair (``multiprocessing.connection``). A plain subprocess rather than ``multiprocessing``'s
spawn, which re-runs the caller's main script and so fails in scripts without a main guard.

A native crash in llama.cpp (SIGILL from an instruction the CPU cannot execute, SIGSEGV, an
abort) ends only the child: the caller gets a ``ProviderError`` that names the signal and
``mirage doctor``, and the next call starts a fresh worker. The child keeps its KV cache
between calls, so a prompt sharing a prefix with the previous one is not prefilled again
(``cached_tokens`` reports the reused prefix), and keeps copies of caches that a call would
discard (``kv_snapshots``), so a prompt sharing a long prefix with an earlier one, not only the
last, starts from that copy.

Every model is loaded with llama.cpp's extra buffer types off (model parameter
``use_extra_bufts``). They are AMX tile kernels, which die with SIGILL on virtual machines that
advertise AMX but cannot execute tile instructions, and CPU_REPACK weight layouts. llama.cpp
has no switch for AMX alone; repacking covers Q4_0/Q4_K/IQ4_NL-style weights, not SmolLM2's
Q4_1 and Q8_0 tensors, so turning both off costs this model nothing (benchmarks/
bench_backbones.py measures it).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from runtime.backbones.base import ProviderError, ProviderErrorKind
from runtime.backbones.kv_snapshots import (
    KVSnapshot,
    KVSnapshots,
    common_prefix_length,
)

if TYPE_CHECKING:
    from llama_cpp import Llama

log = structlog.get_logger(__name__)

CHATML_END = "<|im_end|>"
MAX_CONSECUTIVE_CRASHES = 3
DOCTOR_HINT = "run `mirage doctor` to check this CPU against the installed llama.cpp build"
# llama.cpp's OpenMP threads spin at every barrier by default; when the machine is shared or
# its vCPUs are descheduled, a spinning thread waits on a partner that is not running: decode
# fell from 18 to 1 token/s with 2 threads at load 14 on 2 cores. Sleeping costs up to ~1.7x
# on an idle machine (88 vs 51 token/s; benchmarks/bench_backbones.py --sections omp), where
# OMP_WAIT_POLICY=ACTIVE in the environment takes precedence.
WORKER_ENV_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}
_BUFFER_LINE_MARKERS = ("model buffer size", "KV buffer size", "compute buffer size")


@dataclass(frozen=True)
class ModelSpec:
    """What a worker loads. ``extra_buffer_types`` is llama.cpp's ``use_extra_bufts``: off
    everywhere except in the benchmark that measures what turning it off costs.
    ``kv_snapshot_bytes`` bounds the kept copies of the KV cache (``kv_snapshots``; 0: none;
    ``EmbeddedBackbone`` sets it from ``MIRAGE_KV_SNAPSHOT_MB``)."""

    path: str
    n_ctx: int
    n_threads: int
    extra_buffer_types: bool = False
    kv_snapshot_bytes: int = 0


@dataclass(frozen=True)
class TokenizeRequest:
    prompt: str


@dataclass(frozen=True)
class GenerateRequest:
    prompt: str
    max_output_tokens: int
    temperature: float
    seed: int


@dataclass(frozen=True)
class Generated:
    text: str
    finish_reason: str
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int
    latency_s: float
    prefill_tokens: int  # llama.cpp's own counters for this call
    prefill_s: float
    decode_tokens: int
    decode_s: float


@dataclass(frozen=True)
class Failure:
    kind: ProviderErrorKind
    message: str


@dataclass(frozen=True)
class BuildInfo:
    """Sent as soon as llama.cpp is imported, before the model loads."""

    llama_cpp_version: str
    system_info: str


@dataclass(frozen=True)
class LoadReport:
    seconds: float
    use_extra_bufts: bool
    buffer_lines: tuple[str, ...]  # llama.cpp's "... buffer size = N MiB" log lines


@dataclass(frozen=True)
class WorkerInfo:
    pid: int
    build: BuildInfo
    load: LoadReport


Request = TokenizeRequest | GenerateRequest


# ---------------------------------------------------------------- child side


@contextmanager
def _model_params_override(**fields: Any) -> Iterator[None]:
    """``Llama`` exposes no ``use_extra_bufts`` argument: it builds its model parameters from
    ``llama_model_default_params()``, so set the fields on what that returns while it loads."""
    from llama_cpp import llama_cpp as low_level

    original = low_level.llama_model_default_params
    known = {name for name, *_ in low_level.llama_model_params._fields_}
    unknown = sorted(set(fields) - known)
    if unknown:  # ctypes would keep them as plain attributes that never reach llama.cpp
        raise RuntimeError(
            f"this llama-cpp-python has no model parameter {', '.join(unknown)}; "
            "install llama-cpp-python>=0.3.36"
        )

    def overridden() -> Any:
        params = original()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    low_level.llama_model_default_params = overridden
    try:
        yield
    finally:
        low_level.llama_model_default_params = original


@contextmanager
def _captured_buffer_lines() -> Iterator[list[str]]:
    """llama.cpp's buffer-size log lines while loading; every other log line is dropped."""
    from llama_cpp import llama_cpp as low_level

    lines: list[str] = []

    @low_level.llama_log_callback
    def collect(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        line = text.decode("utf-8", "replace").strip()
        if any(marker in line for marker in _BUFFER_LINE_MARKERS):
            lines.append(" ".join(line.split()))

    low_level.llama_log_set(collect, ctypes.c_void_p(0))
    try:
        yield lines
    finally:
        from llama_cpp import _logger

        low_level.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


def open_llama(spec: ModelSpec) -> tuple[Llama, LoadReport]:
    from llama_cpp import Llama

    started = time.perf_counter()
    with (
        _captured_buffer_lines() as lines,
        _model_params_override(use_extra_bufts=spec.extra_buffer_types),
    ):
        llama = Llama(
            model_path=spec.path,
            n_ctx=spec.n_ctx,
            n_threads=spec.n_threads,
            n_threads_batch=spec.n_threads,
            n_batch=512,
            verbose=False,
        )
    taken = bool(llama.model_params.use_extra_bufts)
    if taken != spec.extra_buffer_types:
        llama.close()
        raise RuntimeError(
            f"llama-cpp-python ignored use_extra_bufts={spec.extra_buffer_types}; "
            "this version builds its model parameters differently"
        )
    report = LoadReport(
        seconds=round(time.perf_counter() - started, 3),
        use_extra_bufts=taken,
        buffer_lines=tuple(lines),
    )
    return llama, report


class LlamaKV:
    """The live KV cache of sequence 0, for ``KVSnapshots``."""

    def __init__(self, llama: Llama) -> None:
        self.llama = llama

    def held_tokens(self) -> list[int]:
        return list(self.llama.input_ids[: self.llama.n_tokens].tolist())

    def save(self) -> KVSnapshot | None:
        from llama_cpp import llama_cpp as low_level

        ctx = self.llama.ctx
        size = low_level.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = low_level.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written == 0:
            return None
        return KVSnapshot(tuple(self.held_tokens()), ctypes.string_at(buffer, written))

    def restore(self, snapshot: KVSnapshot) -> bool:
        from llama_cpp import llama_cpp as low_level

        count = len(snapshot.tokens)
        buffer = (ctypes.c_uint8 * len(snapshot.state)).from_buffer_copy(snapshot.state)
        if low_level.llama_state_seq_set_data(self.llama.ctx, buffer, len(buffer), 0) == 0:
            self.llama.reset()  # the sequence may be half written: prefill from scratch
            return False
        self.llama.input_ids[:count] = snapshot.tokens
        self.llama.n_tokens = count
        self.llama._requires_eval = True  # the logits are not this state's: decode once more
        return True


class LlamaRunner:
    """The child's side: tokenize and generate on one loaded model, keeping copies of its KV
    cache that later prompts can start from (``kv_snapshots``)."""

    def __init__(self, llama: Llama, n_ctx: int, kv_snapshot_bytes: int = 0) -> None:
        self.llama = llama
        self.n_ctx = n_ctx
        self.snapshots = KVSnapshots(kv_snapshot_bytes)

    def handle(self, request: Request) -> int | Generated | Failure:
        if isinstance(request, TokenizeRequest):
            return len(self._tokens(request.prompt))
        return self.generate(request)

    def _tokens(self, prompt: str) -> list[int]:
        return list(self.llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))

    def generate(self, request: GenerateRequest) -> Generated | Failure:
        from llama_cpp import llama_cpp as low_level

        started = time.perf_counter()
        tokens = self._tokens(request.prompt)
        room = self.n_ctx - len(tokens)
        if room < 1:
            return Failure(
                "context_length",
                f"prompt of {len(tokens)} tokens does not fit the embedded model's "
                f"{self.n_ctx}-token window",
            )
        self.snapshots.prepare(LlamaKV(self.llama), tokens)
        cached = self._reusable_prefix(tokens)
        low_level.llama_perf_context_reset(self.llama.ctx)
        try:
            result: Any = self.llama.create_completion(
                tokens,
                max_tokens=min(request.max_output_tokens, room),
                temperature=request.temperature,
                seed=request.seed,
                stop=[CHATML_END],
            )
        except (RuntimeError, ValueError) as exc:  # llama.cpp decode/eval failures
            kind: ProviderErrorKind = (
                "context_length" if "context window" in str(exc) else "unknown"
            )
            return Failure(kind, f"llama.cpp: {exc}")
        perf = low_level.llama_perf_context(self.llama.ctx)
        choice = result["choices"][0]
        return Generated(
            text=choice["text"],
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=len(tokens),
            output_tokens=int(result["usage"]["completion_tokens"]),
            cached_tokens=max(cached, 0),
            latency_s=time.perf_counter() - started,
            prefill_tokens=int(perf.n_p_eval),
            prefill_s=float(perf.t_p_eval_ms) / 1000,
            decode_tokens=int(perf.n_eval),
            decode_s=float(perf.t_eval_ms) / 1000,
        )

    def _reusable_prefix(self, tokens: list[int]) -> int:
        """Prompt tokens llama.cpp takes from its KV cache instead of re-evaluating (it always
        re-evaluates at least the last prompt token to refresh the logits)."""
        previous = self.llama.input_ids[: self.llama.n_tokens].tolist()
        return min(common_prefix_length(previous, tokens), len(tokens) - 1)


def serve_fd(fd: int) -> None:
    serve(Connection(fd))


def serve(conn: Connection) -> None:
    """The worker's main loop (runs in the child): the first message is the ``ModelSpec``;
    it ends when the parent sends ``None`` or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    spec: ModelSpec | None = _receive(conn)
    if spec is None:
        return
    import llama_cpp

    system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    conn.send(BuildInfo(llama_cpp_version=llama_cpp.__version__, system_info=system_info))
    try:
        llama, report = open_llama(spec)
    except (RuntimeError, ValueError, OSError) as exc:
        conn.send(Failure("unknown", f"llama.cpp could not load {spec.path}: {exc}"))
        return
    runner = LlamaRunner(llama, spec.n_ctx, spec.kv_snapshot_bytes)
    try:
        conn.send(report)
        while (request := _receive(conn)) is not None:
            conn.send(runner.handle(request))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone (killed, say): nobody is left to answer
    finally:
        llama.close()


def _receive(conn: Connection) -> Any:
    try:
        return conn.recv()
    except EOFError:
        return None


# ---------------------------------------------------------------- parent side


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

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> WorkerInfo:
        with self._lock:
            return self._ensure_started()

    def call(self, request: Request) -> Any:
        """The worker's reply to ``request``; a ``Failure`` is raised as ``ProviderError``."""
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
            raise ProviderError(reply.kind, reply.message)
        return reply

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
        process, conn = _spawn(self.spec)
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


# Not ``-m`` on this module: its classes would then unpickle as ``__main__.X`` in the parent.
_CHILD_ENTRY = f"from {__name__} import serve_fd; serve_fd"


def _spawn(spec: ModelSpec) -> tuple[subprocess.Popen[bytes], Connection]:
    """Start a worker process holding one end of a socket pair; send it ``spec``."""
    ours, theirs = socket.socketpair()
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    with ours, theirs:
        process = subprocess.Popen(
            [sys.executable, "-c", f"{_CHILD_ENTRY}({theirs.fileno()})"],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=2,  # onto our stderr: the parent's stdout is for results
            env={**WORKER_ENV_DEFAULTS, **os.environ, "PYTHONPATH": path},
        )
        conn = Connection(ours.detach())
    conn.send(spec)
    return process, conn


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
