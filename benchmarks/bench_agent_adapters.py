"""Per-probe overhead of the adapters for agents we did not write, with zero-latency agents:
checkpoint restore → transcript, the HTTP round trip (OpenAI adapter) or process spawn (command
adapter), and call-log attribution, at 1k/10k/100k-token checkpoints.

Run: ``python benchmarks/bench_agent_adapters.py``; writes benchmarks/results/agent_adapters.json.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from _common import write_results

from harness.kit.agents.command import CommandAgent
from harness.kit.agents.openai_endpoint import OpenAIEndpointAgent
from harness.kit.agents.transcript import TranscriptSource
from harness.kit.attribution import AttributedAgent
from harness.mirage.trunk.checkpoints import Checkpoint, write_checkpoint
from runtime.messages import AssistantMessage, UserMessage
from runtime.session import AgentConfig, Session
from tests.harness.agents_support import TRUNK, AgentServer, chat_app, completion

PARAGRAPH = (
    "Please refactor the data loader so that it streams shards lazily, keeps the shuffle "
    "buffer bounded, and reports throughput every thousand batches to the metrics sink. "
)
REPLY = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
SHELL_AGENT = '#!/bin/sh\ncat > /dev/null\necho \'{"reply": "ANSWERABLE=NO"}\'\n'


def checkpoint_of(tokens: int, root: Path) -> Checkpoint:
    session = Session.new(AgentConfig(), context_window=max(8192, tokens * 2))
    while session.history_tokens < tokens:
        session.append(UserMessage.text(PARAGRAPH * 4))
        session.append(AssistantMessage(content="Done. " + PARAGRAPH * 3))
    return write_checkpoint(
        root / str(tokens),
        session,
        state="S1-d0",
        trunk=TRUNK,
        trunk_position=1,
        trunk_turns_total=1,
        workspace_version=None,
    )


async def timed(probe: Callable[[str], Awaitable[Any]], repeats: int) -> dict[str, float]:
    samples = []
    for index in range(repeats):
        started = time.perf_counter()
        reply = await probe(f"bench.C0.q{index}.r0")
        samples.append((time.perf_counter() - started) * 1000)
        assert getattr(reply, "error", None) is None, reply
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[min(len(samples) - 1, int(0.95 * len(samples)))], 3),
        "n": repeats,
    }


async def measure(checkpoint: Checkpoint, base_url: str, shell: Path, repeats: int) -> dict:
    source = TranscriptSource()
    source.restore(checkpoint)  # verify the snapshot once, as a run does
    restore = await timed(lambda tag: _restore(source, checkpoint), repeats)
    calls = checkpoint.directory / "calls.jsonl"
    openai = AttributedAgent(OpenAIEndpointAgent(base_url), calls)
    openai.bind_memory(lambda tag: f"http://127.0.0.1:9/t/{tag}/mcp")
    endpoint = await timed(lambda tag: openai.probe(checkpoint, "Question: x", tag=tag), repeats)
    await openai.aclose()
    command = AttributedAgent(CommandAgent([str(shell)]), calls)
    spawn = await timed(lambda tag: command.probe(checkpoint, "Question: x", tag=tag), repeats)
    return {"transcript_restore": restore, "openai_probe": endpoint, "command_probe": spawn}


async def _restore(source: TranscriptSource, checkpoint: Checkpoint) -> object:
    return source.restore(checkpoint)


async def main() -> None:
    results: dict[str, Any] = {"load_average_before": os.getloadavg()}
    with (
        tempfile.TemporaryDirectory() as tmp,
        AgentServer(chat_app(_instant)) as server,
    ):
        shell = Path(tmp) / "agent.sh"
        shell.write_text(SHELL_AGENT)
        shell.chmod(0o755)
        for tokens, repeats in ((1_000, 30), (10_000, 20), (100_000, 8)):
            checkpoint = checkpoint_of(tokens, Path(tmp))
            results[f"{tokens // 1000}k"] = await measure(
                checkpoint, server.base_url, shell, repeats
            )
            print(f"{tokens // 1000}k tokens: {results[f'{tokens // 1000}k']}")
    results["load_average_after"] = os.getloadavg()
    print(f"wrote {write_results('agent_adapters', results)}")


async def _instant(request: Any) -> Any:
    await request.body()
    return completion(REPLY)


if __name__ == "__main__":
    asyncio.run(main())
