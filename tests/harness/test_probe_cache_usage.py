"""Probe records carry the provider's cache reads and writes: probes of one state on fresh
restores of its checkpoint, answered through litellm at a local caching provider — Claude
(explicit markers) and an OpenAI-style model (automatic caching: byte-identical prefixes)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.kit.agents import BuiltinAgent
from harness.kit.results import ResultsLog, read_records
from harness.mirage.probing.loop import ProbeTask, plan_probes, run_probes
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.scoring import Gold, KnownIdResolver, get_profile
from harness.mirage.trunk.checkpoints import write_checkpoint
from runtime.backbones import LiteLLMBackbone
from runtime.messages import AssistantMessage, UserMessage
from runtime.session import AgentConfig, Session
from tests.fakes.caching_provider import CachingProvider
from tests.harness.agents_support import TRUNK

FILLER = "Refactor the loader so shards stream lazily and the buffer stays bounded. " * 10


def deep_session() -> Session:
    session = Session.new(AgentConfig(), context_window=200_000)
    for number in range(20):
        session.append(UserMessage.text(f"Task {number}: {FILLER}"))
        session.append(AssistantMessage(content=f"Done with task {number}."))
    return session


def state_probes(tmp_path: Path) -> list[ProbeTask]:
    checkpoint = write_checkpoint(
        tmp_path / "family",
        deep_session(),
        state="S1-d50k",
        trunk=TRUNK,
        trunk_position=40,
        trunk_turns_total=40,
        workspace_version=None,
    )
    gold = Gold(answerable="NO", artifact="chart_1")
    questions = [(f"q{n}", f"Which shard held batch {n}?", gold) for n in range(4)]
    return list(plan_probes({"S1-d50k": checkpoint}, questions, ["C0", "Cm"], 1))


async def test_every_probe_of_a_state_reads_the_prefix_the_first_one_wrote(
    tmp_path: Path,
) -> None:
    tasks = state_probes(tmp_path)
    with CachingProvider() as provider:
        backbone = LiteLLMBackbone(
            "anthropic/claude-haiku-4-5", api_base=provider.anthropic_base, api_key="k"
        )
        agent = BuiltinAgent(backbone, memory_url=None, max_output_tokens=64)
        with ResultsLog(tmp_path / "results.jsonl", ProbeRecord) as results:
            await run_probes(agent, tasks, results, KnownIdResolver([]), get_profile())
    first, *later = [
        record.usage for record in read_records(tmp_path / "results.jsonl", ProbeRecord)
    ]
    assert first.cache_write_tokens and first.cache_write_tokens > 2000
    assert first.cached_tokens == 0
    for usage in later:  # C0 and Cm ask differently, yet share the checkpoint's prefix
        assert usage.cache_write_tokens == 0
        assert usage.cached_tokens == first.cache_write_tokens
        assert usage.calls == 1 and usage.input_tokens == usage.eit


async def test_automatic_caching_gets_the_same_bytes_before_every_question(
    tmp_path: Path,
) -> None:
    tasks = state_probes(tmp_path)
    with CachingProvider() as provider:
        backbone = LiteLLMBackbone("openai/fake-model", api_base=provider.openai_base, api_key="k")
        agent = BuiltinAgent(backbone, memory_url=None, max_output_tokens=64)
        with ResultsLog(tmp_path / "results.jsonl", ProbeRecord) as results:
            await run_probes(agent, tasks, results, KnownIdResolver([]), get_profile())
        requests = [request.raw for request in provider.requests]
    prefixes = []
    for raw, task in zip(requests, tasks, strict=True):
        assert b"cache_control" not in raw  # OpenAI rejects the field
        question = json.loads(raw)["messages"][-1]
        assert question["role"] == "user" and task.question in json.dumps(question)
        prefixes.append(raw[: raw.rindex(b'"role"')])  # every byte before the probe message
    assert len(set(prefixes)) == 1 and len(prefixes[0]) > 5000
    first, *later = [
        record.usage for record in read_records(tmp_path / "results.jsonl", ProbeRecord)
    ]
    assert first.cached_tokens == 0
    for usage in later:  # all but the probe message (and the cache's 128-token step) is read
        assert usage.cached_tokens and usage.cached_tokens >= 0.9 * usage.input_tokens
