"""The paper's scale against an endpoint of known speed: does the harness vanish behind it?

Starts a loopback OpenAI-compatible endpoint (this file with ``--serve``: aiohttp, in its own
process) that answers every chat completion after exactly ``--latency`` seconds with a
protocol reply, then runs the paper profile (``--profile paper``: 200 questions x 4 states x 2
conditions = 1,600 probes; a scripted trunk to 80k+ tokens and the reference summarizer
``reference/keep-charts``) against it as ``openai/fake`` at each ``--concurrency``. The trunk
and workspace are built once and copied into each concurrency's run folder, so each run is its
probe phase.

Per state it prints the probe phase's wall time against the latency floor (probes x latency /
concurrency) and their ratio; for the whole probe phase the harness's CPU per probe (this
process and its descendants, the endpoint left out), the endpoint's own CPU (if it nears a core,
the endpoint is the limit, not the harness), peak RSS, and the load before the run. Writes
``results/paper_scale.json`` (or ``results/<name>.json``).

    python benchmarks/bench_paper_scale.py [--latency 0.5] [--concurrency 16 64] [--limit 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import write_results

TICKS = os.sysconf("SC_CLK_TCK")
REPLY = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"


# -- the endpoint ------------------------------------------------------------------------------


def serve(latency_s: float) -> None:
    """The fixed-latency endpoint (runs in its own process); prints its port, then serves."""
    from aiohttp import web

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(latency_s)
        prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
        return web.json_response(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": REPLY},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 12, "total_tokens": prompt},
            }
        )

    async def main() -> None:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/chat/completions", completions)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def _process_cpu(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _descendant_cpu(leave_out: int) -> float:
    """CPU seconds of this process's live descendants but ``leave_out``, plus reaped ones."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
                cpu[int(entry.name)] = _process_cpu(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    me, total = os.getpid(), 0.0
    for pid, seconds in cpu.items():
        ancestor = parents.get(pid)
        while ancestor and ancestor != me:
            ancestor = parents.get(ancestor)
        if ancestor == me and pid != leave_out:
            total += seconds
    reaped = os.times()
    return total + reaped.children_user + reaped.children_system


# -- the run -----------------------------------------------------------------------------------


@dataclass
class StateClock:
    """A display for ``RunProgress`` that notes when each probe bar starts and fills, and the
    harness's CPU seconds (``cpu()``) then."""

    cpu: Callable[[], float]
    started: dict[str, tuple[float, float]] = field(default_factory=dict)
    done: dict[str, tuple[float, float]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)

    def add_task(self, description: str, total: int) -> str:
        self.started[description] = (time.perf_counter(), self.cpu())
        self.totals[description] = total
        self._counts[description] = 0
        return description

    def advance(self, task: str) -> None:
        self._counts[task] += 1
        if self._counts[task] == self.totals[task]:
            self.done[task] = (time.perf_counter(), self.cpu())

    def update(self, task: str, **_: Any) -> None:
        return None


def _config(out: Path, api_base: str, concurrency: int, limit: int | None) -> Any:
    from harness.mirage.config import RunConfig

    return RunConfig(
        profile="paper",
        trunk_model="scripted",
        summarizer_model="reference/keep-charts",
        models=["openai/fake"],
        api_base=api_base,
        references=False,
        limit=limit,
        concurrency=concurrency,
        out=out,
    )


async def _run(config: Any, clock: StateClock) -> None:
    from harness.mirage.run import MirageRun

    await MirageRun(config, progress=clock).execute()


def _measure(config: Any, endpoint: int, latency_s: float) -> dict[str, Any]:
    clock = StateClock(cpu=lambda: time.process_time() + _descendant_cpu(endpoint))
    load = os.getloadavg()
    endpoint_before = _process_cpu(endpoint)
    started = time.perf_counter()
    asyncio.run(_run(config, clock))
    wall = time.perf_counter() - started
    states = []
    for task, total in clock.totals.items():
        if "·" not in task or task not in clock.done:
            continue
        (wall_start, cpu_start), (wall_done, cpu_done) = clock.started[task], clock.done[task]
        floor = total * latency_s / config.concurrency
        states.append(
            {
                "state": task.split("·", 1)[1].strip(),
                "probes": total,
                "wall_s": round(wall_done - wall_start, 2),
                "floor_s": round(floor, 2),
                "ratio": round((wall_done - wall_start) / floor, 2),
                "harness_cpu_ms_per_probe": round(1000 * (cpu_done - cpu_start) / total, 2),
            }
        )
    probes = sum(s["probes"] for s in states)
    probe_wall = sum(s["wall_s"] for s in states)
    probe_cpu = sum(s["harness_cpu_ms_per_probe"] * s["probes"] for s in states) / 1000
    floor = probes * latency_s / config.concurrency
    endpoint_cpu = _process_cpu(endpoint) - endpoint_before
    return {
        "concurrency": config.concurrency,
        "load_before": [round(x, 2) for x in load],
        "probes": probes,
        "probe_phase_s": round(probe_wall, 2),
        "floor_s": round(floor, 2),
        "ratio": round(probe_wall / floor, 2) if floor else None,
        "run_wall_s": round(wall, 2),
        "harness_cpu_ms_per_probe": round(1000 * probe_cpu / probes, 2) if probes else None,
        "endpoint_cpu_s": round(endpoint_cpu, 2),
        "endpoint_cpu_share_of_run": round(endpoint_cpu / wall, 3) if wall else None,
        "states": states,
    }


def _prepare(base: Path, api_base: str, limit: int | None) -> None:
    """Workspace, index and the paper trunk, built once (a run with no answerer left to ask:
    every probe it plans is then run by the measured runs)."""
    from harness.mirage.run import MirageRun

    config = _config(base, api_base, 1, limit)
    run = MirageRun(config)

    async def build() -> None:
        index = run.prepare_workspace()
        try:
            await run.family.checkpoints(index)
        finally:
            index.close()

    started = time.perf_counter()
    asyncio.run(build())
    print(f"workspace + trunk built in {time.perf_counter() - started:.0f} s")


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--limit", type=int, default=0, help="questions (0: all 200)")
    parser.add_argument("--name", default="paper_scale")
    parser.add_argument(
        "--base", type=Path, help="keep the built workspace and trunk here and reuse them"
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return
    limit = args.limit or None
    endpoint = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--latency", str(args.latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert endpoint.stdout is not None
        api_base = f"http://127.0.0.1:{endpoint.stdout.readline().strip()}/v1"
        os.environ.setdefault("OPENAI_API_KEY", "bench")
        with tempfile.TemporaryDirectory(prefix="paper-scale-") as scratch:
            base = args.base or Path(scratch) / "base"
            if not (base / "checkpoints").is_dir():
                _prepare(base, api_base, limit)
            runs = []
            for concurrency in args.concurrency:
                out = Path(scratch) / f"c{concurrency}"
                out.mkdir()
                for part in ("workspace", "checkpoints"):
                    shutil.copytree(base / part, out / part)
                result = _measure(
                    _config(out, api_base, concurrency, limit), endpoint.pid, args.latency
                )
                runs.append(result)
                print(json.dumps({k: v for k, v in result.items() if k != "states"}))
                for state in result["states"]:
                    print(
                        f"  {state['state']:<10} {state['probes']:>5} probes  "
                        f"{state['wall_s']:>7.1f} s  floor {state['floor_s']:>6.1f} s  "
                        f"x{state['ratio']:.2f}  {state['harness_cpu_ms_per_probe']:.1f} ms CPU"
                    )
    finally:
        endpoint.terminate()
        endpoint.wait(timeout=10)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    path = write_results(
        args.name,
        {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "latency_s": args.latency,
            "limit": limit,
            "peak_rss_mb": round(peak_rss_mb, 1),
            "runs": runs,
        },
    )
    print(f"peak RSS {peak_rss_mb:.0f} MB; wrote {path}")


if __name__ == "__main__":
    main()
