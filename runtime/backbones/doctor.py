"""``mirage doctor``: what the embedded backbone uses on this machine, and whether it runs.

In order: the CPU's instruction-set flags (``/proc/cpuinfo``); what the installed llama.cpp was
compiled for (``llama_print_system_info``, read inside the worker process, so a library that
cannot even load is reported rather than fatal); whether the build needs an instruction this
CPU lacks (an error naming the rebuild command); where the weights go (llama.cpp's buffer
types, with its extra buffer types, AMX and CPU_REPACK, off); what it runs with and why (threads,
the OpenMP wait the load chose, whether the usable CPUs are SMT siblings of fewer cores, how
probes are batched); and a short real prefill and decode in the worker process, so a native
crash is reported by its signal.

Above: ``mirage doctor`` (``mirage.cli.doctor``), which prints the checks. Below:
``runtime.backbones.llama.worker`` (the worker process) and its messages (``llama_wire``).
"""

from __future__ import annotations

import os
import platform
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runtime.backbones.base import ProviderError
from runtime.backbones.llama.backbone import THREADS_ENV, EmbeddedBackbone, render_chatml
from runtime.backbones.llama.batch import MAX_SEQUENCES
from runtime.backbones.llama.wire import Generated, GenerateRequest, WorkerInfo
from runtime.backbones.llama.worker import (
    LlamaWorker,
    WorkerCrashed,
    describe_exit,
    usable_cpus,
)

Status = Literal["ok", "note", "error"]
CPUINFO = Path("/proc/cpuinfo")
SYSFS_CPU = Path("/sys/devices/system/cpu")
TRIAL_PROMPT_TOKENS = 600  # above one 512-token batch: the probe-sized prefill that crashed
TRIAL_OUTPUT_TOKENS = 16
# How the README builds llama-cpp-python (for any x86-64 CPU with AVX2), read from the root of
# mirage's checkout; --no-cache-dir, or pip reinstalls the wheel it cached from the bad build.
LLAMA_REQUIREMENTS = "packaging/llama-cpp.txt"
CHECKOUT = Path(__file__).resolve().parents[2]
REBUILD_COMMAND = (
    f"cd {shlex.quote(str(CHECKOUT))} && "
    if (CHECKOUT / LLAMA_REQUIREMENTS).is_file()
    else "from mirage's checkout: "
) + f"pip install --force-reinstall --no-deps --no-cache-dir -r {LLAMA_REQUIREMENTS}"

# llama.cpp's compile-feature names (ggml-cpu's feature list, as printed by
# llama_print_system_info) -> the /proc/cpuinfo flags the compiled code needs.
BUILD_FEATURE_FLAGS: dict[str, tuple[str, ...]] = {
    "SSE3": ("pni",),
    "SSSE3": ("ssse3",),
    "AVX": ("avx",),
    "AVX_VNNI": ("avx_vnni",),
    "AVX2": ("avx2",),
    "F16C": ("f16c",),
    "FMA": ("fma",),
    "BMI2": ("bmi2",),
    "AVX512": ("avx512f",),
    "AVX512_VBMI": ("avx512vbmi",),
    "AVX512_VNNI": ("avx512_vnni",),
    "AVX512_BF16": ("avx512_bf16",),
    "AMX_INT8": ("amx_tile", "amx_int8"),
}
# llama.cpp's extra buffer types on x86 -> the compile feature that brings each in
EXTRA_BUFFER_TYPES = {"AMX": "AMX_INT8", "CPU_REPACK": "REPACK"}
SHOWN_CPU_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "bmi2",
    "avx_vnni",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
)


@dataclass(frozen=True)
class Check:
    status: Status
    topic: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<6} {self.topic:<10} {self.detail}"


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The first ``flags`` line of ``/proc/cpuinfo`` (every core lists the same)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def cpu_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return platform.processor() or "unknown CPU"


def build_features(system_info: str) -> frozenset[str]:
    """Features llama.cpp's CPU backend was compiled with: ``CPU : AVX = 1 | AVX2 = 1 | ...``."""
    features = set()
    for item in system_info.replace("CPU :", "|").split("|"):
        name, _, value = item.partition("=")
        if value.strip() == "1":
            features.add(name.strip())
    return frozenset(features)


