"""Cached share per probe: the probes of one state (fresh restores of a deep checkpoint, C0 and
Cm) answered through litellm at the local caching provider (``tests/fakes/caching_provider``),
for a Claude model (explicit cache markers at the checkpoint's end) and an OpenAI-style model
(automatic caching of byte-identical prefixes). Per probe: cache reads / input tokens; the
first probe of the state writes (explicit) or primes (automatic) the cache.

Run: ``python benchmarks/bench_prompt_cache.py [--history-tokens N] [--questions N]``; writes
``results/prompt_cache.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).parent))

from _common import write_results
from bench_harness import trunk_config
from bench_runtime import build_session

from harness.kit.agents import BuiltinAgent
from harness.kit.results import ResultsLog, read_records
from harness.mirage.probing.loop import plan_probes, run_probes
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.scoring import Gold, KnownIdResolver, get_profile
from harness.mirage.trunk.checkpoints import write_checkpoint
from runtime.backbones import LiteLLMBackbone
from tests.fakes.caching_provider import CachingProvider

MODELS = {"explicit": "anthropic/claude-haiku-4-5", "automatic": "openai/fake-model"}


async def shares(
    model: str, base: str, folder: Path, questions: int, history_tokens: int
) -> list[dict[str, Any]]:
    checkpoint = write_checkpoint(
        folder / "cp",
        build_session(history_tokens),
        state="S1-d80k",
        trunk=trunk_config(),
        trunk_position=1,
        trunk_turns_total=1,
        workspace_version=None,
    )
    gold = Gold(answerable="NO", artifact="shard_map")  # the artifact the questions are about
    asked = [(f"q{n}", f"Which shard held batch {n}?", gold) for n in range(questions)]
    tasks = list(plan_probes({"S1-d80k": checkpoint}, asked, ["C0", "Cm"], 1))
    backbone = LiteLLMBackbone(model, api_base=base, api_key="k", max_output_tokens=64)
    agent = BuiltinAgent(backbone, memory_url=None, max_output_tokens=64)
    log = folder / f"{model.replace('/', '_')}.jsonl"
    with ResultsLog(log, ProbeRecord) as results:
        await run_probes(agent, tasks, results, KnownIdResolver([]), get_profile())
    return [
        {
            "condition": record.condition,
            "input": record.usage.input_tokens,
            "cached_read": record.usage.cached_tokens,
            "cache_write": record.usage.cache_write_tokens,
            "share": round((record.usage.cached_tokens or 0) / (record.usage.input_tokens or 1), 4),
        }
        for record in read_records(log, ProbeRecord)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history-tokens", type=int, default=20_000)
    parser.add_argument("--questions", type=int, default=10)
    args = parser.parse_args()
    data: dict[str, Any] = {"history_tokens": args.history_tokens}
    with tempfile.TemporaryDirectory() as tmp, CachingProvider() as provider:
        bases = {"explicit": provider.anthropic_base, "automatic": provider.openai_base}
        for mode, model in MODELS.items():
            folder = Path(tmp) / mode
            folder.mkdir()
            probes = asyncio.run(
                shares(model, bases[mode], folder, args.questions, args.history_tokens)
            )
            later = [probe["share"] for probe in probes[1:]]
            data[mode] = {
                "model": model,
                "probes": probes,
                "first_probe_share": probes[0]["share"],
                "later_probes_mean_share": round(statistics.fmean(later), 4),
                "later_probes_min_share": min(later),
            }
            print(
                f"{mode:<9} ({model}): {len(probes)} probes of one state; first probe share "
                f"{probes[0]['share']:.1%} (writes {probes[0]['cache_write']:,}), later probes "
                f"mean {statistics.fmean(later):.1%}, min {min(later):.1%}"
            )
    print("wrote", write_results("prompt_cache", data))


if __name__ == "__main__":
    main()
