"""Compaction overhead without model time: split + render + chunking + replace, on histories
of 10k / 50k / 100k tokens (2,000-token tail), with an instant summarizer of a large (128k)
and a small (8k) window. Prints a table and writes benchmarks/results/compaction.json.

    python benchmarks/bench_compaction.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

from compaction.compactor import compact
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from runtime.session import AgentConfig, Session
from runtime.tokens import count_message_tokens

RESULTS = Path(__file__).parent / "results" / "compaction.json"
SIZES = (10_000, 50_000, 100_000)
WINDOWS = (128_000, 8_192)
REPEATS = 3
KEEP_RECENT_TOKENS = 2_000


def history(tokens: int) -> list[Message]:
    messages: list[Message] = []
    turn = 0
    total = 0
    while total < tokens:
        text = " ".join(f"token{turn}_{i % 50}" for i in range(120))
        messages.append(UserMessage.text(text))
        call = ToolCall(id=f"c{turn}", name="artifact_get", arguments={"path": f"f{turn}.csv"})
        messages.append(AssistantMessage(content="checking", tool_calls=(call,)))
        messages.append(ToolResultMessage(tool_call_id=call.id, name=call.name, content=text))
        messages.append(AssistantMessage(content=text))
        total += sum(count_message_tokens(message) for message in messages[-4:])
        turn += 1
    return messages


def session_for(messages: list[Message]) -> Session:
    session = Session.new(AgentConfig(), context_window=128_000)
    for message in messages:
        session.append(message)
    return session


async def measure(tokens: int, window: int) -> dict[str, object]:
    messages = history(tokens)
    timings: list[float] = []
    calls = 0
    history_tokens = 0
    for _ in range(REPEATS):
        session = session_for(messages)
        history_tokens = session.history_tokens
        summarizer = FunctionBackbone(lambda _: "summary", context_window=window)
        started = time.perf_counter()
        await compact(
            session,
            "verbatim",
            summarizer,
            keep_recent_tokens=KEEP_RECENT_TOKENS,
        )
        timings.append(time.perf_counter() - started)
        calls = len(summarizer.calls)
    return {
        "history_tokens": history_tokens,
        "summarizer_window": window,
        "summary_calls": calls,
        "median_s": round(statistics.median(timings), 4),
    }


async def main() -> None:
    rows = [await measure(tokens, window) for tokens in SIZES for window in WINDOWS]
    print(f"{'history':>8} {'window':>7} {'calls':>5} {'median s':>9}")
    for row in rows:
        print(
            f"{row['history_tokens']:>8} {row['summarizer_window']:>7} "
            f"{row['summary_calls']:>5} {row['median_s']:>9}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "compaction", "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