def missing_instructions(features: frozenset[str], flags: frozenset[str]) -> list[str]:
    """Compiled-in instruction sets this CPU does not advertise, as ``AVX512 (avx512f)``."""
    missing = []
    for feature in sorted(features & BUILD_FEATURE_FLAGS.keys()):
        lacking = [flag for flag in BUILD_FEATURE_FLAGS[feature] if flag not in flags]
        if lacking:
            missing.append(f"{feature} ({', '.join(lacking)})")
    return missing


def cpu_check(cpuinfo: str) -> Check:
    flags = cpu_flags(cpuinfo)
    if not flags:
        return Check("note", "cpu", f"{platform.machine()}: no /proc/cpuinfo flags to read")
    shown = " ".join(flag if flag in flags else f"no-{flag}" for flag in SHOWN_CPU_FLAGS)
    return Check("ok", "cpu", f"{cpu_model(cpuinfo)} · {platform.machine()} · {shown}")


def compatibility_check(system_info: str, flags: frozenset[str]) -> Check:
    features = build_features(system_info)
    missing = missing_instructions(features, flags)
    if missing:
        return Check(
            "error",
            "build",
            f"the installed llama.cpp was compiled for {', '.join(missing)}, which this CPU "
            f"lacks: the model would die with SIGILL. Rebuild it for any x86-64 CPU with "
            f"AVX2: {REBUILD_COMMAND}",
        )
    compiled = " ".join(sorted(features & BUILD_FEATURE_FLAGS.keys())) or "baseline x86-64"
    return Check("ok", "build", f"compiled for {compiled}; this CPU has every one of them")


def amx_check(system_info: str, flags: frozenset[str]) -> Check | None:
    advertised = "amx_tile" in flags
    compiled = "AMX_INT8" in build_features(system_info)
    if not (advertised or compiled):
        return None
    where = "this CPU advertises AMX" if advertised else "the build has AMX kernels"
    return Check(
        "note",
        "amx",
        f"{where}; the embedded backbone never takes the AMX path (extra buffer types off), "
        "so a virtual machine that cannot execute tile instructions is safe",
    )


def buffers_check(info: WorkerInfo) -> Check:
    features = build_features(info.build.system_info)
    compiled = [name for name, key in EXTRA_BUFFER_TYPES.items() if key in features]
    state = "on" if info.load.use_extra_bufts else "off"
    extra = f"extra buffer types {state} (compiled in: {', '.join(compiled) or 'none'})"
    lines = "; ".join(line.split(": ", 1)[-1] for line in info.load.buffer_lines)
    return Check("ok", "buffers", f"{extra}; {lines}")


def physical_cores(cpus: set[int], sysfs: Path = SYSFS_CPU) -> int | None:
    """Distinct (package, core) pairs among ``cpus`` (``/sys``'s topology); None: unknown."""
    cores = set()
    for cpu in cpus:
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            return None
        cores.add((package, core))
    return len(cores)


