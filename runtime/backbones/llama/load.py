"""Loading one GGUF model into llama.cpp safely on CPUs that advertise what they cannot run.

Above: the worker's main loop (``runtime/backbones/llama/child.py``) and the benchmarks, through
``open_llama``. Below: ``llama_cpp.Llama`` and llama.cpp's low-level model parameters and log
callback.

Every model is loaded with llama.cpp's extra buffer types off (model parameter
``use_extra_bufts``). They are AMX tile kernels, which die with SIGILL on virtual machines that
advertise AMX but cannot execute tile instructions, and CPU_REPACK weight layouts. llama.cpp
has no switch for AMX alone; repacking covers Q4_0/Q4_K/IQ4_NL-style weights, not SmolLM2's
Q4_1 and Q8_0 tensors, so turning both off costs this model nothing (benchmarks/
bench_backbones.py measures it). The context is opened with ``MAX_SEQUENCES`` sequences over
one unified KV cache of the model's window, for ``batch``'s replies decoded together over a
shared prefix (a batch that would not fit is split, in order), so a single call keeps the
cache layout it always had. The load also reports llama.cpp's buffer-size lines, so
``mirage doctor`` can show where the weights went.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from runtime.backbones.llama.batch import MAX_SEQUENCES
from runtime.backbones.llama.wire import LoadReport, ModelSpec

if TYPE_CHECKING:
    from llama_cpp import Llama

_BUFFER_LINE_MARKERS = ("model buffer size", "KV buffer size", "compute buffer size")


@contextmanager
def _default_params_override(kind: str, **fields: Any) -> Iterator[None]:
    """``Llama`` exposes no ``use_extra_bufts``, ``n_seq_max`` or ``kv_unified`` argument: it
    builds its ``kind`` (``model`` or ``context``) parameters from
    ``llama_<kind>_default_params()``, so set the fields on what that returns while it loads."""
    from llama_cpp import llama_cpp as low_level

    function_name = f"llama_{kind}_default_params"
    original = getattr(low_level, function_name)
    known = {name for name, *_ in getattr(low_level, f"llama_{kind}_params")._fields_}
    unknown = sorted(set(fields) - known)
    if unknown:  # ctypes would keep them as plain attributes that never reach llama.cpp
        raise RuntimeError(
            f"this llama-cpp-python has no {kind} parameter {', '.join(unknown)}; "
            "install llama-cpp-python>=0.3.36"
        )

    def overridden() -> Any:
        params = original()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    setattr(low_level, function_name, overridden)
    try:
        yield
    finally:
        setattr(low_level, function_name, original)


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
        _default_params_override("model", use_extra_bufts=spec.extra_buffer_types),
        _default_params_override("context", n_seq_max=MAX_SEQUENCES, kv_unified=True),
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
