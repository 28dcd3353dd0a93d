"""``CompactionPolicy`` in the agent loop: trigger, flush, overflow, workspace invariant.

The agent backbone is scripted (its usage sets the EIT); the flush writes through a real MCP
server in a subprocess over a real ``memory_server`` workspace."""

from __future__ import annotations

import datetime as dt
import hashlib
import sys
from pathlib import Path

import pytest

from compaction.config import CompactionConfig
from compaction.flush import flush_records
from compaction.policy import FAILURES_STATE_KEY, CompactionPolicy
from compaction.transcript import previous_summary
from mirage.wiring import memory_server_stdio
from runtime.agent import Agent
from runtime.backbones.base import ProviderError
from runtime.backbones.scripted import ScriptedBackbone
from runtime.mcp_client import MCPServerConfig, MCPToolset
from runtime.messages import Message
from tests.compaction.helpers import conversation, reply, session_with
from tests.memory_server.conftest import write_workspace

SERVER = Path(__file__).parent / "memory_append_server.py"
WINDOW = 32_768  # threshold 12,768; flush threshold 9,576; keep 6,384
APPEND = '<tool_call>{"name": "memory_append", "arguments": {"text": "%s"}}</tool_call>'


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_workspace(tmp_path / "ws")


def _memory_tools(workspace: Path) -> MCPToolset:
    """Entered inside each test: an async yield fixture would close the MCP client's task
    group from another task than the one that opened it."""
    config = MCPServerConfig(
        name="memory", command=sys.executable, args=[str(SERVER), str(workspace)]
    )
    return MCPToolset([config])


def _agent(
    replies: list[object],
    summaries: list[str],
    tools: MCPToolset | None = None,
    history: list[Message] | None = None,
    **config: object,
) -> tuple[Agent, ScriptedBackbone, ScriptedBackbone]:
    backbone = ScriptedBackbone(replies, context_window=WINDOW)  # type: ignore[arg-type]
    summarizer = ScriptedBackbone(summaries, model="summarizer-m", context_window=128_000)
    policy = CompactionPolicy(CompactionConfig(**config), summarizer=summarizer)  # type: ignore[arg-type]
    session = session_with(history if history is not None else conversation(turns=40), WINDOW)
    return Agent(session, backbone, tools, policy), backbone, summarizer


def _evidence_hashes(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".mirage" not in path.relative_to(root).parts
    }


async def test_compaction_fires_only_above_the_threshold() -> None:
    agent, _, summarizer = _agent(
        [reply("a", 12_768), reply("b", 12_769)], ["## Goal\nsummary"], memory_flush=False
    )
    history = list(agent.session.messages)
    first = await agent.turn("one")
    assert first.compaction_count == 0 and not summarizer.calls

    second = await agent.turn("two")
    assert second.compaction_count == 1
    record = agent.session.compaction.records[0]
    assert record.reason == "threshold" and record.format == "verbatim"
    assert record.summarizer_model == "summarizer-m"
    assert record.summary == "## Goal\nsummary" and record.focus is None
    assert record.tokens_after < record.tokens_before
    pre_compaction_length = len(history) + 4  # two user turns and two replies
    kept = len(agent.session.messages) - 1
    assert record.first_kept_index == pre_compaction_length - kept
    assert agent.session.messages[1] == record.first_kept_message
    assert sum(agent.session.message_tokens[1:]) <= 6_384
    assert agent.session.messages[-1].content == "b"  # type: ignore[union-attr]
    assert previous_summary(agent.session.messages[0]) == "## Goal\nsummary"


async def test_window_cap_moves_the_trigger() -> None:
    agent, _, summarizer = _agent(
        [reply("a", 9_000)], ["s"], memory_flush=False, window_cap=16_384
    )  # threshold 8,000
    await agent.turn("one")
    assert agent.session.compaction.count == 1 and len(summarizer.calls) == 1


async def test_disabled_policy_never_compacts() -> None:
    agent, _, _ = _agent([reply("a", 30_000)], [], enabled=False)
    await agent.turn("one")
    assert agent.session.compaction.count == 0


async def test_failed_compaction_is_recorded_and_the_turn_survives() -> None:
    agent, _, _ = _agent([reply("a", 20_000)], [" "], memory_flush=False)
    record = await agent.turn("one")
    assert record.reply == "a" and record.compaction_count == 0
    failures = agent.session.tool_state[FAILURES_STATE_KEY]
    assert failures[0]["reason"] == "threshold" and "empty summary" in failures[0]["error"]


async def test_flush_fires_once_per_cycle_and_appends(workspace: Path) -> None:
    async with _memory_tools(workspace) as tools:
        await _flush_cycles(workspace, tools)


