"""Harness overhead per probe at a 100k-token checkpoint: restore + prompt + memory-server tools
+ parse + score + durable record, with a zero-latency backbone.

Three ways: no tools; the memory server's tools on a pooled connection (what ``mirage run``
does: the probe's tag rides on a header); a fresh MCP connection per probe (the tagged URL, as
before pooling). Prints the pooled/no-tools ratio against the 2x target.

Run: ``python benchmarks/bench_harness.py [--probes N]``; writes ``results/harness.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import write_results
from bench_runtime import build_session

from harness.kit.agents import BuiltinAgent
from harness.kit.results import ResultsLog
from harness.mirage.probing.loop import plan_probes, run_probes
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.scoring import Gold, KnownIdResolver, get_profile
from harness.mirage.trunk.checkpoints import TrunkConfig, write_checkpoint
from runtime.agent import Agent, TurnRecord
from runtime.backbones.base import Backbone, Completion
from runtime.mcp_client import MCPServerConfig, MCPToolset
from runtime.messages import Message, ToolSpec, Usage
from runtime.profiles import resolve_profile
from runtime.session import Session

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


class FreshConnectionAgent(BuiltinAgent):
    """The built-in agent opening a new MCP connection at the probe's tagged URL per probe."""

    async def _turn(self, session: Session, message: str, tag: str) -> TurnRecord:
        assert self.memory_url is not None
        server = MCPServerConfig(name="memory", url=self.memory_url(tag))
        async with MCPToolset([server]) as tools:
            return await Agent(session, self.backbone, tools).turn(message, purpose="probe")


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


async def bench(
    probes: int, folder: Path, memory_url: object, agent_class: type[BuiltinAgent] = BuiltinAgent
) -> dict[str, float]:
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
    agent = agent_class(InstantBackbone(), memory_url=memory_url)  # type: ignore[arg-type]
    samples: list[float] = []
    last = time.perf_counter()

    def tick(_record: object) -> None:
        nonlocal last
        now = time.perf_counter()
        samples.append((now - last) * 1000)
        last = now

    name = f"results-{agent_class.__name__}-{memory_url is not None}.jsonl"
    with ResultsLog(folder / name, ProbeRecord) as results:
        resolver = KnownIdResolver(["chart_00000001"])
        try:
            await run_probes(agent, tasks, results, resolver, get_profile(), on_done=tick)
        finally:
            await agent.aclose()
    samples = samples[1:]  # the first probe pays for imports and the first connection
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
        http, url = with_memory_server(folder)
        try:
            pooled = asyncio.run(bench(args.probes, folder, url))
            fresh = asyncio.run(bench(args.probes, folder, url, FreshConnectionAgent))
        finally:
            http.stop()  # type: ignore[attr-defined]
    ratio = round(pooled["p50_ms"] / plain["p50_ms"], 2)
    load = [round(value, 2) for value in os.getloadavg()]
    for label, numbers in (
        ("no tools", plain),
        ("tools, pooled connection", pooled),
        ("tools, connection per probe", fresh),
    ):
        print(f"{label:<28} p50 {numbers['p50_ms']:>7} ms, p95 {numbers['p95_ms']:>7} ms per probe")
    verdict = "within" if ratio <= 2.0 else "ABOVE"
    print(f"pooled / no tools: {ratio}x ({verdict} the 2x target); load {load}")
    data = {
        "no_tools": plain,
        "mcp_pooled": pooled,
        "mcp_per_probe": fresh,
        "pooled_over_no_tools": ratio,
        "target": 2.0,
        "load_average": load,
    }
    print("wrote", write_results("harness", data))


if __name__ == "__main__":
    main()
