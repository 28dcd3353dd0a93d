"""Install time: the README's set-up command in a new venv with an empty pip cache, per phase.

    python benchmarks/bench_install.py [--command run|dev|'SHELL COMMAND'] [--label NAME]
        [--workdir DIR] [--no-doctor]

Runs the README's first set-up command without its last step (``mirage run``), or with
``--command dev`` the second one without ``pytest``, or any ``&&``-joined pip command given (the
old recipe, say), from the repo root in a new venv under ``--workdir`` (default: a temporary
folder, removed afterwards), with ``PIP_CACHE_DIR`` an empty folder: what a fresh machine
does. ``SKBUILD_BUILD_DIR`` keeps llama-cpp-python's build tree (it only moves the tree), so
ninja's log gives each compiled file's time.

Phases: ``torch`` (the step that installs torch), ``llama-cpp-python build`` (pip's "Building
wheel for llama-cpp-python ... started" to "finished" lines), ``rest`` (the total minus both:
resolving, downloading, installing everything else). Each step's wall and CPU seconds (CPU
counts every process the step waited for, compilers included, and depends far less on the
machine's load than wall time). Per library, the compile jobs ninja ran, their summed seconds
and share (jobs run in parallel, so the sum exceeds the build's wall time; under load every job
slows, the shares less so). The instruction-set flags llama.cpp's CPU backend was compiled
with, load averages (sampled during the install), CPU model and count, the time to import what
``mirage run`` loads (first, byte-compiling, then cached), and ``mirage doctor`` in
the new venv, which proves the install runs. Writes ``benchmarks/results/install.json`` under
``--label`` (other labels keep their numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "install.json"
BUILD_LINE = re.compile(r"Building wheel for llama[-_]cpp[-_]python \S+: (started|finished)")
TARGET_DIR = re.compile(r"CMakeFiles/([^/]+)\.dir/")


def readme_command(which: str) -> str:
    """The README's first (``run``) or second (``dev``) set-up command without its last step."""
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line]
    start = lines.index("```bash") + 1
    command = lines[start] if which == "run" else lines[start + 1]
    return command.rsplit(" && ", 1)[0]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_step(step: str, env: dict[str, str], marks: dict[str, float]) -> dict[str, Any]:
    """Run one ``&&`` step with bash from the repo root, noting when the llama build starts and
    ends: its wall and CPU seconds (compilers included: every process is waited for)."""
    started, cpu = time.perf_counter(), children_cpu_s()
    with subprocess.Popen(
        ["bash", "-c", step],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            found = BUILD_LINE.search(line)
            if found:
                marks[found.group(1)] = time.perf_counter()
    if process.returncode != 0:
        raise SystemExit(f"bench_install: step failed (exit {process.returncode}): {step}")
    seconds, cpu_s = time.perf_counter() - started, children_cpu_s() - cpu
    return {"step": step, "seconds": round(seconds, 1), "cpu_s": round(cpu_s, 1)}


def venv_env(venv: Path, scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CMAKE_ARGS")}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        PWD=str(ROOT),  # packaging/llama-cpp.txt names its CMake include under ${PWD}
        PIP_CACHE_DIR=str(scratch / "pip-cache"),
        SKBUILD_BUILD_DIR=str(scratch / "llama-build"),
    )
    return env


def install(command: str, scratch: Path) -> dict[str, Any]:
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = venv_env(venv, scratch)
    marks: dict[str, float] = {}
    steps = [run_step(step, env, marks) for step in command.split(" && ")]
    total = sum(step["seconds"] for step in steps)
    torch = sum(step["seconds"] for step in steps if "torch==" in step["step"])
    llama = marks["finished"] - marks["started"] if {"started", "finished"} <= marks.keys() else 0
    phases = {"torch": torch, "llama-cpp-python build": llama, "rest": total - torch - llama}
    return {
        "steps": steps,
        "phases_s": {name: round(seconds, 1) for name, seconds in phases.items()},
        "total_s": round(total, 1),
    }


def ninja_targets(build_dir: Path) -> dict[str, Any]:
    """Compile and link jobs in ninja's log, summed per library (the last entry per output)."""
    log = build_dir / ".ninja_log"
    if not log.is_file():
        return {}
    jobs: dict[str, float] = {}
    for line in log.read_text().splitlines()[1:]:
        start, end, _, output, *_ = line.split("\t")
        jobs[output] = (int(end) - int(start)) / 1000
    per: dict[str, list[float]] = defaultdict(list)
    for output, seconds in jobs.items():
        found = TARGET_DIR.search(output)
        per[found.group(1) if found else "(link)"].append(seconds)
    summed = sum(jobs.values())
    rows = {
        name: {
            "jobs": len(times),
            "seconds": round(sum(times), 1),
            "share": round(sum(times) / summed, 3),
        }
        for name, times in sorted(per.items(), key=lambda item: -sum(item[1]))
    }
    return {"jobs": len(jobs), "job_seconds": round(summed, 1), "per_target": rows}


def cpu_backend_flags(build_dir: Path) -> list[str]:
    """The ``-m`` flags ggml-cpu's files were compiled with (``-march=native`` if native)."""
    path = build_dir / "compile_commands.json"
    if not path.is_file():
        return []
    flags: set[str] = set()
    for entry in json.loads(path.read_text()):
        if "ggml-cpu.dir" in entry["command"]:
            flags.update(re.findall(r"\s(-m[\w.=-]+)", entry["command"]))
    return sorted(flags)


IMPORT_SCRIPT = "import mirage.cli.run, harness.mirage.run, memory_server.index, runtime.backbones"


def import_seconds(venv: Path) -> list[float]:
    """Wall seconds of importing what ``mirage run`` loads, twice: the first pays for
    byte-compiling what pip did not (``--no-compile``), the second reads the cached files."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", IMPORT_SCRIPT],
            cwd=ROOT,
            check=True,
            env={**os.environ, "PYTHONPATH": ""},
        )
        times.append(round(time.perf_counter() - start, 1))
    return times


def doctor(venv: Path) -> list[str]:
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "mirage", "doctor"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    return [*result.stdout.splitlines(), f"exit {result.returncode}"]


class LoadSampler(threading.Thread):
    """The 1-minute load average every ``every`` seconds while the install runs."""

    def __init__(self, every: float = 10.0) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.samples: list[float] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        self.stopped.set()
        samples = self.samples or [os.getloadavg()[0]]
        return {"mean": round(sum(samples) / len(samples), 2), "max": round(max(samples), 2)}


MACHINE_SCRIPT = (
    "from runtime.backbones.doctor import CPUINFO, cpu_model; "
    "print(cpu_model(CPUINFO.read_text() if CPUINFO.is_file() else ''))"
)


def machine(venv: Path) -> dict[str, Any]:
    """The CPU model as ``mirage doctor`` reads it, asked of the new venv: this script itself
    runs on a bare Python, as on a fresh machine, before mirage's dependencies exist."""
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", MACHINE_SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    cpu = result.stdout.strip() if result.returncode == 0 else "unknown CPU (install failed)"
    return {"cpu": cpu, "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--command", default="run", help="run, dev, or a shell command")
    parser.add_argument("--label", default=None, help="key in install.json (default: --command)")
    parser.add_argument("--workdir", type=Path, default=None, help="kept when given")
    parser.add_argument("--no-doctor", action="store_true", help="skip mirage doctor")
    args = parser.parse_args()
    command = readme_command(args.command) if args.command in ("run", "dev") else args.command
    scratch = args.workdir or Path(tempfile.mkdtemp(prefix="mirage-install-"))
    scratch.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    sampler = LoadSampler()
    sampler.start()
    try:
        row: dict[str, Any] = {"command": command, **install(command, scratch)}
        row["load_average_1m_during"] = sampler.summary()
        row["load_average_before"] = [round(x, 2) for x in load_before]
        row["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        row["cpu_backend_flags"] = cpu_backend_flags(scratch / "llama-build")
        row["ninja"] = ninja_targets(scratch / "llama-build")
        row["import_s_first_then_cached"] = import_seconds(scratch / "venv")
        row["doctor"] = [] if args.no_doctor else doctor(scratch / "venv")
        row = {**machine(scratch / "venv"), **row}
    finally:
        if args.workdir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    report(args.label or args.command, row)


def report(label: str, row: dict[str, Any]) -> None:
    print(f"{label}: {row['command']}")
    print(
        f"  {row['cpu']}, {row['cpus']} CPUs; 1-min load during the install "
        f"{row['load_average_1m_during']}, before {row['load_average_before']}"
    )
    for name, seconds in row["phases_s"].items():
        print(f"  {name:<24} {seconds:7.1f} s")
    print(f"  {'total':<24} {row['total_s']:7.1f} s")
    for step in row["steps"]:
        print(f"  step {step['seconds']:7.1f} s wall {step['cpu_s']:7.1f} s CPU  {step['step']}")
    first, cached = row["import_s_first_then_cached"]
    print(f"  importing what mirage run loads: {first} s first, {cached} s cached")
    print(f"  ggml-cpu compiled with: {' '.join(row['cpu_backend_flags']) or '?'}")
    for name, target in row["ninja"].get("per_target", {}).items():
        print(
            f"  {name:<24} {target['jobs']:3d} jobs {target['seconds']:7.1f} s "
            f"{target['share']:6.1%}"
        )
    print("  " + "\n  ".join(row["doctor"]))
    earlier = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({**earlier, label: row}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