async def _flush_cycles(workspace: Path, memory_tools: MCPToolset) -> None:
    before = _evidence_hashes(workspace)
    notes_before = {p: (workspace / p).read_bytes() for p in before if p.startswith("memory/")}
    note = workspace / "memory" / f"{dt.date.today().isoformat()}.md"
    replies = [
        reply("a", 10_000),  # crosses the flush threshold → flush turn
        reply(APPEND % "Invoice INV-2023-0042 total 4812.5 EUR", 10_100),
        reply("NO_REPLY", 10_200),
        reply("b", 11_000),  # same cycle: no second flush
        reply("c", 13_000),  # above the threshold: compaction, the cycle ends
        reply("d", 10_500),  # new cycle: flush again
        reply("no_reply", 10_600),
    ]
    agent, backbone, summarizer = _agent(replies, ["## Goal\nsummary"], memory_tools)

    await agent.turn("one")
    transcript = list(agent.session.messages)
    assert transcript[-1].content == "a"  # type: ignore[union-attr]
    flushes = flush_records(agent.session)
    assert [f.status for f in flushes] == ["written"]
    assert flushes[0].silent and flushes[0].reply is None and flushes[0].appended == 1
    assert flushes[0].tool_calls[0].name == "memory_append"
    assert flushes[0].tool_calls[0].arguments == {"text": "Invoice INV-2023-0042 total 4812.5 EUR"}
    assert "memory_append" in backbone.calls[1].messages[-1].plain_text  # type: ignore[union-attr]
    assert "Invoice INV-2023-0042 total 4812.5 EUR" in note.read_text()
    assert agent.session.compaction.flushed_in_cycle

    await agent.turn("two")
    assert len(flush_records(agent.session)) == 1
    await agent.turn("three")
    assert agent.session.compaction.count == 1 and not agent.session.compaction.flushed_in_cycle
    assert len(flush_records(agent.session)) == 1
    await agent.turn("four")
    flushes = flush_records(agent.session)
    assert [f.status for f in flushes] == ["written", "nothing_written"]
    assert flushes[1].compaction_cycle == 1
    backbone.assert_exhausted()
    summarizer.assert_exhausted()
    purposes = [call.purpose for call in agent.session.ledger.calls]
    assert purposes.count("flush") == 3 and purposes.count("summary") == 1

    after = _evidence_hashes(workspace)
    assert {path: digest for path, digest in after.items() if not path.startswith("memory/")} == {
        path: digest for path, digest in before.items() if not path.startswith("memory/")
    }
    assert set(before) <= set(after)  # nothing deleted
    assert set(after) - set(before) <= {f"memory/{note.name}"}
    for path, content in notes_before.items():  # notes only grow
        assert (workspace / path).read_bytes().startswith(content)


async def test_flush_without_memory_tool_writes_nothing_and_calls_no_model() -> None:
    agent, backbone, _ = _agent([reply("a", 10_000)], [])
    await agent.turn("one")
    flushes = flush_records(agent.session)
    assert [f.status for f in flushes] == ["no_tool"]
    assert len(backbone.calls) == 1


async def test_flush_turned_off_or_failing_writes_nothing(workspace: Path) -> None:
    before = _evidence_hashes(workspace)
    async with _memory_tools(workspace) as tools:  # one server for both cases (startup cost)
        agent, backbone, _ = _agent([reply("a", 10_000)], [], tools, memory_flush=False)
        await agent.turn("one")
        assert flush_records(agent.session) == [] and len(backbone.calls) == 1

        agent, _, _ = _agent([reply("a", 10_000), ProviderError("server_error", "503")], [], tools)
        record = await agent.turn("one")
        assert record.reply == "a"
        flushes = flush_records(agent.session)
        assert flushes[0].status == "failed" and "503" in (flushes[0].error or "")
        assert agent.session.messages[-1].content == "a"  # type: ignore[union-attr]
    assert _evidence_hashes(workspace) == before


async def test_overflow_compacts_and_retries() -> None:
    agent, _, _ = _agent(
        [ProviderError("context_length", "too long"), reply("fine", 5_000)], ["overflow summary"]
    )
    record = await agent.turn("one")
    assert record.reply == "fine"
    assert [r.reason for r in agent.session.compaction.records] == ["overflow"]


async def test_overflow_retry_is_bounded_and_shrinks_the_tail() -> None:
    overflow = ProviderError("context_length", "too long")
    agent, backbone, _ = _agent([overflow] * 4, ["s1", "s2", "s3"])
    with pytest.raises(ProviderError, match="context_length"):
        await agent.turn("one")
    records = agent.session.compaction.records
    assert [r.reason for r in records] == ["overflow"] * 3
    tails = [r.tokens_after for r in records]
    assert tails == sorted(tails, reverse=True) and tails[0] > tails[-1]
    assert len(backbone.calls) == 4


@pytest.mark.slow
async def test_flush_and_compaction_through_the_real_memory_server(workspace: Path) -> None:
    """The bundled memory server (``mirage memory serve``) as the agent's toolset."""
    before = _evidence_hashes(workspace)
    replies = [
        reply("a", 13_000),  # above both thresholds: flush, then compaction
        reply(APPEND % "chart_3f9a1c20: Berlin 1830 EUR (2019)", 13_100),
        reply("NO_REPLY", 13_200),
    ]
    async with MCPToolset([memory_server_stdio(workspace)]) as tools:
        agent, backbone, summarizer = _agent(replies, ["## Goal\nrent"], tools)
        await agent.turn("one")
    backbone.assert_exhausted()
    summarizer.assert_exhausted()
    assert [f.status for f in flush_records(agent.session)] == ["written"]
    assert agent.session.compaction.count == 1
    note = workspace / "memory" / f"{dt.date.today().isoformat()}.md"
    assert "chart_3f9a1c20: Berlin 1830 EUR (2019)" in note.read_text()
    after = _evidence_hashes(workspace)
    assert {p: d for p, d in after.items() if p != f"memory/{note.name}"} == before


async def test_the_flush_names_the_notes_date_it_is_given(workspace: Path) -> None:
    """A trunk's policy names its own day (``notes_date``), not today, in the flush prompt."""
    async with _memory_tools(workspace) as tools:
        agent, backbone, _ = _agent([reply("a", 10_000), reply("NO_REPLY", 10_100)], [], tools)
        assert isinstance(agent.policy, CompactionPolicy)
        agent.policy.notes_date = "2026-01-01"
        await agent.turn("one")
    flush_prompt = str(backbone.calls[-1])
    assert "memory/2026-01-01.md" in flush_prompt
    assert dt.date.today().isoformat() not in flush_prompt
