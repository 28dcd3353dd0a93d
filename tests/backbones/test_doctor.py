"""``mirage doctor``: CPU flags against what the installed llama.cpp was compiled for (fast, on
real ``/proc/cpuinfo`` and ``llama_print_system_info`` text), and the command itself on the
real model in its worker process, including a real crash of that worker (slow)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mirage.cli import app
from runtime.backbones.doctor import (
    CHECKOUT,
    LLAMA_REQUIREMENTS,
    REBUILD_COMMAND,
    amx_check,
    build_features,
    compatibility_check,
    cpu_flags,
    physical_cores,
    threads_check,
    trial_check,
)
from runtime.backbones.llama.backbone import EmbeddedBackbone
from runtime.backbones.llama.wire import ModelSpec
from runtime.backbones.llama.worker import LlamaWorker

# An AVX2-only AMD EPYC guest (this project's CI machines) ...
EPYC_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 pni ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi1 bmi2 sha_ni vaes
"""
# ... and a Sapphire Rapids guest that advertises AMX.
SPR_CPUINFO = EPYC_CPUINFO.replace("AMD EPYC", "Intel(R) Xeon(R) Platinum 8480+").replace(
    "vaes", "avx512f avx512_vnni avx512_bf16 avx512vbmi avx_vnni amx_tile amx_int8 amx_bf16"
)
NATIVE_AVX2_BUILD = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
)
NATIVE_AMX_BUILD = (  # as printed by a wheel built with -march=native on such a Xeon
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | "
    "BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | "
    "AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
)


def test_cpu_flags_and_build_features_are_read_from_their_real_formats() -> None:
    assert {"avx2", "fma", "f16c", "pni"} <= cpu_flags(EPYC_CPUINFO)
    assert "avx512f" not in cpu_flags(EPYC_CPUINFO)
    assert build_features(NATIVE_AVX2_BUILD) == {
        "SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "LLAMAFILE", "OPENMP", "REPACK",
    }  # fmt: skip
    assert {"AVX512", "AMX_INT8"} <= build_features(NATIVE_AMX_BUILD)


def test_a_build_for_instructions_the_cpu_lacks_is_an_error_naming_the_rebuild() -> None:
    check = compatibility_check(NATIVE_AMX_BUILD, cpu_flags(EPYC_CPUINFO))
    assert check.status == "error"
    assert "AVX512 (avx512f)" in check.detail and "AMX_INT8 (amx_tile, amx_int8)" in check.detail
    assert "SIGILL" in check.detail and REBUILD_COMMAND in check.detail
    assert f"-r {LLAMA_REQUIREMENTS}" in REBUILD_COMMAND and "--no-cache-dir" in REBUILD_COMMAND


def test_the_rebuild_recipe_is_portable_and_its_cmake_include_exists() -> None:
    recipe = (CHECKOUT / LLAMA_REQUIREMENTS).read_text()
    defines = dict(re.findall(r"--config-settings=cmake\.define\.([\w.]+)=(\S+)", recipe))
    assert defines["GGML_NATIVE"] == "OFF"
    assert all(defines[f"GGML_{isa}"] == "ON" for isa in ("AVX", "AVX2", "FMA", "F16C", "BMI2"))
    assert not {"GGML_AVX512", "GGML_AMX_INT8"} & defines.keys()
    include = defines["CMAKE_PROJECT_llama.cpp_INCLUDE"].replace("${PWD}", str(CHECKOUT))
    assert Path(include).is_file()


def test_a_build_the_cpu_can_run_is_ok() -> None:
    assert compatibility_check(NATIVE_AVX2_BUILD, cpu_flags(EPYC_CPUINFO)).status == "ok"
    assert compatibility_check(NATIVE_AMX_BUILD, cpu_flags(SPR_CPUINFO)).status == "ok"


def test_advertised_amx_is_noted_as_never_used() -> None:
    assert amx_check(NATIVE_AVX2_BUILD, cpu_flags(EPYC_CPUINFO)) is None
    note = amx_check(NATIVE_AMX_BUILD, cpu_flags(SPR_CPUINFO))
    assert note is not None and note.status == "note"
    assert "never takes the AMX path" in note.detail


@pytest.mark.slow
def test_doctor_reports_this_machine_and_a_real_run() -> None:
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    lines = {line.split()[1]: line for line in result.output.splitlines()[1:-1]}
    assert set(lines) >= {"cpu", "llama.cpp", "build", "buffers", "threads", "run"}
    assert all(line.startswith(("ok", "note")) for line in lines.values())
    assert "extra buffer types off" in lines["buffers"]
    assert "AMX" not in lines["buffers"].split(";", 1)[1]  # no weights in an AMX buffer
    assert "prefill" in lines["run"] and "tok/s" in lines["run"]
    assert result.output.rstrip().endswith("ok: the embedded backbone runs on this machine")


@pytest.mark.slow
def test_a_native_crash_during_the_trial_is_reported_by_its_signal() -> None:
    worker = EmbeddedBackbone(context_window=2048, n_threads=1).worker()
    pid = worker.start().pid
    threading.Thread(target=lambda: (time.sleep(0.3), os.kill(pid, signal.SIGILL))).start()
    try:
        check = trial_check(worker)  # a ~600-token prefill: well over 0.3 s on one thread
    finally:
        worker.close()
    assert check.status == "error"
    assert "SIGILL (Illegal instruction)" in check.detail and REBUILD_COMMAND in check.detail


def fake_topology(root: Path, cores: dict[int, tuple[int, int]]) -> Path:
    for cpu, (package, core) in cores.items():
        topology = root / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")
    return root


def test_smt_siblings_are_noted_with_what_the_worker_chose(tmp_path: Path) -> None:
    siblings = fake_topology(tmp_path / "smt", {0: (0, 0), 1: (0, 0)})
    separate = fake_topology(tmp_path / "cores", {0: (0, 0), 1: (0, 1)})
    assert physical_cores({0, 1}, siblings) == 1
    assert physical_cores({0, 1}, separate) == 2
    assert physical_cores({0, 1}, tmp_path / "nothing") is None
    worker = LlamaWorker(ModelSpec("model.gguf", 8192, 2))
    worker.openmp_wait = {"GOMP_SPINCOUNT": "1000", "load_per_cpu": "0.20"}
    shared = threads_check(worker, {0, 1}, 1)
    assert shared.status == "note" and "SMT siblings" in shared.detail
    alone = threads_check(worker, {0, 1}, 2)
    assert alone.status == "ok"
    assert "2 llama.cpp threads" in alone.detail and "spin 1000 times" in alone.detail
    assert "kept 0.20 of each CPU busy" in alone.detail and "8,192 cells" in alone.detail
