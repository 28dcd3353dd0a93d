"""Harness overhead per probe at a 100k-token checkpoint: restore + prompt + (MCP connect) +
parse + score + durable record, with a zero-latency backbone.

Run: ``python benchmarks/bench_harness.py [--probes N]``; writes ``results/harness.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import write_results
from bench_runtime import build_session

from harness.agents import BuiltinAgent
from harness.checkpoints import TrunkConfig, write_checkpoint
from harness.probes import plan_probes, run_probes
from harness.records import ResultsLog
from harness.scoring import Gold, KnownIdResolver, get_profile
from runtime.backbones.base import Backbone, Completion
from runtime.messages import Message, ToolSpec, Usage
from runtime.profiles import resolve_profile

REPLY = "ANSWERABLE=YES\nSOURCE=chart_00000001\nANSWER=1,240"


class InstantBackbone(Backbone):
    model = "instant"
    context_window = 1_000_000
    tool_mode = "text"
    profile = resolve_profile("instant")

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        return Completion(
            text=REPLY, usage=Usage(input_tokens=1, output_tokens=1), model=self.model
        )


def trunk_config() -> TrunkConfig:
    return TrunkConfig(
        pack="bench",
        pack_digest="0",
        seed=0,
        trunk_model="bench",
        profile="paper",
        window=120_000,
        states=(("S1-d80k", "depth", 80_000, 1),),
        summary_format="verbatim",
        summarizer_model="bench",
        memory_flush=False,
        max_output_tokens=64,
    )


async def bench(probes: int, folder: Path, memory_url: object) -> dict[str, float]:
    session = build_session(100_000)
    checkpoint = write_checkpoint(
        folder / "cp",
        session,
        state="S1-d80k",
        trunk=trunk_config(),
        trunk_position=1,
        trunk_turns_total=1,
        workspace_version=None,
    )
    gold = Gold(answerable="YES", source="chart_00000001", answer="1240", answer_type="numeric")
    questions = [(f"q{i}", f"What was the rent in year {i}?", gold) for i in range(probes)]
    tasks = list(plan_probes({"S1-d80k": checkpoint}, questions, ["C0"], 1))
    agent = BuiltinAgent(InstantBackbone(), memory_url=memory_url)  # type: ignore[arg-type]
    samples: list[float] = []
    last = time.perf_counter()

    def tick(_record: object) -> None:
        nonlocal last
        now = time.perf_counter()
        samples.append((now - last) * 1000)
        last = now

    with ResultsLog(folder / f"results-{memory_url is not None}.jsonl") as results:
        resolver = KnownIdResolver(["chart_00000001"])
        await run_probes(agent, tasks, results, resolver, get_profile(), on_done=tick)
    samples.sort()
    return {
        "history_tokens": session.history_tokens,
        "probes": probes,
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2),
    }


def with_memory_server(folder: Path) -> tuple[object, object]:
    from memory_server.http import HttpServerThread
    from memory_server.server import build_server

    workspace = folder / "workspace"
    workspace.mkdir()
    (workspace / "rent.md").write_text("# Rent\nThe median rent in 2019 was 1,240 EUR.\n")
    http = HttpServerThread(build_server(workspace, transport="streamable-http")).start()
    return http, http.tagged_url


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain = asyncio.run(bench(args.probes, folder, None))
        print(f"no tools:          p50 {plain['p50_ms']} ms, p95 {plain['p95_ms']} ms per probe")
        http, url = with_memory_server(folder)
        try:
            mcp = asyncio.run(bench(args.probes, folder, url))
        finally:
            http.stop()  # type: ignore[attr-defined]
        print(f"with MCP connect:  p50 {mcp['p50_ms']} ms, p95 {mcp['p95_ms']} ms per probe")
    print("wrote", write_results("harness", {"no_tools": plain, "mcp_per_probe": mcp}))


if __name__ == "__main__":
    main()
