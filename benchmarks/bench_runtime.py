"""Runtime benchmarks: snapshot restore time and per-turn agent-loop overhead at 1k/10k/100k
tokens of history (zero-latency backbone, no tools). Run: ``python benchmarks/bench_runtime.py``."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import time_calls, write_results

from runtime.agent import Agent
from runtime.backbones.base import Backbone, Completion
from runtime.messages import AssistantMessage, Message, ToolSpec, Usage, UserMessage
from runtime.profiles import resolve_profile
from runtime.session import AgentConfig, Session
from runtime.snapshot import SnapshotCache, load_snapshot, save_snapshot

PARAGRAPH = (
    "Please refactor the data loader so that it streams shards lazily, keeps the shuffle "
    "buffer bounded, and reports throughput every thousand batches to the metrics sink. "
)


def build_session(tokens: int) -> Session:
    session = Session.new(AgentConfig(), context_window=max(8192, tokens * 2))
    while session.history_tokens < tokens:
        session.append(UserMessage.text(PARAGRAPH * 4))
        session.append(AssistantMessage(content="Done. " + PARAGRAPH * 3))
    return session


class InstantBackbone(Backbone):
    """Zero-latency backbone that does no per-call work, so only the loop is measured."""

    model = "instant"
    context_window = 1_000_000
    tool_mode = "text"
    profile = resolve_profile("instant")

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        usage = Usage(input_tokens=len(messages), output_tokens=1)
        return Completion(text="ok", usage=usage, model=self.model)


def bench_restore(session: Session, folder: Path) -> dict[str, object]:
    started = time.perf_counter()
    path = save_snapshot(session, folder)
    save_ms = (time.perf_counter() - started) * 1000
    cache = SnapshotCache()
    cache.restore(path)
    return {
        "snapshot_bytes": path.stat().st_size,
        "save_ms": round(save_ms, 3),
        "restore_from_file": time_calls(lambda: load_snapshot(path), 20),
        "restore_from_cache": time_calls(lambda: cache.restore(path), 50),
    }


def bench_turn(session: Session) -> dict[str, float]:
    samples = []
    for _ in range(20):
        agent = Agent(session.model_copy(deep=True), InstantBackbone())
        started = time.perf_counter()
        asyncio.run(agent.turn("One more question about the loader?"))
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {"p50_ms": round(samples[len(samples) // 2], 3), "max_ms": round(samples[-1], 3)}


def main() -> None:
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for tokens in (1_000, 10_000, 100_000):
            session = build_session(tokens)
            entry = {"history_tokens": session.history_tokens, "messages": len(session.messages)}
            entry |= bench_restore(session, Path(tmp))
            entry["turn_overhead"] = bench_turn(session)
            results[f"{tokens // 1000}k"] = entry
            print(
                f"{tokens:>7} tokens: restore p50 {entry['restore_from_cache']['p50_ms']} ms "
                f"(cached), {entry['restore_from_file']['p50_ms']} ms (file); "
                f"turn overhead p50 {entry['turn_overhead']['p50_ms']} ms"
            )
    print("wrote", write_results("runtime", {"sizes": results}))


if __name__ == "__main__":
    main()
