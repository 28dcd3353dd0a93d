"""Per-probe overhead of ``mirage run --agent openclaw``: restore (a session fork over the
gateway's RPC) + one gateway turn, against a gateway restart per probe. The answering model is
a zero-latency function, so the numbers are OpenClaw's and the harness's own cost; the memory
server is the real one. Needs the installed OpenClaw (``mirage agents install openclaw``).

``--embedded``: instead, the per-probe turn on the embedded SmolLM2, with and without the model
endpoint's rewrite of the probe fork's ``Runtime:`` line to the trunk session's
(``endpoint.TrunkRuntimeLine``): a trunk of scripted filler turns, one checkpoint fork, then
the same probe on fresh forks, first with the rewrite off, then on. Per probe: the gateway turn,
the model's own time, the prompt tokens (EIT) and how many of them came from llama.cpp's
prefix cache.

Run: ``python benchmarks/bench_openclaw.py [--probes N] [--embedded [--fillers N]]``; writes
benchmarks/results/openclaw.json (openclaw_embedded.json with ``--embedded``). Quote the load
average it prints with the numbers.
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

from harness.kit.agents.openclaw.agent import OpenClawAgent
from harness.kit.agents.openclaw.config import ANSWER_MODEL
from harness.kit.agents.openclaw.gateway import free_port
from harness.kit.agents.openclaw.harness import OpenClawHarness
from harness.kit.agents.openclaw.install import require_install
from harness.mirage.trunk.runner import SCRIPTED_ACKNOWLEDGEMENT
from harness.mirage.trunk.states import PAPER_WINDOW
from runtime.backbones import Backbone, FunctionBackbone, make_backbone

WINDOW = 16_384
FILLER = (
    "Filler turn {index}. Notes from my week, nothing to act on: the tram to the office was "
    "late again, the bakery on the corner now opens at seven, my sister called about the "
    "family dinner on Sunday, and I finished the second book of the trilogy. The weather "
    "stayed grey and I went running twice along the canal, about five kilometres each time. "
) * 3
QUESTION = "Which bakery opening time did I mention? Answer in one short sentence."


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


def harness(root: Path, answer: Backbone, memory_port: int) -> OpenClawHarness:
    claw = OpenClawHarness(
        require_install(),
        root / "openclaw",
        answer,
        window=WINDOW,
        budget_window=PAPER_WINDOW,
        answer_max_tokens=64,
        memory_url=f"http://127.0.0.1:{memory_port}/mcp",
    )
    claw.endpoint.trunk.reply = SCRIPTED_ACKNOWLEDGEMENT  # the bench's trunk turns are filler
    return claw


async def measure(root: Path, probes: int) -> dict[str, Any]:
    answer = FunctionBackbone(lambda messages: "ok", model="zero-latency", context_window=WINDOW)
    port = free_port()
    server = memory_server(root / "memory-ws", port, root / "memory.log")
    try:
        claw = harness(root, answer, port)
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


async def probe_turns(claw: OpenClawHarness, label: str, probes: int) -> list[dict[str, Any]]:
    """``probes`` forks of ``ckpt-bench``, each asked ``QUESTION``: turn time and what the
    answering model reported for the probe's requests."""
    rows = []
    for index in range(probes):
        session = f"p-{label}-{index}"
        await claw.fork("ckpt-bench", session)
        mark = claw.endpoint.requests.mark()
        turn_s = await timed(claw.chat.turn(session, QUESTION, model=ANSWER_MODEL))
        requests = claw.endpoint.requests.since(mark, ANSWER_MODEL)
        rows.append(
            {
                "turn_s": round(turn_s, 2),
                "model_s": round(sum(r.latency_s for r in requests), 2),
                "requests": len(requests),
                "eit": requests[0].eit if requests else None,
                "cached_tokens": requests[0].cached_tokens if requests else None,
                "rewritten": bool(requests and requests[0].rewrite),
            }
        )
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The 2nd..nth probe (the first of a series fills the cache for the rest)."""
    later = rows[1:] or rows
    return {
        "turn_s_median": round(statistics.median(r["turn_s"] for r in later), 2),
        "model_s_median": round(statistics.median(r["model_s"] for r in later), 2),
        "cached_share_median": round(
            statistics.median((r["cached_tokens"] or 0) / (r["eit"] or 1) for r in later), 3
        ),
    }


async def measure_embedded(root: Path, probes: int, fillers: int) -> dict[str, Any]:
    answer = make_backbone(context_window=WINDOW, max_output_tokens=64)
    answer.load()
    port = free_port()
    server = memory_server(root / "memory-ws", port, root / "memory.log")
    try:
        async with harness(root, answer, port) as claw:
            for index in range(fillers):
                await claw.chat.turn("trunk", FILLER.format(index=index))
            await claw.settle("trunk")
            await claw.fork("trunk", "ckpt-bench")
            without = await probe_turns(claw, "plain", probes)
            OpenClawAgent(claw, "bench").use_trunk_runtime_line()
            with_rewrite = await probe_turns(claw, "rewritten", probes)
    finally:
        server.terminate()
        server.wait(30)
    return {
        "model": answer.model,
        "fillers": fillers,
        "without_rewrite": without,
        "with_rewrite": with_rewrite,
        "without_rewrite_later_probes": summary(without),
        "with_rewrite_later_probes": summary(with_rewrite),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument(
        "--embedded", action="store_true", help="probe turns on SmolLM2, with/without rewrite"
    )
    parser.add_argument("--fillers", type=int, default=10, help="trunk turns (--embedded)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mirage-bench-openclaw-") as folder:
        if args.embedded:
            data = asyncio.run(measure_embedded(Path(folder), args.probes, args.fillers))
        else:
            data = asyncio.run(measure(Path(folder), args.probes))
    data["load_average_before"] = [round(x, 2) for x in load_before]
    data["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    for key, value in data.items():
        print(f"{key}: {value}")
    name = "openclaw_embedded" if args.embedded else "openclaw"
    print(f"wrote {write_results(name, data)}")


if __name__ == "__main__":
    main()
