"""Per-probe overhead of ``mirage run --agent openclaw``: restore (a session fork over the
gateway's RPC) + one gateway turn, against a gateway restart per probe. The answering model is
a zero-latency function, so the numbers are OpenClaw's and the harness's own cost; the memory
server is the real one. Needs the installed OpenClaw (``mirage agents install openclaw``).

Run: ``python benchmarks/bench_openclaw.py [--probes N]``; writes
benchmarks/results/openclaw.json. Quote the load average it prints with the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from _common import write_results

from harness.agents.openclaw.config import ANSWER_MODEL
from harness.agents.openclaw.gateway import free_port
from harness.agents.openclaw.harness import OpenClawHarness
from harness.agents.openclaw.run import require_install
from runtime.backbones import FunctionBackbone

WINDOW = 16_384


def memory_server(workspace: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "note.txt").write_text("The median rent in Berlin in 2023 was 2110 EUR.\n")
    argv = [sys.executable, "-m", "mirage", "memory", "serve", "-w", str(workspace)]
    argv += ["--http", f"127.0.0.1:{port}"]
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)


async def timed(awaitable: Any) -> float:
    started = time.perf_counter()
    await awaitable
    return time.perf_counter() - started


async def measure(root: Path, probes: int) -> dict[str, Any]:
    answer = FunctionBackbone(lambda messages: "ok", model="zero-latency", context_window=WINDOW)
    port = free_port()
    server = memory_server(root / "memory-ws", port, root / "memory.log")
    try:
        claw = OpenClawHarness(
            require_install(),
            root / "openclaw",
            answer,
            window=WINDOW,
            answer_max_tokens=64,
            memory_url=f"http://127.0.0.1:{port}/mcp",
        )
        started = time.perf_counter()
        async with claw:
            start_s = time.perf_counter() - started
            first_turn_s = await timed(claw.chat.turn("trunk", "Hello, I am planning a move."))
            steady = [await timed(claw.chat.turn("trunk", f"Filler turn {i}.")) for i in range(3)]
            await claw.settle("trunk")
            await claw.fork("trunk", "ckpt-bench")
            forks, turns = [], []
            for i in range(probes):
                forks.append(await timed(claw.fork("ckpt-bench", f"p-bench-{i}")))
                turn = claw.chat.turn(f"p-bench-{i}", "What did I say?", model=ANSWER_MODEL)
                turns.append(await timed(turn))
            stop_started = time.perf_counter()
            claw.gateway.stop()
            stop_s = time.perf_counter() - stop_started
            restart_s = await claw.gateway.start()
            await claw.rpc.aclose()
            await claw.fork("ckpt-bench", "p-after-restart")
            restart_turn_s = await timed(
                claw.chat.turn("p-after-restart", "What did I say?", model=ANSWER_MODEL)
            )
    finally:
        server.terminate()
        server.wait(30)
    per_probe = [f + t for f, t in zip(forks, turns, strict=True)]
    restart_total = stop_s + restart_s + restart_turn_s
    return {
        "gateway_start_s": round(start_s, 2),
        "first_turn_after_start_s": round(first_turn_s, 2),
        "steady_turn_s": [round(s, 2) for s in steady],
        "fork_s": [round(s, 3) for s in forks],
        "probe_turn_s": [round(s, 2) for s in turns],
        "per_probe_overhead_s_median": round(statistics.median(per_probe), 2),
        "restart_per_probe_s": round(restart_total, 2),
        "restart_parts_s": {
            "stop": round(stop_s, 2),
            "start": round(restart_s, 2),
            "first_turn": round(restart_turn_s, 2),
        },
        "speedup_vs_restart": round(restart_total / statistics.median(per_probe), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mirage-bench-openclaw-") as folder:
        data = asyncio.run(measure(Path(folder), args.probes))
    data["load_average_before"] = [round(x, 2) for x in load_before]
    data["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    for key, value in data.items():
        print(f"{key}: {value}")
    print(f"wrote {write_results('openclaw', data)}")


if __name__ == "__main__":
    main()