def threads_check(worker: LlamaWorker, cpus: set[int], cores: int | None) -> Check:
    """What the worker runs with and why: threads, the OpenMP wait, the CPUs' topology and how
    probes are batched. Two threads on SMT siblings of one core share its vector units."""
    threads = worker.spec.n_threads
    chosen = (
        "MIRAGE_LLAMA_THREADS"
        if THREADS_ENV in os.environ
        else "default; MIRAGE_LLAMA_THREADS sets it"
    )
    wait = worker.openmp_wait
    user_set = {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & os.environ.keys()
    if user_set:
        waiting = f"OpenMP wait as you set it ({', '.join(sorted(user_set))})"
    elif wait.get("GOMP_SPINCOUNT"):
        waiting = (
            f"OpenMP threads spin {wait['GOMP_SPINCOUNT']} times at barriers, then sleep "
            f"(other processes kept {wait.get('load_per_cpu')} of each CPU busy at start: idle)"
        )
    else:
        waiting = (
            "OpenMP threads sleep at barriers at once (other processes kept "
            f"{wait.get('load_per_cpu')} of each CPU busy at start: busy)"
        )
    layout = f"{len(cpus)} usable CPUs on " + (f"{cores} physical cores" if cores else "? cores")
    batching = (
        f"probes decoded up to {MAX_SEQUENCES - 1} at a time over one unified KV cache of "
        f"{worker.spec.n_ctx:,} cells (flash attention off)"
    )
    detail = f"{threads} llama.cpp threads ({chosen}) · {layout} · {waiting} · {batching}"
    if cores is not None and cores < min(threads, len(cpus)):
        return Check(
            "note",
            "threads",
            f"{detail}. The CPUs are SMT siblings: {threads} threads share {cores} core's vector "
            "units, so prefill runs at about one core's speed (compare `run` below with "
            "docs/running.md's figures)",
        )
    return Check("ok", "threads", detail)


def trial_check(worker: LlamaWorker) -> Check:
    """A real ~600-token prefill and a 16-token decode in the worker process."""
    request = GenerateRequest(
        prompt=_trial_prompt(), max_output_tokens=TRIAL_OUTPUT_TOKENS, temperature=0.0, seed=1
    )
    try:
        generated: Generated = worker.call(request)
    except WorkerCrashed as crash:
        return Check("error", "run", _crash_detail(crash, "in a real prefill"))
    except ProviderError as error:
        return Check("error", "run", error.detail)
    return Check("ok", "run", _speeds(generated))


def _crash_detail(crash: WorkerCrashed, stage: str) -> str:
    detail = f"the model's worker process died {stage}: {describe_exit(crash.exitcode)}"
    if crash.signal_name == "SIGILL":
        detail += (
            "; the installed llama.cpp executes an instruction this CPU (or its virtual "
            f"machine) cannot run. Rebuild it for any x86-64 CPU with AVX2: {REBUILD_COMMAND}"
        )
    return detail


def _trial_prompt() -> str:
    facts = [
        f"Fact {i}: the crate labelled K-{i * 37 % 1000} holds {i % 9 + 1} blue marbles."
        for i in range(TRIAL_PROMPT_TOKENS // 24)
    ]
    question = "\n".join([*facts, "Which crate holds the most marbles?"])
    return render_chatml([{"role": "user", "content": question}], default_system=None)


def _speeds(generated: Generated) -> str:
    prefill = generated.prefill_tokens / max(generated.prefill_s, 1e-9)
    decode = generated.decode_tokens / max(generated.decode_s, 1e-9)
    return (
        f"prefill {generated.prefill_tokens} tokens at {prefill:.0f} tok/s, decode "
        f"{generated.decode_tokens} tokens at {decode:.0f} tok/s ({generated.latency_s:.1f} s)"
    )


def diagnose(worker: LlamaWorker, cpuinfo: str) -> list[Check]:
    checks = [cpu_check(cpuinfo)]
    flags = cpu_flags(cpuinfo)
    try:
        info = worker.start()
    except ProviderError as error:
        if worker.build is not None and flags:
            checks.append(compatibility_check(worker.build.system_info, flags))
        if isinstance(error, WorkerCrashed):
            return [*checks, Check("error", "load", _crash_detail(error, "loading the model"))]
        return [*checks, Check("error", "load", error.detail)]
    checks.append(
        Check(
            "ok",
            "llama.cpp",
            f"llama-cpp-python {info.build.llama_cpp_version} · "
            f"{info.build.system_info.rstrip(' |')} · model loaded in {info.load.seconds:.1f} s",
        )
    )
    if flags:
        checks.append(compatibility_check(info.build.system_info, flags))
        amx = amx_check(info.build.system_info, flags)
        checks.extend([amx] if amx else [])
    checks.append(buffers_check(info))
    cpus = usable_cpus()
    checks.append(threads_check(worker, cpus, physical_cores(cpus)))
    checks.append(trial_check(worker))
    return checks


def check_embedded_backbone(backbone: EmbeddedBackbone, cpuinfo: str) -> list[Check]:
    """Every check for ``backbone`` on the CPU ``cpuinfo`` describes (its worker is closed
    afterwards)."""
    try:
        worker = backbone.worker()
    except ProviderError as error:
        return [cpu_check(cpuinfo), Check("error", "model", error.detail)]
    try:
        return diagnose(worker, cpuinfo)
    finally:
        worker.close()
