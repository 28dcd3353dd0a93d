"""Backbone benchmarks: KV prefix reuse of the embedded model, and litellm retry timings.

    python benchmarks/bench_backbones.py [--prefix-tokens 500 2000 4000] [--probes 3]

Embedded: for each prefix size, one cold call on a fresh prefix, then probes that share the
prefix and differ in the last question (the "restore one checkpoint, many probes" pattern).
Litellm: against the local fault-injecting OpenAI server — a clean call, retry-then-success
after 429 + 503, a hang detected by the client timeout, and retries exhausted.
Prints a table and writes ``benchmarks/results/bench_backbones.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.fakes (the fault-injecting server)

from runtime.backbones import (  # noqa: E402
    EmbeddedBackbone,
    LiteLLMBackbone,
    ProviderError,
    RetryPolicy,
)
from runtime.messages import Message, SystemMessage, UserMessage  # noqa: E402
from tests.fakes.openai_server import (  # noqa: E402
    FakeOpenAIServer,
    hang,
    rate_limited,
    reply,
    server_error,
)

RESULTS = ROOT / "benchmarks" / "results" / "bench_backbones.json"
QUESTIONS = (
    "Which crate has the most marbles?",
    "How many marbles in K-37?",
    "Name one crate.",
    "Is any crate empty?",
    "Count the crates.",
)


def _prefix_messages(tag: str, target_tokens: int, question: str) -> list[Message]:
    # ~42 tokens per fact line for the SmolLM2 tokenizer
    lines = [
        f"Fact {tag}-{i}: the crate labelled K-{i * 37 % 1000} holds {i % 9 + 1} marbles."
        for i in range(max(1, target_tokens // 42))
    ]
    return [SystemMessage(content="Inventory:\n" + "\n".join(lines)), UserMessage.text(question)]


async def bench_embedded(sizes: list[int], probes: int) -> list[dict[str, Any]]:
    backbone = EmbeddedBackbone(max_output_tokens=8)
    started = time.perf_counter()
    backbone.load()
    load_s = time.perf_counter() - started
    rows = []
    for size in sizes:
        tag = f"s{size}-{time.time_ns()}"
        cold = await backbone.complete(_prefix_messages(tag, size, QUESTIONS[0]), [])
        warm = [
            await backbone.complete(_prefix_messages(tag, size, QUESTIONS[1 + i % 4]), [])
            for i in range(probes)
        ]
        rows.append(
            {
                "prefix_tokens": cold.usage.input_tokens,
                "cold_latency_s": round(cold.latency_s, 3),
                "cold_cached_tokens": cold.usage.cached_tokens,
                "reuse_latency_s_median": round(statistics.median(w.latency_s for w in warm), 3),
                "reuse_cached_tokens_min": min(w.usage.cached_tokens for w in warm),
                "speedup": round(cold.latency_s / statistics.median(w.latency_s for w in warm), 1),
                "model_load_s": round(load_s, 3),
                "n_threads": backbone.n_threads,
            }
        )
    return rows


async def _timed(backbone: LiteLLMBackbone) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        await backbone.complete([UserMessage.text("hi")], [])
        outcome = "ok"
    except ProviderError as error:
        outcome = f"{error.kind} after {error.attempts}"
    return time.perf_counter() - started, outcome


async def bench_retries() -> dict[str, Any]:
    policy = RetryPolicy(max_retries=3, base_delay_s=0.05, max_delay_s=0.4)
    results: dict[str, Any] = {"retry_policy": policy.model_dump()}
    with FakeOpenAIServer() as server:
        backbone = LiteLLMBackbone(
            "openai/fake", api_base=server.api_base, api_key="k", retry=policy, timeout_s=0.5
        )
        server.push(reply("warm-up"))
        await _timed(backbone)
        clean = []
        for _ in range(20):
            server.push(reply("ok"))
            clean.append((await _timed(backbone))[0])
        results["clean_call_p50_s"] = round(statistics.median(clean), 4)
        server.push(rate_limited(), server_error(503), reply("ok"))
        results["429_503_then_ok_s"] = round((await _timed(backbone))[0], 3)
        server.push(hang(30), reply("ok"))
        results["hang_then_ok_timeout_0.5s_s"] = round((await _timed(backbone))[0], 3)
        server.push(*(server_error(500) for _ in range(4)))
        elapsed, outcome = await _timed(backbone)
        results["4x500_exhausted_s"] = round(elapsed, 3)
        results["4x500_outcome"] = outcome
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix-tokens", type=int, nargs="+", default=[500, 2000, 4000])
    parser.add_argument("--probes", type=int, default=3)
    args = parser.parse_args()
    embedded = asyncio.run(bench_embedded(args.prefix_tokens, args.probes))
    retries = asyncio.run(bench_retries())
    print("embedded SmolLM2-135M, KV prefix reuse (8 output tokens):")
    for row in embedded:
        print(
            f"  prefix {row['prefix_tokens']:>5} tok: cold {row['cold_latency_s']:.3f} s, "
            f"reused {row['reuse_latency_s_median']:.3f} s "
            f"(cached {row['reuse_cached_tokens_min']}), x{row['speedup']}"
        )
    print("litellm retries against the fault-injecting server:")
    for key, value in retries.items():
        print(f"  {key}: {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "load_average_1m_at_end": round(os.getloadavg()[0], 2)}
    payload = {"machine": machine, "embedded": embedded, "retries": retries}
    RESULTS.write_text(json.dumps(payload, indent=2))
    print(f"machine: {machine}")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
